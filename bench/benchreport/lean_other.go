//go:build !linux

package benchreport

import (
	"net/http"
	"time"
)

// LeanReceiver is, off Linux, the net/http Receiver calling fn from its
// handler (no receive timestamps).
type LeanReceiver struct{ *Receiver }

// StartLeanReceiver serves on a free loopback port, calling fn for every
// request; workers and opts are used on Linux only.
func StartLeanReceiver(_ int, fn func(Arrived), _ ...LeanOption) (*LeanReceiver, error) {
	r, err := StartReceiver(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		fn(Arrived{Path: req.URL.Path, FireID: req.Header.Get("X-Cronix-Fire-Id"), At: time.Now()})
		w.WriteHeader(http.StatusNoContent)
	}))
	if err != nil {
		return nil, err
	}
	return &LeanReceiver{r}, nil
}
