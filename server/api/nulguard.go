package api

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
)

// refuseNUL is the router's first middleware, before authentication: a
// request with a NUL character (%00) in a query parameter, in a form
// (application/x-www-form-urlencoded) body, or on the xxl-job-compatible
// API in any body parameter it reads (a form, or a JSON object's top-level
// strings), gets a 400 naming the parameter and reaches no handler. No
// database stores a NUL in text: such a filter or name used to reach SQL
// and answer 500, even to an anonymous caller. JSON bodies of the REST API
// are checked by decodeJSON, field by field.
func (s *server) refuseNUL(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if name, ok := nulParam(r.URL.RawQuery); ok {
			s.refuseParam(w, r, name, "query parameter")
			return
		}
		if r.Body != nil && r.Body != http.NoBody && r.Method != http.MethodGet && r.Method != http.MethodHead {
			compat := isCompatPath(r.URL.Path)
			ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
			if compat || ct == "application/x-www-form-urlencoded" {
				body, whole, err := peekBody(r, MaxBodyBytes)
				if err != nil {
					s.refuse(w, r, &ValidationError{Message: "cannot read the request body"})
					return
				}
				if whole {
					if name, ok := nulBodyParam(body, compat, ct); ok {
						s.refuseParam(w, r, name, "body parameter")
						return
					}
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// peekBody reads up to limit bytes of r's body and puts them back in front
// of the rest, so the handler reads the body unchanged (and applies its own
// limit). whole reports whether that was the entire body.
func peekBody(r *http.Request, limit int64) (body []byte, whole bool, err error) {
	body, err = io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, false, err
	}
	whole = int64(len(body)) <= limit
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
	return body, whole, nil
}

// nulParam returns the first parameter of a query string (or form body)
// whose name or value holds a NUL character.
func nulParam(raw string) (string, bool) {
	if !strings.Contains(raw, "%00") && strings.IndexByte(raw, 0) < 0 {
		return "", false
	}
	q, _ := url.ParseQuery(raw) // malformed pairs are dropped here as by r.URL.Query()
	for _, name := range sortedKeys(q) {
		if strings.IndexByte(name, 0) >= 0 {
			return name, true
		}
		for _, v := range q[name] {
			if strings.IndexByte(v, 0) >= 0 {
				return name, true
			}
		}
	}
	return "", false
}

// nulBodyParam returns the first body parameter holding a NUL character:
// of a form body, or on the compat API (compat) of the body as
// server/compat reads it (a JSON object when it starts with "{", else a
// form whatever its content type).
func nulBodyParam(body []byte, compat bool, contentType string) (string, bool) {
	trimmed := bytes.TrimSpace(body)
	if compat && (contentType == "application/json" || bytes.HasPrefix(trimmed, []byte("{"))) {
		var m map[string]json.RawMessage
		if json.Unmarshal(trimmed, &m) != nil {
			return "", false // compat answers malformed JSON itself
		}
		for _, k := range sortedKeys(m) {
			var v string
			if strings.IndexByte(k, 0) >= 0 || (json.Unmarshal(m[k], &v) == nil && strings.IndexByte(v, 0) >= 0) {
				return k, true
			}
		}
		return "", false
	}
	return nulParam(string(trimmed))
}

// refuseParam answers 400 for a parameter holding a NUL.
func (s *server) refuseParam(w http.ResponseWriter, r *http.Request, name, what string) {
	field := strings.ReplaceAll(name, "\x00", `\u0000`)
	s.refuse(w, r, invalidField(field, what+" "+nulMessage(field)))
}

// refuse answers 400 for ve: in xxl-job's envelope on the compat API (as
// deny does for its errors), else as every API error.
func (s *server) refuse(w http.ResponseWriter, r *http.Request, ve *ValidationError) {
	if !isCompatPath(r.URL.Path) {
		s.writeError(w, r, ve)
		return
	}
	msg := ve.Message
	for _, k := range sortedKeys(ve.Fields) {
		msg += ": " + ve.Fields[k]
	}
	writeJSON(w, http.StatusBadRequest, map[string]any{"code": http.StatusBadRequest, "msg": msg, "content": nil})
}
