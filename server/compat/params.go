package compat

import (
	"encoding/json"
	"strings"
)

// paramsOf maps xxl-job's executorParam (free text) to the params object of
// a built-in handler:
//
//   - shell: the script text → {"script": text}
//   - cmd: a command line split into argv (spaces; '…' and "…" quote) →
//     {"argv": [...]}
//   - http: xxl-job's httpJobHandler lines "url:…", "method:…", "data:…"
//     → {"url", "method", "body"}
//   - any other handler: a JSON object, or "" for {}
//
// For every handler, a text that is a JSON object is the params as they
// are (how /jobinfo/list shows params the text form cannot carry, such as
// cmd's env and dir or http's headers).
func paramsOf(handler, text string) (json.RawMessage, error) {
	trimmed := strings.TrimSpace(text)
	if strings.HasPrefix(trimmed, "{") {
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(trimmed), &m) == nil {
			return json.RawMessage(trimmed), nil
		}
	}
	var v any
	switch handler {
	case "shell":
		if trimmed == "" {
			return json.RawMessage("{}"), nil
		}
		v = map[string]string{"script": text}
	case "cmd":
		argv, err := splitCommand(trimmed)
		if err != nil {
			return nil, err
		}
		if len(argv) == 0 {
			return json.RawMessage("{}"), nil
		}
		v = map[string][]string{"argv": argv}
	case "http":
		if trimmed == "" {
			return json.RawMessage("{}"), nil
		}
		m := map[string]string{}
		for _, line := range strings.Split(text, "\n") {
			k, val, ok := strings.Cut(strings.TrimRight(line, "\r"), ":")
			if !ok {
				continue
			}
			val = strings.TrimSpace(val)
			switch strings.ToLower(strings.TrimSpace(k)) {
			case "url":
				m["url"] = val
			case "method":
				m["method"] = strings.ToUpper(val)
			case "data":
				m["body"] = val
			}
		}
		if m["url"] == "" {
			return nil, invalid("executorParam of the http handler needs a line \"url:http://...\"")
		}
		v = m
	default:
		if trimmed == "" {
			return json.RawMessage("{}"), nil
		}
		if !strings.HasPrefix(trimmed, "{") || !json.Valid([]byte(trimmed)) {
			return nil, invalid("executorParam of handler %q must be a JSON object", handler)
		}
		return json.RawMessage(trimmed), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// executorParamOf is the inverse of paramsOf, for /jobinfo/list: the
// handler's text form when paramsOf reads it back to the same params, else
// the params' JSON.
func executorParamOf(handler string, params json.RawMessage) string {
	if len(params) == 0 || string(params) == "{}" {
		return ""
	}
	text := textParam(handler, params)
	if text != "" {
		if back, err := paramsOf(handler, text); err == nil && jsonEqual(back, params) {
			return text
		}
	}
	return string(params)
}

// textParam is params in its handler's text form, "" when it has none.
func textParam(handler string, params json.RawMessage) string {
	switch handler {
	case "shell":
		var p struct {
			Script string `json:"script"`
		}
		if json.Unmarshal(params, &p) == nil && p.Script != "" {
			return p.Script
		}
	case "cmd":
		var p struct {
			Argv []string `json:"argv"`
		}
		if json.Unmarshal(params, &p) == nil && len(p.Argv) > 0 {
			parts := make([]string, len(p.Argv))
			for i, a := range p.Argv {
				parts[i] = quoteArg(a)
			}
			return strings.Join(parts, " ")
		}
	case "http":
		var p struct {
			URL    string `json:"url"`
			Method string `json:"method"`
			Body   string `json:"body"`
		}
		if json.Unmarshal(params, &p) == nil && p.URL != "" {
			s := "url:" + p.URL
			if p.Method != "" {
				s += "\nmethod:" + p.Method
			}
			if p.Body != "" {
				s += "\ndata:" + p.Body
			}
			return s
		}
	}
	return ""
}

// splitCommand splits a command line on spaces; single or double quotes
// group, a backslash escapes the next character outside single quotes.
func splitCommand(s string) ([]string, error) {
	var (
		argv  []string
		cur   strings.Builder
		inArg bool
		quote rune
		esc   bool
	)
	for _, r := range s {
		switch {
		case esc:
			cur.WriteRune(r)
			esc = false
		case r == '\\' && quote != '\'':
			esc, inArg = true, true
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inArg = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inArg {
				argv = append(argv, cur.String())
				cur.Reset()
				inArg = false
			}
		default:
			cur.WriteRune(r)
			inArg = true
		}
	}
	if quote != 0 || esc {
		return nil, invalid("executorParam of the cmd handler has an unclosed quote or trailing backslash")
	}
	if inArg {
		argv = append(argv, cur.String())
	}
	return argv, nil
}

func quoteArg(a string) string {
	if a != "" && !strings.ContainsAny(a, " \t\n'\"\\") {
		return a
	}
	return "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
}
