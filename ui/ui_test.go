package ui

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

const testIndex = `<!doctype html><html><head><script type="module" src="/assets/index-abc123.js"></script></head><body><div id="root"></div></body></html>`

func testHandler(t *testing.T) http.Handler {
	t.Helper()
	h, err := newHandler(fstest.MapFS{
		"index.html":             {Data: []byte(testIndex)},
		"assets/index-abc123.js": {Data: []byte(strings.Repeat("console.log('cronix');\n", 200))},
		"favicon.svg":            {Data: []byte(`<svg xmlns="http://www.w3.org/2000/svg"></svg>`)},
	})
	require.NoError(t, err)
	return h
}

func get(t *testing.T, h http.Handler, target string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, target, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func requireSecurityHeaders(t *testing.T, rec *httptest.ResponseRecorder) {
	t.Helper()
	csp := rec.Header().Get("Content-Security-Policy")
	require.Contains(t, csp, "script-src 'self'")
	require.Contains(t, csp, "frame-ancestors 'none'")
	scripts := csp[strings.Index(csp, "script-src"):]
	scripts = scripts[:strings.Index(scripts, ";")]
	require.NotContains(t, scripts, "unsafe-inline")
	require.NotContains(t, scripts, "unsafe-eval")
	require.Equal(t, "nosniff", rec.Header().Get("X-Content-Type-Options"))
	require.NotEmpty(t, rec.Header().Get("Referrer-Policy"))
}

func TestIndexAndClientRoutesServeTheApp(t *testing.T) {
	t.Parallel()
	h := testHandler(t)
	for _, p := range []string{"/", "/index.html", "/jobs", "/jobs/12/edit", "/runs/7", "/login?next=%2Fjobs"} {
		rec := get(t, h, p)
		require.Equal(t, http.StatusOK, rec.Code, p)
		require.Equal(t, testIndex, rec.Body.String(), p)
		require.Equal(t, "text/html; charset=utf-8", rec.Header().Get("Content-Type"), p)
		require.Equal(t, "no-cache", rec.Header().Get("Cache-Control"), p)
		require.NotEmpty(t, rec.Header().Get("ETag"), p)
		requireSecurityHeaders(t, rec)
	}
}

func TestIndexRevalidatesWithETag(t *testing.T) {
	t.Parallel()
	h := testHandler(t)
	etag := get(t, h, "/").Header().Get("ETag")
	rec := get(t, h, "/jobs", "If-None-Match", etag)
	require.Equal(t, http.StatusNotModified, rec.Code)
}

func TestHashedAssetsAreCachedForAYear(t *testing.T) {
	t.Parallel()
	h := testHandler(t)
	rec := get(t, h, "/assets/index-abc123.js")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "public, max-age=31536000, immutable", rec.Header().Get("Cache-Control"))
	require.Contains(t, rec.Header().Get("Content-Type"), "javascript")
	require.Contains(t, rec.Body.String(), "console.log('cronix')")
	requireSecurityHeaders(t, rec)

	// Unhashed top-level files revalidate like index.html.
	rec = get(t, h, "/favicon.svg")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "no-cache", rec.Header().Get("Cache-Control"))
}

func TestMissingFilesAreNotTheApp(t *testing.T) {
	t.Parallel()
	h := testHandler(t)
	for _, p := range []string{"/assets/index-gone.js", "/assets/x", "/robots.txt", "/a/b.png"} {
		rec := get(t, h, p)
		require.Equal(t, http.StatusNotFound, rec.Code, p)
		require.NotContains(t, rec.Body.String(), "<div id=\"root\">", p)
		requireSecurityHeaders(t, rec)
	}
}

func TestGzipWhenAccepted(t *testing.T) {
	t.Parallel()
	h := testHandler(t)
	plain := get(t, h, "/assets/index-abc123.js")
	rec := get(t, h, "/assets/index-abc123.js", "Accept-Encoding", "br, gzip")
	require.Equal(t, "gzip", rec.Header().Get("Content-Encoding"))
	require.Contains(t, rec.Header().Get("Vary"), "Accept-Encoding")
	require.NotEqual(t, plain.Header().Get("ETag"), rec.Header().Get("ETag"))
	require.Less(t, rec.Body.Len(), plain.Body.Len())
	zr, err := gzip.NewReader(rec.Body)
	require.NoError(t, err)
	body, err := io.ReadAll(zr)
	require.NoError(t, err)
	require.Equal(t, plain.Body.String(), string(body))

	rec = get(t, h, "/assets/index-abc123.js", "Accept-Encoding", "gzip;q=0")
	require.Empty(t, rec.Header().Get("Content-Encoding"))
}

func TestOnlyGetAndHead(t *testing.T) {
	t.Parallel()
	h := testHandler(t)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/jobs", nil))
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodHead, "/", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	require.Zero(t, rec.Body.Len())
}

// TestEmbeddedBuild checks the committed build: index.html loads its script
// from /assets/ as a module, with no inline script the CSP would block.
func TestEmbeddedBuild(t *testing.T) {
	t.Parallel()
	h := Handler()
	rec := get(t, h, "/")
	require.Equal(t, http.StatusOK, rec.Code)
	body := rec.Body.String()
	require.Contains(t, body, `<div id="root">`)
	require.Regexp(t, `<script type="module" crossorigin src="/assets/[^"]+\.js"></script>`, body)
	require.NotRegexp(t, `<script(?:\s[^>]*)?>[^<]`, body, "inline script")
	requireSecurityHeaders(t, rec)
}
