package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/integration/harness"
)

// sdkModule and sdkVersion are what a third-party plugin author depends on:
// the root module at a release tag (docs/plugins.md, plugins/example/README.md).
const (
	sdkModule  = "github.com/cronix/cronix"
	sdkVersion = "v1.0.0"
)

// TestSDKFromAFreshModule is issue 14's "using the SDK from outside": a new
// module in a temporary directory, outside this repository, depends on the
// SDK with the documented commands (go mod init, go get
// github.com/cronix/cronix@v1.0.0, copy plugins/example out of the
// downloaded module, go mod tidy, make) and no replace directive; the plugin
// it builds is checked by the real cronix binary's "plugin verify" and
// loaded and run by a real "cronix standalone" with --plugin-dir and
// --plugin-checksums.
//
// The module is not published, so the test serves it: this repository's
// current tree (tracked and untracked-but-not-ignored files, as a release
// tag would hold them once committed) is zipped with golang.org/x/mod/zip
// into a file:// module proxy as v1.0.0. Every other module comes from the
// local module cache used as a proxy (file://$GOMODCACHE/cache/download),
// then from the environment's GOPROXY, so it runs offline once the
// repository's dependencies are cached. The fresh module gets its own
// GOMODCACHE (the shared one never sees this unpublished v1.0.0) and its
// go.sum is seeded from this repository's go.sum, so no checksum database
// is asked about third-party modules; GONOSUMDB exempts only
// github.com/cronix/cronix. Builds use -trimpath so the shared build cache
// serves the dependencies' compiled packages from the second run on.
func TestSDKFromAFreshModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a plugin in a fresh module and starts a standalone")
	}
	t.Parallel()
	ctx := t.Context()
	root, err := os.Getwd()
	require.NoError(t, err)
	tmp := t.TempDir()

	// 1. A local module proxy serving this tree as github.com/cronix/cronix@v1.0.0.
	proxy := filepath.Join(tmp, "proxy")
	writeModuleProxy(t, root, proxy)

	realCache := strings.TrimSpace(goOutput(t, root, nil, "env", "GOMODCACHE"))
	envProxy := strings.TrimSpace(goOutput(t, root, nil, "env", "GOPROXY"))
	env := append(cleanGoEnv(os.Environ()),
		"GOPROXY=file://"+filepath.ToSlash(proxy)+",file://"+filepath.ToSlash(filepath.Join(realCache, "cache", "download"))+","+envProxy,
		"GOMODCACHE="+filepath.Join(tmp, "modcache"),
		"GONOSUMDB="+sdkModule,
		"GOFLAGS=-modcacherw -trimpath",
		"GOTOOLCHAIN=local",
		"GOWORK=off",
	)

	// 2. The author's steps, in a directory outside the repository.
	work := filepath.Join(tmp, "cronix-plugin-notify")
	require.NoError(t, os.MkdirAll(work, 0o755))
	goOutput(t, work, env, "mod", "init", "example.com/cronix-plugin-notify")
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(work, "go.sum"), sum, 0o600))
	goOutput(t, work, env, "get", sdkModule+"@"+sdkVersion)
	template := filepath.Join(tmp, "modcache", sdkModule+"@"+sdkVersion, "plugins", "example")
	copyDir(t, template, work)
	goOutput(t, work, env, "mod", "tidy")

	gomod, err := os.ReadFile(filepath.Join(work, "go.mod"))
	require.NoError(t, err)
	t.Logf("go.mod of the fresh module:\n%s", gomod)
	require.Contains(t, string(gomod), "\n\t"+sdkModule+" "+sdkVersion+"\n")
	require.NotContains(t, string(gomod), "replace")

	// make: the template's tests, the build, the checksum line.
	mk := exec.CommandContext(ctx, "make")
	mk.Dir, mk.Env = work, env
	out, err := mk.CombinedOutput()
	require.NoError(t, err, "make in the fresh module:\n%s", out)
	t.Logf("make:\n%s", out)
	bin := filepath.Join(work, "cronix-plugin-notify")
	sha := fileSHA(t, bin)
	require.Contains(t, string(out), "\nnotify="+sha+"\n", "make prints the checksum entry of the binary it built")

	// 3. The real cronix binary verifies it...
	cronix, err := harness.Build(ctx, filepath.Join(tmp, "bin"))
	require.NoError(t, err)
	verify, err := exec.CommandContext(ctx, cronix, "plugin", "verify", bin).CombinedOutput()
	require.NoError(t, err, "cronix plugin verify:\n%s", verify)
	t.Logf("cronix plugin verify:\n%s", verify)
	require.Contains(t, string(verify), "handler   notify 1.0.0")
	require.Contains(t, string(verify), "checksum  notify="+sha+"\n")

	// ...and a standalone loads it from its plugin dir and runs a job with it.
	pluginDir := filepath.Join(tmp, "plugins")
	require.NoError(t, os.MkdirAll(pluginDir, 0o755))
	copyFile(t, bin, filepath.Join(pluginDir, "cronix-plugin-notify"), 0o755)
	hook := &recordingHook{}
	srv := httptest.NewServer(hook)
	t.Cleanup(srv.Close)
	api := startPluginStandalone(t, cronix, filepath.Join(tmp, "data"), pluginDir, "notify="+sha)

	var handlers struct {
		Items []struct {
			Name    string `json:"name"`
			Version string `json:"version"`
			Nodes   int    `json:"nodes"`
		} `json:"items"`
	}
	require.Eventually(t, func() bool {
		code, err := api.Do(http.MethodGet, "/api/v1/handlers", nil, &handlers)
		if err != nil || code != http.StatusOK {
			return false
		}
		for _, h := range handlers.Items {
			if h.Name == "notify" && h.Version == "1.0.0" && h.Nodes == 1 {
				return true
			}
		}
		return false
	}, 30*time.Second, 100*time.Millisecond, "the standalone's node offers the notify handler: %+v", handlers)

	job, err := api.CreateJob(harness.Job{Name: "sdk notify", Schedule: "*/1 * * * * *", Handler: "notify",
		Params: json.RawMessage(`{"webhook_url":"` + srv.URL + `/hook","text":"{{job_name}} says hi"}`)})
	require.NoError(t, err)
	var runs []harness.Run
	require.Eventually(t, func() bool {
		runs, _, err = api.Runs(job.ID, 20)
		for _, r := range runs {
			if r.Status == cluster.StatusSuccess {
				return true
			}
		}
		return false
	}, 60*time.Second, 200*time.Millisecond, "a run of the notify job succeeds; runs: %+v", runs)
	require.Contains(t, hook.texts(), "sdk notify says hi", "the plugin posted to the webhook")
}

// writeModuleProxy lays out dir as a GOPROXY serving the module in root at
// sdkVersion: @v/list, .info, .mod and the module zip.
func writeModuleProxy(t *testing.T, root, dir string) {
	t.Helper()
	vdir := filepath.Join(dir, filepath.FromSlash(sdkModule), "@v")
	require.NoError(t, os.MkdirAll(vdir, 0o755))
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	info, err := json.Marshal(map[string]any{"Version": sdkVersion, "Time": time.Now().UTC().Truncate(time.Second)})
	require.NoError(t, err)
	for name, data := range map[string][]byte{
		"list":               []byte(sdkVersion + "\n"),
		sdkVersion + ".info": info,
		sdkVersion + ".mod":  gomod,
	} {
		require.NoError(t, os.WriteFile(filepath.Join(vdir, name), data, 0o600))
	}

	ls := exec.CommandContext(t.Context(), "git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	ls.Dir = root
	listed, err := ls.Output()
	require.NoError(t, err, "git ls-files: the test zips the files of this git checkout")
	var files []modzip.File
	for _, p := range strings.Split(strings.TrimRight(string(listed), "\x00"), "\x00") {
		fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(p)))
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the working tree, or a symlink (not allowed in module zips)
		}
		files = append(files, treeFile{root: root, path: p, info: fi})
	}
	f, err := os.Create(filepath.Join(vdir, sdkVersion+".zip"))
	require.NoError(t, err)
	require.NoError(t, modzip.Create(f, module.Version{Path: sdkModule, Version: sdkVersion}, files))
	require.NoError(t, f.Close())
}

// treeFile is a file of the working tree for modzip.Create.
type treeFile struct {
	root, path string
	info       fs.FileInfo
}

func (f treeFile) Path() string                { return f.path }
func (f treeFile) Lstat() (fs.FileInfo, error) { return f.info, nil }
func (f treeFile) Open() (io.ReadCloser, error) {
	return os.Open(filepath.Join(f.root, filepath.FromSlash(f.path)))
}

// cleanGoEnv drops the go command settings the test sets itself.
func cleanGoEnv(environ []string) []string {
	var out []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "GOPROXY", "GOMODCACHE", "GONOSUMDB", "GOPRIVATE", "GONOPROXY", "GOFLAGS", "GOTOOLCHAIN", "GOWORK":
			continue
		}
		out = append(out, kv)
	}
	return out
}

// goOutput runs the go command in dir (env nil: the test's own) and
// returns its stdout, failing the test with its output on error.
func goOutput(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", args...)
	cmd.Dir, cmd.Env = dir, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "go %s in %s:\n%s%s", strings.Join(args, " "), dir, stdout.String(), stderr.String())
	return stdout.String()
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	entries, err := os.ReadDir(from)
	require.NoError(t, err)
	require.NotEmpty(t, entries)
	for _, e := range entries {
		require.False(t, e.IsDir(), "the template is one flat folder")
		copyFile(t, filepath.Join(from, e.Name()), filepath.Join(to, e.Name()), 0o644)
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	data, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, data, mode))
}

func fileSHA(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// startPluginStandalone starts "cronix standalone" with a plugin dir and
// checksums on free ports and returns a logged-in API client.
func startPluginStandalone(t *testing.T, bin, dataDir, pluginDir, checksums string) *harness.Client {
	t.Helper()
	addr := func() string {
		a, err := harness.FreeAddr()
		require.NoError(t, err)
		return a
	}
	httpAddr := addr()
	const password = "sdk-test-pw"
	p, err := harness.Start(bin, []string{"CRONIX_ADMIN_PASSWORD=" + password}, "standalone",
		"--data-dir", dataDir, "--http-addr", httpAddr, "--etcd-client-addr", addr(), "--etcd-peer-addr", addr(),
		"--raft-addr", addr(), "--plugin-dir", pluginDir, "--plugin-checksums", checksums)
	require.NoError(t, err)
	t.Cleanup(func() {
		select {
		case <-p.Done():
		default:
			p.KillGroup()
			<-p.Done()
		}
		if t.Failed() {
			t.Logf("standalone output:\n%s", p.Output())
		}
	})
	_, err = p.WaitOutput(regexp.MustCompile(`URL:\s+(\S+)`), 60*time.Second)
	require.NoError(t, err, "standalone output:\n%s", p.Output())
	api := harness.NewClient("http://" + httpAddr)
	require.NoError(t, api.WaitReady(30*time.Second))
	require.NoError(t, api.Login("admin", password))
	return api
}

// recordingHook is a Slack-compatible webhook that records the texts it got.
type recordingHook struct {
	mu  sync.Mutex
	got []string
}

func (h *recordingHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var m struct {
		Text string `json:"text"`
	}
	if err := json.NewDecoder(bufio.NewReader(r.Body)).Decode(&m); err != nil {
		http.Error(w, fmt.Sprintf("bad body: %v", err), http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	h.got = append(h.got, m.Text)
	h.mu.Unlock()
	_, _ = io.WriteString(w, "ok")
}

func (h *recordingHook) texts() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.got...)
}
