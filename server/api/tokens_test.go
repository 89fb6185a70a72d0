package api_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/server/api"
	"github.com/cronix/cronix/server/store"
)

// TestTokenExpiryCannotBeEscaped: an expires_at that is given must lie in
// the future — the zero instant too, which used to be stored as "never
// expires" — while null or no expires_at still means no expiry for a
// session; and an API token cannot create tokens (a token with minutes
// left could mint itself a successor that never expires).
func TestTokenExpiryCannotBeEscaped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := func(expires any) map[string]any {
		m := map[string]any{"name": "z", "role": "viewer", "groups": []int64{}}
		if expires != "absent" {
			m["expires_at"] = expires
		}
		return m
	}
	now := b.clock.Now()
	for _, expires := range []string{"0001-01-01T00:00:00Z", "0001-01-01T00:00:01Z", now.Format(time.RFC3339),
		now.Add(-time.Second).Format(time.RFC3339)} {
		e := b.errorOf(http.MethodPost, "/api/v1/tokens", b.token, body(expires), http.StatusBadRequest)
		require.Contains(t, e.Fields["expires_at"], "must be in the future", expires)
	}
	_, total, err := b.store.ListAccessTokens(b.ctx, 0, store.Page{Page: 1, PageSize: 10})
	require.NoError(t, err)
	require.Zero(t, total)

	var never, absent, short api.TokenCreated
	status, raw := b.do(http.MethodPost, "/api/v1/tokens", b.token, body(nil))
	require.Equal(t, http.StatusCreated, status, "%s", raw)
	require.Contains(t, string(raw), `"expires_at":null`, "null: never expires")
	require.NoError(t, json.Unmarshal(raw, &never))
	b.doJSON(http.MethodPost, "/api/v1/tokens", b.token, body("absent"), http.StatusCreated, &absent)
	require.True(t, absent.ExpiresAt.IsZero(), "absent: never expires")
	soon := now.Add(2 * time.Minute)
	b.doJSON(http.MethodPost, "/api/v1/tokens", b.token, body(soon.Format(time.RFC3339)), http.StatusCreated, &short)
	require.True(t, short.ExpiresAt.Equal(soon))

	// A token (here one with 2 minutes left) creates no token, with an
	// expiry or without.
	for _, expires := range []any{nil, "absent", now.Add(time.Minute).Format(time.RFC3339)} {
		e := b.errorOf(http.MethodPost, "/api/v1/tokens", short.Secret, body(expires), http.StatusForbidden)
		require.Contains(t, e.Error, "needs a login session")
	}
	_, total, err = b.store.ListAccessTokens(b.ctx, 0, store.Page{Page: 1, PageSize: 10})
	require.NoError(t, err)
	require.Equal(t, 3, total)
	// It still lists and revokes the owner's tokens.
	b.doJSON(http.MethodGet, "/api/v1/tokens", short.Secret, nil, http.StatusOK, nil)
	b.doJSON(http.MethodDelete, "/api/v1/tokens/"+strconv.FormatInt(never.ID, 10), short.Secret, nil, http.StatusNoContent, nil)
}

// TestTokenBodyErrorsNameTheField: an expires_at that is no RFC 3339 time
// is a 400 on expires_at, not a bare "malformed JSON" message.
func TestTokenBodyErrorsNameTheField(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.errorOf(http.MethodPost, "/api/v1/tokens", b.token,
		map[string]any{"name": "z", "role": "viewer", "groups": []int64{}, "expires_at": "garbage"}, http.StatusBadRequest)
	require.Equal(t, "invalid request", e.Error)
	require.Equal(t, map[string]string{"expires_at": "must be an RFC 3339 time such as 2026-03-01T09:00:00Z"}, e.Fields)
	e = b.errorOf(http.MethodPost, "/api/v1/tokens", b.token,
		map[string]any{"name": "z", "role": "viewer", "groups": "all"}, http.StatusBadRequest)
	require.Equal(t, map[string]string{"groups": "must be an array, not string"}, e.Fields)
}

// TestTokenLastUsed: a token's last_used_at is null until a request
// authenticates with it, then that request's time, rewritten at most once
// a minute.
func TestTokenLastUsed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var tok api.TokenCreated
	b.doJSON(http.MethodPost, "/api/v1/tokens", b.token, map[string]any{"name": "ci", "role": "viewer", "groups": []int64{}},
		http.StatusCreated, &tok)
	require.True(t, tok.LastUsedAt.IsZero())
	lastUsed := func() api.Time {
		t.Helper()
		var list struct {
			Items []api.Token `json:"items"`
		}
		b.doJSON(http.MethodGet, "/api/v1/tokens", b.token, nil, http.StatusOK, &list)
		require.Len(t, list.Items, 1)
		return list.Items[0].LastUsedAt
	}
	status, raw := b.do(http.MethodGet, "/api/v1/tokens", b.token, nil)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, string(raw), `"last_used_at":null`, "never used")

	first := b.clock.Now()
	b.doJSON(http.MethodGet, "/api/v1/jobs", tok.Secret, nil, http.StatusOK, nil)
	require.True(t, lastUsed().Equal(first))
	b.clock.Advance(30 * time.Second)
	b.doJSON(http.MethodGet, "/api/v1/jobs", tok.Secret, nil, http.StatusOK, nil)
	require.True(t, lastUsed().Equal(first), "not rewritten within a minute")
	b.clock.Advance(31 * time.Second)
	b.doJSON(http.MethodGet, "/api/v1/jobs", tok.Secret, nil, http.StatusOK, nil)
	require.True(t, lastUsed().Equal(b.clock.Now()))
}
