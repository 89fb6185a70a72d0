package agent

import "context"

// background is a goroutine an agent component owns: start runs loop
// until stop cancels its context, and stop waits for it to return.
type background struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (b *background) start(ctx context.Context, loop func(context.Context)) {
	ctx, b.cancel = context.WithCancel(ctx)
	b.done = make(chan struct{})
	go func() {
		defer close(b.done)
		loop(ctx)
	}()
}

// stop cancels the loop and waits for it; it reports false if the loop
// was never started.
func (b *background) stop() bool {
	if b.cancel == nil {
		return false
	}
	b.cancel()
	<-b.done
	return true
}
