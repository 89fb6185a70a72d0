package auth_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/server/auth"
	"github.com/cronix/cronix/server/store"
)

func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "cronix.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func TestPasswordHashing(t *testing.T) {
	t.Parallel()
	h, err := auth.HashPassword("correct horse")
	require.NoError(t, err)
	require.NotContains(t, h, "correct horse")
	require.True(t, auth.CheckPassword(h, "correct horse"))
	require.False(t, auth.CheckPassword(h, "correct horsE"))
	require.False(t, auth.CheckPassword("not-a-hash", "correct horse"))

	h2, err := auth.HashPassword("correct horse")
	require.NoError(t, err)
	require.NotEqual(t, h, h2, "salted")

	_, err = auth.HashPassword("")
	require.Error(t, err)
	_, err = auth.HashPassword(string(make([]byte, 73)))
	require.Error(t, err)
}

func TestTokens(t *testing.T) {
	t.Parallel()
	tok, hash := auth.NewToken()
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	require.NoError(t, err)
	require.Len(t, raw, 32)
	sum := sha256.Sum256([]byte(tok))
	require.Equal(t, hex.EncodeToString(sum[:]), hash)
	require.Equal(t, hash, auth.HashToken(tok))

	tok2, hash2 := auth.NewToken()
	require.NotEqual(t, tok, tok2)
	require.NotEqual(t, hash, hash2)

	p1, p2 := auth.RandomPassword(), auth.RandomPassword()
	require.Len(t, p1, 24)
	require.NotEqual(t, p1, p2)
}

func TestEnsureAdmin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("given password", func(t *testing.T) {
		t.Parallel()
		st := openStore(t)
		created, pw, err := auth.EnsureAdmin(ctx, st, "chosen-pw")
		require.NoError(t, err)
		require.True(t, created)
		require.Equal(t, "chosen-pw", pw)
		u, err := st.UserByName(ctx, auth.AdminUsername)
		require.NoError(t, err)
		require.Equal(t, store.RoleAdmin, u.Role)
		require.True(t, auth.CheckPassword(u.PasswordHash, "chosen-pw"))

		// A second call changes nothing.
		created, pw, err = auth.EnsureAdmin(ctx, st, "other-pw")
		require.NoError(t, err)
		require.False(t, created)
		require.Empty(t, pw)
		n, err := st.CountUsers(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		u, err = st.UserByName(ctx, auth.AdminUsername)
		require.NoError(t, err)
		require.True(t, auth.CheckPassword(u.PasswordHash, "chosen-pw"))
	})

	t.Run("random password", func(t *testing.T) {
		t.Parallel()
		st := openStore(t)
		created, pw, err := auth.EnsureAdmin(ctx, st, "")
		require.NoError(t, err)
		require.True(t, created)
		require.Len(t, pw, 24)
		u, err := st.UserByName(ctx, auth.AdminUsername)
		require.NoError(t, err)
		require.True(t, auth.CheckPassword(u.PasswordHash, pw))
	})

	t.Run("users exist", func(t *testing.T) {
		t.Parallel()
		st := openStore(t)
		h, err := auth.HashPassword("pw")
		require.NoError(t, err)
		require.NoError(t, st.CreateUser(ctx, &store.User{Username: "alice", PasswordHash: h, Role: store.RoleViewer}))
		created, _, err := auth.EnsureAdmin(ctx, st, "x")
		require.NoError(t, err)
		require.False(t, created)
		_, err = st.UserByName(ctx, auth.AdminUsername)
		require.ErrorIs(t, err, store.ErrNotFound)
	})
}

func TestSessionsLoginAndResolve(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	_, _, err := auth.EnsureAdmin(ctx, st, "pw-123")
	require.NoError(t, err)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ss := &auth.Sessions{Store: st, IdleTimeout: 10 * time.Minute, MaxLifetime: time.Hour}

	_, err = ss.Login(ctx, "admin", "wrong", now)
	require.ErrorIs(t, err, auth.ErrInvalidCredentials)
	_, err = ss.Login(ctx, "nobody", "pw-123", now)
	require.ErrorIs(t, err, auth.ErrInvalidCredentials)

	res, err := ss.Login(ctx, "admin", "pw-123", now)
	require.NoError(t, err)
	require.Equal(t, now.Add(time.Hour), res.ExpiresAt)
	require.NotEmpty(t, res.CSRFToken)
	p, err := ss.Resolve(ctx, res.Token, now)
	require.NoError(t, err)
	require.Equal(t, "admin", p.Username)
	require.Equal(t, store.RoleAdmin, p.Role)
	require.Equal(t, res.CSRFToken, p.CSRFToken)

	// Only the hash is stored: the hash itself is not a valid token.
	_, err = ss.Resolve(ctx, auth.HashToken(res.Token), now)
	require.ErrorIs(t, err, auth.ErrInvalidToken)
	_, err = ss.Resolve(ctx, "", now)
	require.ErrorIs(t, err, auth.ErrInvalidToken)

	// Used every 9 minutes, the session lives until its absolute end.
	for at := now.Add(9 * time.Minute); at.Before(now.Add(time.Hour)); at = at.Add(9 * time.Minute) {
		_, err = ss.Resolve(ctx, res.Token, at)
		require.NoError(t, err, "used at %s", at)
	}
	_, err = ss.Resolve(ctx, res.Token, now.Add(time.Hour))
	require.ErrorIs(t, err, auth.ErrInvalidToken, "past the max lifetime")

	// Unused for the idle timeout, it ends.
	res2, err := ss.Login(ctx, "admin", "pw-123", now)
	require.NoError(t, err)
	_, err = ss.Resolve(ctx, res2.Token, now.Add(10*time.Minute))
	require.ErrorIs(t, err, auth.ErrInvalidToken, "idle")
}

func TestAPITokenResolve(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	u := &store.User{Username: "op", PasswordHash: "x", Role: store.RoleOperator, Groups: []int64{1, 2}}
	require.NoError(t, st.CreateUser(ctx, u))
	secret, hash := auth.NewAPIToken()
	require.True(t, strings.HasPrefix(secret, auth.TokenPrefix))
	require.NoError(t, st.CreateAccessToken(ctx, &store.AccessToken{TokenHash: hash, UserID: u.ID, Name: "ci",
		Role: store.RoleOperator, Groups: []int64{2, 3}}))
	ss := &auth.Sessions{Store: st}
	p, err := ss.Resolve(ctx, secret, now)
	require.NoError(t, err)
	require.Equal(t, store.RoleOperator, p.Role)
	require.Equal(t, []int64{2}, p.Groups, "only groups the owner still has")

	viewer := store.RoleViewer
	_, _, err = st.UpdateUser(ctx, u.ID, store.UserChange{Role: &viewer})
	require.NoError(t, err)
	p, err = ss.Resolve(ctx, secret, now)
	require.NoError(t, err)
	require.Equal(t, store.RoleViewer, p.Role, "never above the owner's current role")
}

// failingTouch is the real store whose TouchAccessToken fails, as a busy
// or broken writer would.
type failingTouch struct{ *store.Store }

func (failingTouch) TouchAccessToken(context.Context, int64, time.Time) error {
	return errors.New("database is locked")
}

// TestTokenTouchFailureKeepsTheRequest: last_used_at is informational; a
// token whose use cannot be recorded still authenticates, and the failure
// is logged without the secret.
func TestTokenTouchFailureKeepsTheRequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	u := &store.User{Username: "op", PasswordHash: "x", Role: store.RoleOperator}
	require.NoError(t, st.CreateUser(ctx, u))
	secret, hash := auth.NewAPIToken()
	tok := &store.AccessToken{TokenHash: hash, UserID: u.ID, Name: "ci", Role: store.RoleViewer}
	require.NoError(t, st.CreateAccessToken(ctx, tok))
	var logs bytes.Buffer
	ss := &auth.Sessions{Store: failingTouch{st}, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	p, err := ss.Resolve(ctx, secret, time.Now())
	require.NoError(t, err)
	require.Equal(t, store.RoleViewer, p.Role)
	require.Contains(t, logs.String(), "API token use not recorded")
	require.Contains(t, logs.String(), "database is locked")
	require.NotContains(t, logs.String(), secret)
	require.NotContains(t, logs.String(), hash)
}

func TestValidatePassword(t *testing.T) {
	t.Parallel()
	require.Empty(t, auth.ValidatePassword("alice", "long-enough-pw"))
	require.Contains(t, auth.ValidatePassword("alice", "short"), "at least 10")
	require.Contains(t, auth.ValidatePassword("alice-smith", "Alice-Smith"), "user name")
	require.Contains(t, auth.ValidatePassword("alice", strings.Repeat("x", 73)), "72 bytes")
}

func TestThrottle(t *testing.T) {
	t.Parallel()
	th := &auth.Throttle{FreePerUser: 2, FreePerAddress: 4, Base: time.Second, Max: 4 * time.Second}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	require.Zero(t, th.Check("u", "a", now))
	th.Failure("u", "a", now)
	require.Zero(t, th.Check("u", "a", now), "free failure")
	th.Failure("u", "a", now)
	require.Equal(t, time.Second, th.Check("u", "a", now))
	require.Zero(t, th.Check("u", "a", now.Add(time.Second)), "the delay has passed")
	th.Failure("u", "a", now.Add(time.Second))
	require.Equal(t, 2*time.Second, th.Check("u", "a", now.Add(time.Second)), "doubles")
	for range 5 {
		th.Failure("u", "a", now.Add(time.Second))
	}
	require.Equal(t, 4*time.Second, th.Check("u", "a", now.Add(time.Second)), "capped")

	// Another user from the same address: its own budget, then the address's.
	require.Equal(t, 4*time.Second, th.Check("v", "a", now.Add(time.Second)), "the address is over its budget")
	require.Zero(t, th.Check("v", "b", now.Add(time.Second)), "another address")
	th.Success("u")
	require.Zero(t, th.Check("u", "c", now.Add(time.Second)), "success clears the user")
}
