package api

import (
	"encoding/json"
	"regexp"
)

// redacted replaces a secret's value in the audit log.
const redacted = "[redacted]"

// secretKey matches the JSON keys whose values the audit log never keeps:
// a job's params and env carry credentials under names like these (an http
// job's "Authorization" header, a shell job's DB_PASSWORD).
var secretKey = regexp.MustCompile(`(?i)(passw(or)?d|passwd|secret|token|authorization|api[-_]?key|credential|private[-_]?key|cookie|signature)`)

// redactJSON returns v as JSON with the value of every object key that
// names a secret, at any depth, replaced by "[redacted]". A diff's "from"
// and "to" under such a key are both replaced, so the entry still shows
// that the secret changed but not what it was or became.
func redactJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var tree any
	if err := json.Unmarshal(b, &tree); err != nil {
		return nil, err
	}
	return json.Marshal(redactTree(tree))
}

func redactTree(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, child := range t {
			if secretKey.MatchString(k) && child != nil {
				t[k] = redactLeaves(child)
				continue
			}
			t[k] = redactTree(child)
		}
		return t
	case []any:
		for i, child := range t {
			t[i] = redactTree(child)
		}
		return t
	}
	return v
}

// redactLeaves keeps the shape of a diff ({"from":…, "to":…}) or of a
// nested object under a secret key and replaces every scalar in it.
func redactLeaves(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, child := range t {
			if child == nil {
				continue
			}
			t[k] = redactLeaves(child)
		}
		return t
	case []any:
		for i, child := range t {
			t[i] = redactLeaves(child)
		}
		return t
	}
	return redacted
}
