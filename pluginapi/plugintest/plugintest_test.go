package plugintest_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/pluginapi"
	"github.com/cronix/cronix/pluginapi/plugintest"
)

// brokenHandler breaks one rule of the contract, chosen by flaw.
type brokenHandler struct{ flaw string }

func (h brokenHandler) Info(context.Context) (pluginapi.Info, error) {
	info := pluginapi.Info{
		Name:         "broken",
		Version:      "1",
		ParamsSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}},"required":["x"]}`),
	}
	switch h.flaw {
	case "no-name":
		info.Name = ""
	case "bad-schema":
		info.ParamsSchema = json.RawMessage(`not json`)
	}
	return info, nil
}

func (h brokenHandler) Validate(_ context.Context, params json.RawMessage) error {
	var p map[string]any
	if err := json.Unmarshal(params, &p); err != nil {
		return pluginapi.InvalidParams("", "not an object")
	}
	if _, ok := p["x"]; !ok {
		switch h.flaw {
		case "accepts-empty":
			return nil
		case "untyped-error":
			return io.ErrUnexpectedEOF
		}
		return pluginapi.InvalidParams("x", "required")
	}
	return nil
}

func (h brokenHandler) Run(ctx context.Context, _ pluginapi.Request, _ io.Writer) (pluginapi.Result, error) {
	switch h.flaw {
	case "bad-status":
		return pluginapi.Result{Status: "done"}, nil
	case "ignores-ctx":
		select { // ignores ctx; bounded only so the helper process ends
		case <-time.After(1500 * time.Millisecond):
		case <-make(chan struct{}):
		}
		return pluginapi.Result{Status: pluginapi.StatusSuccess}, nil
	}
	if ctx.Err() != nil {
		return pluginapi.Result{Status: pluginapi.StatusFailed, Message: "killed"}, nil //nolint:nilerr // a run stopped by its context is a result, not a handler error
	}
	return pluginapi.Result{Status: pluginapi.StatusSuccess}, nil
}

// TestBrokenHandlerHelper runs CheckContract on a broken handler; it only
// runs as a child process of TestCheckContractCatchesBrokenHandlers.
func TestBrokenHandlerHelper(t *testing.T) {
	flaw := os.Getenv("PLUGINTEST_FLAW")
	if flaw == "" {
		t.Skip("helper process for TestCheckContractCatchesBrokenHandlers")
	}
	plugintest.CheckContract(t, brokenHandler{flaw: flaw}, json.RawMessage(`{"x":"1"}`), plugintest.StopWithin(500*time.Millisecond))
}

func TestCheckContractPassesACorrectHandler(t *testing.T) {
	t.Parallel()
	plugintest.CheckContract(t, brokenHandler{}, json.RawMessage(`{"x":"1"}`))
}

func TestCheckContractCatchesBrokenHandlers(t *testing.T) {
	t.Parallel()
	for flaw, want := range map[string]string{
		"no-name":       "Info.Name",
		"bad-schema":    "Info.ParamsSchema is not a JSON object",
		"accepts-empty": "Validate({}) = nil",
		"untyped-error": "want an InvalidParams error",
		"bad-status":    `Run returned status "done"`,
		"ignores-ctx":   "did not return within 500ms",
	} {
		t.Run(flaw, func(t *testing.T) {
			t.Parallel()
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestBrokenHandlerHelper$", "-test.v")
			cmd.Env = append(os.Environ(), "PLUGINTEST_FLAW="+flaw)
			out, err := cmd.CombinedOutput()
			require.Error(t, err, "CheckContract passed a handler with flaw %q:\n%s", flaw, out)
			require.Contains(t, string(out), want)
		})
	}
}
