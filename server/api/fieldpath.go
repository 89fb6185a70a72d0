package api

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// bodyFieldError turns an error of decoding body into dst (a type error, an
// unknown field, or an error of a type's own UnmarshalJSON such as a time
// that does not parse) into a 400 naming the field by its JSON path. It
// finds the field by decoding the body's parts one by one: the deepest part
// that fails on its own is the culprit. nil when it cannot tell.
func bodyFieldError(body []byte, dst any, strict bool) *ValidationError {
	var doc any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if dec.Decode(&doc) != nil {
		return nil //nolint:nilerr // not JSON: the caller words the syntax error
	}
	path, t, err := locate(doc, reflect.TypeOf(dst), "", strict)
	if err == nil {
		return nil
	}
	field, msg := path, ""
	var te *json.UnmarshalTypeError
	switch {
	case path != "" && isTimeType(t):
		msg = timeMessage
	case errors.As(err, &te):
		if path == "" && te.Field == "" {
			return &ValidationError{Message: "request body must be a JSON object"}
		}
		field = joinPath(path, te.Field)
		msg = fmt.Sprintf("must be %s, not %s", jsonKind(te.Type), te.Value)
	case strings.HasPrefix(err.Error(), `json: unknown field "`):
		name := strings.TrimSuffix(strings.TrimPrefix(err.Error(), `json: unknown field "`), `"`)
		field, msg = joinPath(path, name), "unknown field"
	default:
		msg = strings.TrimPrefix(err.Error(), "json: ")
	}
	if field == "" {
		return &ValidationError{Message: "invalid request body: " + msg}
	}
	return &ValidationError{Message: "invalid request", Fields: map[string]string{field: msg}}
}

// timeMessage is the field message of an instant that does not parse.
const timeMessage = "must be an RFC 3339 time such as 2026-03-01T09:00:00Z"

var (
	timeType    = reflect.TypeFor[time.Time]()
	apiTimeType = reflect.TypeFor[Time]()
)

func isTimeType(t reflect.Type) bool {
	t = derefType(t)
	return t == timeType || t == apiTimeType
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// opaque reports whether t decodes itself (UnmarshalJSON or UnmarshalText):
// its parts are not looked into.
func opaque(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return t.Implements(jsonUnmarshaler) || p.Implements(jsonUnmarshaler) ||
		t.Implements(textUnmarshaler) || p.Implements(textUnmarshaler)
}

// decodePart decodes the JSON value v (from a UseNumber decode) into a new t.
func decodePart(v any, t reflect.Type, strict bool) error {
	b, err := json.Marshal(v)
	if err != nil {
		return nil //nolint:nilerr // cannot re-encode: nothing to blame on this part
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if strict {
		dec.DisallowUnknownFields()
	}
	return dec.Decode(reflect.New(t).Interface())
}

// locate returns the path and type of the deepest part of v that fails to
// decode into t on its own, and that part's error; a nil error when v
// decodes.
func locate(v any, t reflect.Type, path string, strict bool) (string, reflect.Type, error) {
	t = derefType(t)
	err := decodePart(v, t, strict)
	if err == nil || v == nil || opaque(t) {
		return path, t, err
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			break
		}
		for _, k := range sortedKeys(obj) {
			var ft reflect.Type
			if t.Kind() == reflect.Struct {
				var found bool
				if ft, found = fieldType(t, k); !found {
					continue
				}
			} else {
				ft = t.Elem()
			}
			if p, pt, perr := locate(obj[k], ft, joinPath(path, k), strict); perr != nil {
				return p, pt, perr
			}
		}
	case reflect.Slice, reflect.Array:
		arr, ok := v.([]any)
		if !ok {
			break
		}
		for i, e := range arr {
			if p, pt, perr := locate(e, t.Elem(), path+"["+strconv.Itoa(i)+"]", strict); perr != nil {
				return p, pt, perr
			}
		}
	}
	return path, t, err
}

// fieldType is the type of the field of struct t that the JSON key k
// decodes into, as encoding/json matches it (exact name first, then
// case-insensitively), embedded structs included.
func fieldType(t reflect.Type, k string) (reflect.Type, bool) {
	var fold reflect.Type
	var walk func(t reflect.Type) (reflect.Type, bool)
	walk = func(t reflect.Type) (reflect.Type, bool) {
		for i := range t.NumField() {
			f := t.Field(i)
			name, ok := jsonName(f)
			if !ok {
				continue
			}
			if f.Anonymous && name == "" {
				if ft, ok := walk(derefType(f.Type)); ok {
					return ft, true
				}
				continue
			}
			if !f.IsExported() {
				continue
			}
			if name == k {
				return f.Type, true
			}
			if fold == nil && strings.EqualFold(name, k) {
				fold = f.Type
			}
		}
		return nil, false
	}
	if ft, ok := walk(t); ok {
		return ft, true
	}
	return fold, fold != nil
}
