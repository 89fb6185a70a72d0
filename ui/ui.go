// Package ui serves the web admin, a single-page app built from ui/web into
// ui/dist (`make ui`) and embedded in the binary, so `go build` needs no Node.
//
// What it guarantees:
//   - Files under /assets/ carry a content hash in their names and are served
//     with a one-year immutable cache; a missing asset is a 404, never the app.
//   - index.html is never cached without revalidation (Cache-Control:
//     no-cache plus an ETag), and every client-side route (a path whose last
//     segment has no file extension) is answered with it.
//   - Every response carries the security headers of SecurityHeaders: a
//     Content-Security-Policy that allows scripts only from this origin (no
//     inline scripts, no eval), frame-ancestors 'none', nosniff and a strict
//     referrer policy.
//   - Text assets are gzip-compressed once, on first request, when the
//     client accepts gzip.
package ui

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"
)

//go:embed dist
var dist embed.FS

// ContentSecurityPolicy is sent with every UI response. Styles may be inline
// because Ant Design injects its CSS-in-JS <style> elements at run time;
// scripts may not.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"img-src 'self' data:; font-src 'self' data:; connect-src 'self'; object-src 'none'; " +
	"base-uri 'self'; form-action 'self'; frame-ancestors 'none'"

// SecurityHeaders are set on every UI response.
var SecurityHeaders = map[string]string{
	"Content-Security-Policy": ContentSecurityPolicy,
	"X-Content-Type-Options":  "nosniff",
	"Referrer-Policy":         "same-origin",
	"X-Frame-Options":         "DENY",
}

const (
	assetCache = "public, max-age=31536000, immutable"
	indexCache = "no-cache"
)

// file is one embedded file, with its gzip form computed on first use.
type file struct {
	name string
	data []byte
	etag string

	gzOnce sync.Once
	gz     []byte // nil when compression does not pay
}

func (f *file) gzipped() []byte {
	f.gzOnce.Do(func() {
		if !compressible(f.name) || len(f.data) < 1024 {
			return
		}
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		_, _ = zw.Write(f.data)
		_ = zw.Close()
		if buf.Len() < len(f.data) {
			f.gz = buf.Bytes()
		}
	})
	return f.gz
}

func compressible(name string) bool {
	switch path.Ext(name) {
	case ".js", ".css", ".html", ".svg", ".json", ".txt", ".map":
		return true
	}
	return false
}

// handler serves the files of one file system.
type handler struct {
	files map[string]*file // by path without leading slash
	index *file
}

// Handler serves the embedded UI.
func Handler() http.Handler {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory exists
	}
	h, err := newHandler(sub)
	if err != nil {
		panic(err) // the embedded files are fixed at build time
	}
	return h
}

// newHandler reads every file of fsys into memory.
func newHandler(fsys fs.FS) (*handler, error) {
	h := &handler{files: map[string]*file{}}
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		h.files[name] = &file{name: name, data: data, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		return nil
	})
	if err != nil {
		return nil, err
	}
	h.index = h.files["index.html"]
	return h, nil
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	for k, v := range SecurityHeaders {
		w.Header().Set(k, v)
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
	f, ok := h.files[name]
	switch {
	case ok && name != "index.html":
		if strings.HasPrefix(name, "assets/") {
			w.Header().Set("Cache-Control", assetCache)
		} else {
			w.Header().Set("Cache-Control", indexCache)
		}
	case strings.HasPrefix(name, "assets/") || path.Ext(name) != "" && name != "index.html":
		http.NotFound(w, r)
		return
	case h.index == nil:
		http.NotFound(w, r)
		return
	default: // "/", "/index.html" and client-side routes
		f = h.index
		w.Header().Set("Cache-Control", indexCache)
	}
	h.serve(w, r, f)
}

// serve writes f, gzip-compressed when the client accepts it.
func (h *handler) serve(w http.ResponseWriter, r *http.Request, f *file) {
	ctype := mime.TypeByExtension(path.Ext(f.name))
	if ctype == "" {
		ctype = http.DetectContentType(f.data)
	}
	w.Header().Set("Content-Type", ctype)
	body, etag := f.data, f.etag
	if compressible(f.name) {
		w.Header().Add("Vary", "Accept-Encoding")
		if gz := f.gzipped(); gz != nil && acceptsGzip(r) {
			w.Header().Set("Content-Encoding", "gzip")
			body, etag = gz, strings.TrimSuffix(f.etag, `"`)+`-gz"`
		}
	}
	w.Header().Set("ETag", etag)
	// ServeContent answers If-None-Match with 304 and handles HEAD and ranges;
	// with Content-Encoding set it serves the compressed bytes as they are.
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") && strings.TrimSpace(q) != "q=0" {
			return true
		}
	}
	return false
}
