package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/cronix/cronix/server/store"
)

// ErrorResponse is the body of every error reply.
type ErrorResponse struct {
	// Error says what went wrong, fit to show a user.
	Error string `json:"error"`
	// Fields maps request field names to what is wrong with each, for 400s.
	Fields map[string]string `json:"fields,omitempty"`
}

// ValidationError is invalid input (400): a summary and per-field messages.
type ValidationError struct {
	Message string
	Fields  map[string]string
}

func (e *ValidationError) Error() string {
	if len(e.Fields) == 0 {
		return e.Message
	}
	parts := make([]string, 0, len(e.Fields))
	for k, v := range e.Fields {
		parts = append(parts, k+": "+v)
	}
	return e.Message + " (" + strings.Join(parts, "; ") + ")"
}

// invalidField is a ValidationError about one field.
func invalidField(field, msg string) *ValidationError {
	return &ValidationError{Message: "invalid request", Fields: map[string]string{field: msg}}
}

// statusError is an error with a fixed HTTP status and public message.
type statusError struct {
	status int
	msg    string
}

func (e *statusError) Error() string { return e.msg }

var (
	errUnauthorized     = &statusError{http.StatusUnauthorized, "missing or invalid bearer token"}
	errForbidden        = &statusError{http.StatusForbidden, "your role does not allow this"}
	errCSRF             = &statusError{http.StatusForbidden, "missing or invalid CSRF token"}
	errBadCredentials   = &statusError{http.StatusUnauthorized, "invalid username or password"}
	errRouteNotFound    = &statusError{http.StatusNotFound, "no such API route"}
	errMethodNotAllowed = &statusError{http.StatusMethodNotAllowed, "method not allowed on this route"}
)

// StatusOf returns the HTTP status and public message of an error with a
// fixed status (401, 403, ...), for other front doors (server/compat).
func StatusOf(err error) (status int, msg string, ok bool) {
	var se *statusError
	if errors.As(err, &se) {
		return se.status, se.msg, true
	}
	return 0, "", false
}

// throttledError is a login (or another password check) refused until
// retryAfter has passed (429).
type throttledError struct {
	retryAfter time.Duration
	msg        string // "" = the login's message
}

func (e *throttledError) Error() string {
	if e.msg != "" {
		return e.msg
	}
	return "too many failed logins, retry later"
}

// publicError attaches a message fit for the client to an error that keeps
// its kind (errors.Is/As see through it), e.g. "job 7 not found" on a
// store.ErrNotFound.
type publicError struct {
	msg string
	err error
}

func (e *publicError) Error() string { return e.msg + ": " + e.err.Error() }
func (e *publicError) Unwrap() error { return e.err }

// public wraps err with a client-facing message; nil stays nil.
func public(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return &publicError{msg: fmt.Sprintf(format, args...), err: err}
}

// publicMessage is the outermost public message of err, or fallback.
func publicMessage(err error, fallback string) string {
	var pe *publicError
	if errors.As(err, &pe) {
		return pe.msg
	}
	return fallback
}

// writeError is the one place errors become HTTP statuses.
func (s *server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var (
		ve  *ValidationError
		se  *statusError
		mbe *http.MaxBytesError
		te  *throttledError
	)
	resp := ErrorResponse{}
	status := http.StatusInternalServerError
	switch {
	case errors.As(err, &te):
		secs := int64(math.Ceil(te.retryAfter.Seconds()))
		w.Header().Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
		status, resp.Error = http.StatusTooManyRequests, te.Error()
	case errors.As(err, &ve):
		status, resp.Error, resp.Fields = http.StatusBadRequest, ve.Message, ve.Fields
	case errors.As(err, &mbe):
		status, resp.Error = http.StatusRequestEntityTooLarge, "request body exceeds "+formatBytes(mbe.Limit)
	case errors.As(err, &se):
		status, resp.Error = se.status, se.msg
	case errors.Is(err, store.ErrNotFound):
		status, resp.Error = http.StatusNotFound, publicMessage(err, "not found")
	case errors.Is(err, store.ErrConflict):
		status, resp.Error = http.StatusConflict, publicMessage(err, "conflict")
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away (or this server is stopping and closed its
		// connection): nothing failed that an operator can act on, and the
		// answer reaches nobody. A node re-sends results it got no 200 for.
		status, resp.Error = http.StatusServiceUnavailable, "request cancelled"
		s.log.DebugContext(r.Context(), "api request cancelled by its client",
			slog.String("method", r.Method), slog.String("path", r.URL.Path))
	default:
		resp.Error = "internal error"
		s.log.ErrorContext(r.Context(), "api request failed",
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Any("error", err))
	}
	writeJSON(w, status, resp)
}

// formatBytes renders a body limit: "1 MiB", "64 MiB", or bytes.
func formatBytes(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	if n >= 1<<10 && n%(1<<10) == 0 {
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// writeJSON writes v as the JSON body with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":"internal error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// errEmptyBody is returned by decodeJSON for a body with no JSON value.
var errEmptyBody = errors.New("empty body")

// decodeJSON decodes the request body (one JSON object) into dst. With
// strict, unknown fields are rejected. Errors are ValidationErrors (400), a
// *http.MaxBytesError (413), or errEmptyBody. A field that does not decode
// (a type mismatch, an unknown field, a time that does not parse) is named
// by its JSON path ("expires_at", "webhooks[0].url"; bodyFieldError), and so
// is every string holding a NUL character (nulFields): no database stores
// one, so it is refused here, before anything reaches SQL or the audit log.
func decodeJSON(r *http.Request, dst any, strict bool) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return jsonError(err) // a *http.MaxBytesError (413), or the body ended early
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(dst); err != nil {
		return bodyError(err, body, dst, strict)
	}
	// Exactly one value: anything after it but whitespace is malformed.
	var extra json.RawMessage
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return jsonError(err)
		}
		return &ValidationError{Message: "malformed JSON: unexpected data after the object"}
	}
	fields := map[string]string{}
	nulFields(reflect.ValueOf(dst), "", fields)
	if len(fields) > 0 {
		return &ValidationError{Message: "invalid request", Fields: fields}
	}
	return nil
}

// bodyError is the error of decoding body into dst: a syntax error as
// jsonError words it, any other named by the field it is about.
func bodyError(err error, body []byte, dst any, strict bool) error {
	var se *json.SyntaxError
	if errors.As(err, &se) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return jsonError(err)
	}
	if ve := bodyFieldError(body, dst, strict); ve != nil {
		return ve
	}
	return jsonError(err)
}

// jsonError classifies a json.Decoder error.
func jsonError(err error) error {
	var (
		mbe *http.MaxBytesError
		se  *json.SyntaxError
		te  *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &mbe):
		return err
	case errors.Is(err, io.EOF):
		return errEmptyBody
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &ValidationError{Message: "malformed JSON: unexpected end of body"}
	case errors.As(err, &se):
		return &ValidationError{Message: "malformed JSON: " + strings.TrimPrefix(se.Error(), "json: ")}
	case errors.As(err, &te):
		if te.Field == "" {
			return &ValidationError{Message: "request body must be a JSON object"}
		}
		return &ValidationError{Message: "invalid request", Fields: map[string]string{
			te.Field: fmt.Sprintf("must be %s, not %s", jsonKind(te.Type), te.Value),
		}}
	}
	if name, ok := strings.CutPrefix(err.Error(), `json: unknown field "`); ok {
		name = strings.TrimSuffix(name, `"`)
		return &ValidationError{Message: "invalid request", Fields: map[string]string{name: "unknown field"}}
	}
	return &ValidationError{Message: "malformed JSON: " + strings.TrimPrefix(err.Error(), "json: ")}
}

// jsonKind names the JSON kind a Go type is decoded from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return jsonKind(t.Elem())
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	default:
		return "an object"
	}
}
