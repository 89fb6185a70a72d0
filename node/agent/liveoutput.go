package agent

import (
	"crypto/subtle"
	"net/http"
	"strings"
)

// OutputPath is the node endpoint that streams a run's output while it runs
// (Go 1.22 mux pattern; the fire id is the path value "fire_id").
const OutputPath = "/runs/{fire_id}/output"

// OutputHandler serves GET OutputPath: the output a fire held by this agent
// (queued or running) has written so far, then, unless the query has
// follow=0, new output as it comes until the fire ends, as chunked
// text/plain flushed per chunk. It answers 401 without "Authorization:
// Bearer <token>" and 404 for a fire this agent does not hold (finished
// fires are read from the server's record). Only the first OutputCap bytes
// of a run are kept, so the stream stops growing at the cap.
func (a *Agent) OutputHandler(token string, previous ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !TokenOK(r, token, previous...) {
			http.Error(w, "missing or invalid node token", http.StatusUnauthorized)
			return
		}
		fireID := r.PathValue("fire_id")
		e, ok := a.lookup(fireID)
		if !ok {
			http.Error(w, "fire "+fireID+" is not running on this node", http.StatusNotFound)
			return
		}
		follow := r.URL.Query().Get("follow") != "0"
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		offset := 0
		for {
			chunk, done, more := e.out.ReadFrom(offset)
			if len(chunk) > 0 {
				if _, err := w.Write(chunk); err != nil {
					return
				}
				offset += len(chunk)
			}
			_ = rc.Flush()
			if done || !follow {
				return
			}
			select {
			case <-more:
			case <-r.Context().Done():
				return
			}
		}
	})
}

// TokenOK reports whether r carries "Authorization: Bearer <token>" with
// the node token or one of the previous ones (empty ones never match).
func TokenOK(r *http.Request, token string, previous ...string) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || got == "" {
		return false
	}
	match := false
	for _, t := range append([]string{token}, previous...) {
		if t != "" && subtle.ConstantTimeCompare([]byte(got), []byte(t)) == 1 {
			match = true
		}
	}
	return match
}
