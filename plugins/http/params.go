package http

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/cronix/cronix/pluginapi"
)

// Params are the http handler's job params.
type Params struct {
	// Method is the request method; default GET.
	Method string `json:"method,omitempty"`
	// URL is the absolute http or https URL. Required.
	URL string `json:"url"`
	// Headers are request headers.
	Headers map[string]string `json:"headers,omitempty"`
	// Body is the request body.
	Body string `json:"body,omitempty"`
	// ExpectedStatus lists the status codes that mean success; empty = any 2xx.
	ExpectedStatus []int `json:"expected_status,omitempty"`
	// BodyRegex, when set, must match the (captured) response body for success.
	BodyRegex string `json:"body_regex,omitempty"`
	// InsecureSkipVerify turns TLS certificate verification off.
	InsecureSkipVerify bool `json:"insecure_skip_verify,omitempty"`
	// TimeoutSeconds bounds the request; 0 = only the job's timeout.
	TimeoutSeconds int `json:"timeout_seconds,omitempty"`
}

// methods are the request methods a job may use.
var methods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// maxTimeoutSeconds bounds timeout_seconds (one day).
const maxTimeoutSeconds = 86400

const paramsSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "HTTP request",
  "x-cronix-i18n": {"zh-CN": {"title": "HTTP 请求", "handler_description": "发送 HTTP(S) 请求；成功即返回期望的状态码（默认任意 2xx），并可要求响应体匹配一个正则表达式。"}},
  "type": "object",
  "properties": {
    "method": {"type": "string", "title": "Method", "enum": ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"], "default": "GET",
      "x-cronix-i18n": {"zh-CN": {"title": "请求方法"}}},
    "url": {"type": "string", "title": "URL", "description": "Absolute http:// or https:// URL. Loopback, link-local (cloud metadata) and private addresses are refused unless the node allows them.", "pattern": "^[hH][tT][tT][pP][sS]?://",
      "x-cronix-i18n": {"zh-CN": {"title": "URL", "description": "以 http:// 或 https:// 开头的绝对 URL。除非节点允许，回环、链路本地（云元数据）和私有地址会被拒绝。"}}},
    "headers": {"type": "object", "title": "Headers", "additionalProperties": {"type": "string"},
      "x-cronix-i18n": {"zh-CN": {"title": "请求头"}}},
    "body": {"type": "string", "title": "Body", "x-cronix-widget": "code",
      "x-cronix-i18n": {"zh-CN": {"title": "请求体"}}},
    "expected_status": {"type": "array", "title": "Expected status codes", "description": "Status codes that mean success (default: any 2xx).", "items": {"type": "integer", "minimum": 100, "maximum": 599},
      "x-cronix-i18n": {"zh-CN": {"title": "期望的状态码", "description": "表示成功的状态码（默认：任意 2xx）。"}}},
    "body_regex": {"type": "string", "title": "Body must match", "description": "Regular expression (Go RE2 syntax) the response body must match.",
      "x-cronix-i18n": {"zh-CN": {"title": "响应体须匹配", "description": "响应体必须匹配的正则表达式（Go RE2 语法）。"}}},
    "insecure_skip_verify": {"type": "boolean", "title": "Skip TLS verification", "default": false,
      "x-cronix-i18n": {"zh-CN": {"title": "跳过 TLS 校验"}}},
    "timeout_seconds": {"type": "integer", "title": "Request timeout (s)", "description": "0 = only the job's timeout.", "minimum": 0, "maximum": 86400,
      "x-cronix-i18n": {"zh-CN": {"title": "请求超时（秒）", "description": "0 表示只受任务超时限制。"}}}
  },
  "required": ["url"],
  "additionalProperties": false
}`

// parsed is validated Params ready to run.
type parsed struct {
	Params
	url   *url.URL
	regex *regexp.Regexp
}

// parseParams decodes and validates raw params, reporting the first
// offending field as a pluginapi.InvalidParams error.
func parseParams(raw json.RawMessage) (parsed, error) {
	var fields map[string]json.RawMessage
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &fields); err != nil {
			return parsed{}, pluginapi.InvalidParams("", "params must be a JSON object")
		}
	}
	var p parsed
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		var target any
		msg := "must be a string"
		switch k {
		case "method":
			target = &p.Method
		case "url":
			target = &p.URL
		case "headers":
			target, msg = &p.Headers, "must be an object whose values are strings"
		case "body":
			target = &p.Body
		case "expected_status":
			target, msg = &p.ExpectedStatus, "must be an array of integers"
		case "body_regex":
			target = &p.BodyRegex
		case "insecure_skip_verify":
			target, msg = &p.InsecureSkipVerify, "must be a boolean"
		case "timeout_seconds":
			target, msg = &p.TimeoutSeconds, "must be an integer"
		default:
			return parsed{}, pluginapi.InvalidParams(k, "unknown field (allowed: method, url, headers, body, expected_status, body_regex, insecure_skip_verify, timeout_seconds)")
		}
		if err := json.Unmarshal(fields[k], target); err != nil {
			return parsed{}, pluginapi.InvalidParams(k, msg)
		}
	}
	p.Method = strings.ToUpper(strings.TrimSpace(p.Method))
	if p.Method == "" {
		p.Method = "GET"
	}
	if !slices.Contains(methods, p.Method) {
		return parsed{}, pluginapi.InvalidParams("method", fmt.Sprintf("%q is not one of %s", p.Method, strings.Join(methods, ", ")))
	}
	if strings.TrimSpace(p.URL) == "" {
		return parsed{}, pluginapi.InvalidParams("url", "is required")
	}
	u, err := url.Parse(strings.TrimSpace(p.URL))
	if err != nil {
		return parsed{}, pluginapi.InvalidParams("url", "is not a valid URL: "+err.Error())
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return parsed{}, pluginapi.InvalidParams("url", "must start with http:// or https://")
	}
	if u.Hostname() == "" {
		return parsed{}, pluginapi.InvalidParams("url", "has no host")
	}
	p.url = u
	for name, v := range p.Headers {
		if !validHeaderName(name) {
			return parsed{}, pluginapi.InvalidParams("headers", fmt.Sprintf("invalid header name %q", name))
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return parsed{}, pluginapi.InvalidParams("headers."+name, "must not contain line breaks or NUL bytes")
		}
	}
	for _, code := range p.ExpectedStatus {
		if code < 100 || code > 599 {
			return parsed{}, pluginapi.InvalidParams("expected_status", fmt.Sprintf("%d is not an HTTP status code (100-599)", code))
		}
	}
	if p.BodyRegex != "" {
		if p.regex, err = regexp.Compile(p.BodyRegex); err != nil {
			return parsed{}, pluginapi.InvalidParams("body_regex", "does not compile: "+err.Error())
		}
	}
	if p.TimeoutSeconds < 0 || p.TimeoutSeconds > maxTimeoutSeconds {
		return parsed{}, pluginapi.InvalidParams("timeout_seconds", fmt.Sprintf("must be from 0 to %d", maxTimeoutSeconds))
	}
	return p, nil
}

// checkLiteralHost reports a URL whose host is an IP literal the guard
// refuses, so Validate catches it when the job is saved.
func checkLiteralHost(g Guard, u *url.URL) error {
	ip, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]"))
	if err != nil {
		return nil //nolint:nilerr // not an IP literal but a name: checked when it is resolved
	}
	if err := g.Check(ip); err != nil {
		return pluginapi.InvalidParams("url", err.Error())
	}
	return nil
}

// validHeaderName reports whether name is an HTTP token.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
