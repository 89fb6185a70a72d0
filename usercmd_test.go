package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/server/auth"
	"github.com/cronix/cronix/server/store"
)

// TestUserPasswdResetsForgottenPassword resets the admin password of a
// (stopped) standalone data dir: the database file standalone uses.
func TestUserPasswdResetsForgottenPassword(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	dsn := "sqlite://" + filepath.Join(dir, "cronix.db")
	st, err := store.Open(ctx, dsn)
	require.NoError(t, err)
	_, _, err = auth.EnsureAdmin(ctx, st, "forgotten-password")
	require.NoError(t, err)
	sessions := &auth.Sessions{Store: st}
	old, err := sessions.Login(ctx, "admin", "forgotten-password", time.Now())
	require.NoError(t, err)
	require.NoError(t, st.Close())

	env := func(k string) string {
		if k == "CRONIX_USER_PASSWORD" {
			return "brand-new-password"
		}
		return ""
	}
	var out, errOut bytes.Buffer
	code := run([]string{"user", "passwd", "--data-dir", dir, "admin"}, env, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	require.Contains(t, out.String(), "password of admin set")

	// A password from stdin, and a new operator.
	require.NoError(t, runUser(ctx, []string{"add", "--data-dir", dir, "--role", "operator", "alice"},
		func(string) string { return "" }, strings.NewReader("alice-password-1\n"), &out, &errOut))
	err = runUser(ctx, []string{"add", "--data-dir", dir, "bob"}, func(string) string { return "" },
		strings.NewReader("short\n"), &out, &errOut)
	require.ErrorContains(t, err, "at least 10 characters")

	out.Reset()
	require.Equal(t, 0, run([]string{"user", "list", "--data-dir", dir}, env, &out, &errOut), errOut.String())
	require.Contains(t, out.String(), "admin")
	require.Contains(t, out.String(), "alice")
	require.Contains(t, out.String(), "operator")

	st, err = store.Open(ctx, dsn)
	require.NoError(t, err)
	defer st.Close()
	sessions = &auth.Sessions{Store: st}
	_, err = sessions.Login(ctx, "admin", "forgotten-password", time.Now())
	require.ErrorIs(t, err, auth.ErrInvalidCredentials)
	_, err = sessions.Login(ctx, "admin", "brand-new-password", time.Now())
	require.NoError(t, err)
	_, err = sessions.Resolve(ctx, old.Token, time.Now())
	require.ErrorIs(t, err, auth.ErrInvalidToken, "the old session ended")
	_, err = sessions.Login(ctx, "alice", "alice-password-1", time.Now())
	require.NoError(t, err)
	entries, _, err := st.FindAudit(ctx, store.AuditFilter{ObjectType: "user"}, store.Page{})
	require.NoError(t, err)
	require.Len(t, entries, 2, "passwd and add are audited")
}
