package auth_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"path/filepath"
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
		require.NoError(t, st.CreateUser(ctx, &store.User{Username: "alice", PasswordHash: h, Role: store.RoleUser}))
		created, _, err := auth.EnsureAdmin(ctx, st, "x")
		require.NoError(t, err)
		require.False(t, created)
		_, err = st.UserByName(ctx, auth.AdminUsername)
		require.ErrorIs(t, err, store.ErrNotFound)
	})
}

func TestLoginAndAuthenticate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	_, _, err := auth.EnsureAdmin(ctx, st, "pw-123")
	require.NoError(t, err)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

	_, err = auth.Login(ctx, st, "admin", "wrong", now.Add(time.Hour))
	require.ErrorIs(t, err, auth.ErrInvalidCredentials)
	_, err = auth.Login(ctx, st, "nobody", "pw-123", now.Add(time.Hour))
	require.ErrorIs(t, err, auth.ErrInvalidCredentials)

	tok, err := auth.Login(ctx, st, "admin", "pw-123", now.Add(time.Hour))
	require.NoError(t, err)
	u, err := auth.Authenticate(ctx, st, tok, now)
	require.NoError(t, err)
	require.Equal(t, "admin", u.Username)

	// Only the hash is stored: the hash itself is not a valid token.
	_, err = auth.Authenticate(ctx, st, auth.HashToken(tok), now)
	require.ErrorIs(t, err, auth.ErrInvalidToken)
	_, err = auth.Authenticate(ctx, st, "", now)
	require.ErrorIs(t, err, auth.ErrInvalidToken)
	_, err = auth.Authenticate(ctx, st, tok, now.Add(time.Hour+time.Second))
	require.ErrorIs(t, err, auth.ErrInvalidToken, "expired")
}
