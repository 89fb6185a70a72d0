package integration

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/integration/harness"
)

// TestSessionRevocationOnEveryReplica: logout, a password change and
// disabling the user end the user's sessions on the other replica within a
// second (sessions live in the shared database, read on every request).
func TestSessionRevocationOnEveryReplica(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const adminPW = "sessions-admin-pw"
	c, err := harness.StartCluster(harness.ClusterConfig{Binary: binary, Dir: dir, Replicas: 2,
		AdminPassword: adminPW, NodeToken: "sessions-node-token"})
	require.NoError(t, err)
	t.Cleanup(func() { c.CloseKeepingLogs(t, fmt.Sprintf("cronix-sessions-%d", time.Now().UnixNano())) })
	r1, r2 := c.Replicas[0], c.Replicas[1]
	admin := r1.API

	var user struct {
		ID int64 `json:"id"`
	}
	code, err := admin.Do(http.MethodPost, "/api/v1/users", map[string]any{"username": "alice",
		"password": "alice-password-1", "role": "operator", "groups": []int64{}}, &user)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, code)

	// login logs alice in on r1 and returns a client of r2 holding that session.
	login := func(password string) *harness.Client {
		on1 := harness.NewClient(r1.API.Base)
		require.NoError(t, on1.Login("alice", password))
		on2 := harness.NewClient(r2.API.Base)
		on2.Token = on1.Token
		code, err := on2.Do(http.MethodGet, "/api/v1/auth/me", nil, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code, "a session opened on r1 works on r2")
		return on2
	}
	// endsWithinASecond checks that the session of c (on r2) stops working
	// within a second of the revoking call that returned at start.
	endsWithinASecond := func(what string, c *harness.Client, start time.Time) {
		t.Helper()
		for {
			code, err := c.Do(http.MethodGet, "/api/v1/auth/me", nil, nil)
			require.NoError(t, err)
			if code == http.StatusUnauthorized {
				t.Logf("%s: the session ended on the other replica %s after the call", what, time.Since(start).Round(time.Millisecond))
				return
			}
			require.Equal(t, http.StatusOK, code)
			require.Less(t, time.Since(start), time.Second, "%s: the session still works on r2", what)
		}
	}

	// Logout on r1 ends the session on r2.
	s := login("alice-password-1")
	on1 := harness.NewClient(r1.API.Base)
	on1.Token = s.Token
	code, err = on1.Do(http.MethodPost, "/api/v1/auth/logout", nil, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusNoContent, code)
	endsWithinASecond("logout", s, time.Now())

	// A password change on r1 ends every session of the user on r2.
	a, b := login("alice-password-1"), login("alice-password-1")
	on1.Token = a.Token
	code, err = on1.Do(http.MethodPost, "/api/v1/auth/password",
		map[string]string{"old_password": "alice-password-1", "new_password": "alice-password-2"}, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusNoContent, code)
	start := time.Now()
	endsWithinASecond("password change (other session)", b, start)
	endsWithinASecond("password change (own session)", a, start)

	// Disabling the user on r1 (as admin) ends its sessions on r2.
	d := login("alice-password-2")
	code, err = admin.Do(http.MethodPatch, fmt.Sprintf("/api/v1/users/%d", user.ID), map[string]any{"disabled": true}, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	endsWithinASecond("disable", d, time.Now())
	code, err = harness.NewClient(r2.API.Base).Do(http.MethodPost, "/api/v1/auth/login",
		map[string]string{"username": "alice", "password": "alice-password-2"}, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, code, "a disabled user cannot log in")
}
