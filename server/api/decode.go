package api

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/cronix/cronix/cluster"
)

// nulMessage is the field message of a string that holds a NUL character
// (U+0000): no database stores one in text (bun refuses to quote it, a 500
// before), and no name, filter or setting needs one. jobs.go's checkNUL
// words it the same way.
func nulMessage(field string) string {
	return field + " must not contain a NUL character (\\u0000)"
}

// nulCleaned are the struct fields that may hold a NUL: a run's output and
// message, which a node reports as the process wrote them and the store
// cleans (NUL becomes U+FFFD) instead of refusing.
var nulCleaned = map[reflect.Type]map[string]bool{
	reflect.TypeFor[cluster.RunResult](): {"Output": true, "Message": true},
}

// nulFields walks a decoded request body and records, under its JSON path
// ("title", "events[0].node", "group_emails.ops"), every string that holds a
// NUL character, and every map whose keys do. The elements of an array of
// strings are reported on the array ("alarm_emails"), as the API names
// their other errors. json.RawMessage values (job params) are not strings:
// the handler's schema and plugin judge them, and they are stored as JSON
// text, where a NUL is the escape \u0000.
func nulFields(v reflect.Value, path string, fields map[string]string) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			nulFields(v.Elem(), path, fields)
		}
	case reflect.String:
		if strings.IndexByte(v.String(), 0) >= 0 {
			fields[pathOrBody(path)] = nulMessage(leafName(path))
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() || nulCleaned[t][f.Name] {
				continue
			}
			name, ok := jsonName(f)
			if !ok {
				continue
			}
			if f.Anonymous && name == "" {
				nulFields(v.Field(i), path, fields) // embedded: its fields are the parent's
				continue
			}
			nulFields(v.Field(i), joinPath(path, name), fields)
		}
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			return // []byte, json.RawMessage
		}
		scalar := derefType(v.Type().Elem()).Kind() == reflect.String
		for i := range v.Len() {
			if scalar {
				nulFields(v.Index(i), path, fields)
			} else {
				nulFields(v.Index(i), path+"["+strconv.Itoa(i)+"]", fields)
			}
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			k := it.Key()
			key := fmt.Sprint(k.Interface())
			if strings.IndexByte(key, 0) >= 0 {
				fields[pathOrBody(path)] = leafName(path) + " keys must not contain a NUL character (\\u0000)"
				continue
			}
			nulFields(it.Value(), joinPath(path, key), fields)
		}
	}
}

// jsonName is the JSON name of a struct field: its tag's name, "" for an
// embedded struct without one, the Go name otherwise; false for `json:"-"`.
func jsonName(f reflect.StructField) (string, bool) {
	tag := f.Tag.Get("json")
	if tag == "-" {
		return "", false
	}
	name, _, _ := strings.Cut(tag, ",")
	if name == "" && !f.Anonymous {
		name = f.Name
	}
	if name == "" && f.Anonymous && derefType(f.Type).Kind() != reflect.Struct {
		name = f.Name
	}
	return name, true
}

func derefType(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func joinPath(path, name string) string {
	if path == "" || name == "" {
		return path + name
	}
	return path + "." + name
}

// pathOrBody names the whole body when the path is empty.
func pathOrBody(path string) string {
	if path == "" {
		return "body"
	}
	return path
}

// leafName is the last name of a path: "node" of "events[0].node".
func leafName(path string) string {
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		path = path[i+1:]
	}
	if i := strings.IndexByte(path, '['); i > 0 {
		path = path[:i]
	}
	if path == "" {
		return "the value"
	}
	return path
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
