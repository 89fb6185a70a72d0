package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/cronix/cronix/node/agent"
	"github.com/cronix/cronix/pluginapi"
)

// ValidatePath is the node endpoint servers call when a job is saved, to
// have the handler plugin check the job's params (Go 1.22 mux pattern; the
// handler name is the path value "name").
const ValidatePath = "/handlers/{name}/validate"

// Validate limits.
const (
	// MaxValidateBodyBytes limits the params a validate request carries.
	MaxValidateBodyBytes = 64 << 10
	// ValidateTimeout bounds one plugin Validate call.
	ValidateTimeout = 3 * time.Second
)

// ParamsValidator checks a job's params with a named handler
// (*pluginhost.Host).
type ParamsValidator interface {
	Validate(ctx context.Context, handler string, params json.RawMessage) error
}

// ValidateResponse is the body of a 200 or 422 answer of ValidatePath.
type ValidateResponse struct {
	// OK is true when the plugin accepted the params.
	OK bool `json:"ok"`
	// Field is the offending params field ("" = the params as a whole);
	// set only when OK is false.
	Field string `json:"field,omitempty"`
	// Message says what is wrong with Field; set only when OK is false.
	Message string `json:"message,omitempty"`
}

// ValidateHandler serves POST ValidatePath: the body is a job's params (a
// JSON object, at most MaxValidateBodyBytes), checked by the handler
// plugin's own Validate within ValidateTimeout. Answers:
//
//   - 200 {"ok":true}: the plugin accepted the params;
//   - 422 {"ok":false,"field":"...","message":"..."}: the plugin rejected
//     them with a pluginapi.InvalidParams error;
//   - 401 without "Authorization: Bearer <token>" (an empty token rejects
//     every request); 400 when the body is not a JSON object; 413 when it
//     is too large;
//   - 502 {"error":"..."} for any other failure (unknown handler, plugin
//     down, timeout): the params were not judged.
func ValidateHandler(v ParamsValidator, token string, previous ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !agent.TokenOK(r, token, previous...) {
			writeError(w, http.StatusUnauthorized, "missing or invalid node token")
			return
		}
		name := r.PathValue("name")
		var buf bytes.Buffer
		if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, MaxValidateBodyBytes)); err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("params exceed %d KiB", MaxValidateBodyBytes>>10))
				return
			}
			writeError(w, http.StatusBadRequest, "reading params: "+err.Error())
			return
		}
		params := bytes.TrimSpace(buf.Bytes())
		var obj map[string]json.RawMessage
		if len(params) == 0 || params[0] != '{' || json.Unmarshal(params, &obj) != nil {
			writeError(w, http.StatusBadRequest, "params must be a JSON object")
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), ValidateTimeout)
		defer cancel()
		err := v.Validate(ctx, name, json.RawMessage(params))
		if ip, ok := pluginapi.AsInvalidParams(err); ok {
			writeJSON(w, http.StatusUnprocessableEntity, ValidateResponse{Field: ip.Field(), Message: ip.Message()})
			return
		}
		if err != nil {
			writeError(w, http.StatusBadGateway, fmt.Sprintf("validating params with handler %q: %v", name, err))
			return
		}
		writeJSON(w, http.StatusOK, ValidateResponse{OK: true})
	})
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encoding the answer failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
