package benchreport

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseLeanRequest(t *testing.T) {
	full := "POST /j/7?x=1 HTTP/1.1\r\nHost: a\r\nx-cronix-fire-id:  42-1700000001000 \r\nContent-Length: 5\r\n\r\nhello"
	req, ok, err := parseLeanRequest([]byte(full + "GET /next HTTP/1.1\r\n"))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, leanRequest{path: "/j/7", fireID: "42-1700000001000", size: len(full)}, req)
	// Every prefix of a request is incomplete, not an error.
	for i := range len(full) {
		_, ok, err := parseLeanRequest([]byte(full[:i]))
		require.NoError(t, err, i)
		require.False(t, ok, i)
	}
	for in, wantClose := range map[string]bool{
		"GET / HTTP/1.1\r\n\r\n":                           false,
		"GET / HTTP/1.1\r\nConnection: Close\r\n\r\n":      true,
		"GET / HTTP/1.0\r\n\r\n":                           true,
		"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n": false,
	} {
		req, ok, err := parseLeanRequest([]byte(in))
		require.NoError(t, err, in)
		require.True(t, ok, in)
		require.Equal(t, wantClose, req.close, in)
	}
	for _, bad := range []string{
		"GET /\r\n\r\n",
		"GET / SPDY/3\r\n\r\n",
		"GET / HTTP/1.1\r\nno colon\r\n\r\n",
		"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
		"POST / HTTP/1.1\r\nContent-Length: 999999\r\n\r\n",
		"GET / HTTP/1.1\r\nX: " + strings.Repeat("a", maxLeanRequest) + "\r\n",
	} {
		_, _, err := parseLeanRequest([]byte(bad))
		require.ErrorIs(t, err, errLeanRequest, bad)
	}
}

// TestLeanReceiver: the lean receiver answers 204 to requests of the
// net/http client on kept-alive connections (with and without a body),
// stamps each with its path and fire id, answers pipelined requests in
// order, closes on Connection: close, answers a chunked body 400, and
// refuses connections after Close; with answers written at once and with
// answers held for a quiet moment.
func TestLeanReceiver(t *testing.T) {
	t.Run("answer at once", func(t *testing.T) { testLeanReceiver(t) })
	t.Run("answer when quiet", func(t *testing.T) {
		testLeanReceiver(t, WithAnswerHold(2*time.Millisecond, 50*time.Millisecond))
	})
}

func testLeanReceiver(t *testing.T, opts ...LeanOption) {
	var mu sync.Mutex
	var got []Arrived
	rec, err := StartLeanReceiver(2, func(a Arrived) {
		mu.Lock()
		got = append(got, a)
		mu.Unlock()
	}, opts...)
	require.NoError(t, err)
	defer rec.Close()
	arrived := func() []Arrived {
		mu.Lock()
		defer mu.Unlock()
		return append([]Arrived(nil), got...)
	}

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	reused := 0
	send := func(method, path, fireID, body string) *http.Response {
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequestWithContext(t.Context(), method, rec.URL(path), rd)
		require.NoError(t, err)
		if fireID != "" {
			req.Header.Set("X-Cronix-Fire-Id", fireID)
		}
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(i httptrace.GotConnInfo) {
				if i.Reused {
					reused++
				}
			}}))
		resp, err := client.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		require.NoError(t, resp.Body.Close())
		return resp
	}
	before := time.Now()
	require.Equal(t, http.StatusNoContent, send(http.MethodGet, "/j/1", "1-1700000001000", "").StatusCode)
	require.Equal(t, http.StatusNoContent, send(http.MethodPost, "/j/2?q=1", "", "a body").StatusCode)
	require.Equal(t, http.StatusNoContent, send(http.MethodGet, "/j/3", "3-1700000003000", "").StatusCode)
	require.Equal(t, 2, reused, "one kept-alive connection")
	a := arrived()
	require.Len(t, a, 3)
	for i, want := range []Arrived{{Path: "/j/1", FireID: "1-1700000001000"}, {Path: "/j/2"}, {Path: "/j/3", FireID: "3-1700000003000"}} {
		require.Equal(t, want.Path, a[i].Path)
		require.Equal(t, want.FireID, a[i].FireID)
		require.False(t, a[i].At.Before(before), "stamped after it was sent")
		if !a[i].Socket.IsZero() {
			require.False(t, a[i].Socket.After(a[i].At), "read after it reached the socket")
		}
	}

	// Pipelined, then closed by the client's header: both answered in
	// order, then the connection ends.
	c, err := net.Dial("tcp", strings.TrimPrefix(rec.URL(""), "http://"))
	require.NoError(t, err)
	_, err = io.WriteString(c, "GET /p/1 HTTP/1.1\r\nHost: x\r\n\r\nGET /p/2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	out, err := io.ReadAll(c)
	require.NoError(t, err)
	require.Equal(t, 2, strings.Count(string(out), "HTTP/1.1 204 No Content\r\n"), string(out))
	require.NoError(t, c.Close())
	a = arrived()
	require.Len(t, a, 5)
	require.Equal(t, "/p/1", a[3].Path)
	require.Equal(t, "/p/2", a[4].Path)

	// A chunked body is not taken.
	c, err = net.Dial("tcp", strings.TrimPrefix(rec.URL(""), "http://"))
	require.NoError(t, err)
	_, err = io.WriteString(c, "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n\r\n")
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, answer(t, c))
	require.NoError(t, c.Close())
	require.Len(t, arrived(), 5, "no arrival for a refused request")

	client.CloseIdleConnections()
	rec.Close()
	_, err = net.DialTimeout("tcp", strings.TrimPrefix(rec.URL(""), "http://"), 5*time.Second)
	require.Error(t, err, "closed")
}

// TestLeanReceiverHoldsAnswersWhileReading: with WithAnswerHold, a
// request's answer is written only after a request that came on another
// connection within the quiet time has been read (and stamped).
func TestLeanReceiverHoldsAnswersWhileReading(t *testing.T) {
	stamped := make(chan string, 2)
	rec, err := StartLeanReceiver(1, func(a Arrived) { stamped <- a.Path },
		WithAnswerHold(3*time.Second, 3*time.Second))
	require.NoError(t, err)
	defer rec.Close()
	addr := strings.TrimPrefix(rec.URL(""), "http://")
	first, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer first.Close()
	second, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer second.Close()

	_, err = io.WriteString(first, "GET /first HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	require.Equal(t, "/first", <-stamped)
	// Nothing to read for the quiet time (3 s) has not passed: no answer
	// yet (without the hold it is written as soon as nothing is ready).
	require.NoError(t, first.SetReadDeadline(time.Now().Add(200*time.Millisecond)))
	_, err = first.Read(make([]byte, 1))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "the first answer came before the quiet time")
	// The first answer is held: the worker has read within the quiet time.
	_, err = io.WriteString(second, "GET /second HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	require.Equal(t, http.StatusNoContent, answer(t, first))
	select {
	case p := <-stamped:
		require.Equal(t, "/second", p)
	default:
		t.Fatal("the first answer was written before the second request, sent while it was held, was read")
	}
	require.Equal(t, http.StatusNoContent, answer(t, second))
}

// answer reads one response from c (within 30 s) and returns its status.
func answer(t *testing.T, c net.Conn) int {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(30*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	return resp.StatusCode
}

// TestLeanReceiverSocketTimestamps: on Linux the lean receiver's requests
// carry the kernel's receive timestamp, at or before their arrival.
func TestLeanReceiverSocketTimestamps(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("receive timestamps are read on Linux only")
	}
	got := make(chan Arrived, 1)
	rec, err := StartLeanReceiver(1, func(a Arrived) { got <- a })
	require.NoError(t, err)
	defer rec.Close()
	// The kernel turns its stamping on a moment after the first socket
	// asks: a later request must carry one, within the deadline.
	deadline := time.Now().Add(10 * time.Second)
	for {
		sent := time.Now()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, rec.URL("/j/1"), nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		a := <-got
		if !a.Socket.IsZero() {
			require.False(t, a.Socket.Before(sent), "reached the socket %s before it was sent %s", a.Socket, sent)
			require.False(t, a.Socket.After(a.At), "reached the socket %s after it was read %s", a.Socket, a.At)
			return
		}
		require.True(t, time.Now().Before(deadline), "no receive timestamp within 10s of requests")
	}
}
