package store_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/server/store"
)

// runAccessSuite checks users with group grants, the last-admin rule,
// sessions, API tokens, the audit log and group scopes on one dialect.
func runAccessSuite(t *testing.T, open func(t *testing.T) *store.Store) {
	t.Run("Users", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)
		ga, gb := &store.Group{AppName: "a"}, &store.Group{AppName: "b"}
		require.NoError(t, s.CreateGroup(ctx, ga))
		require.NoError(t, s.CreateGroup(ctx, gb))

		admin := &store.User{Username: "root", PasswordHash: "h", Role: store.RoleAdmin}
		require.NoError(t, s.CreateUser(ctx, admin))
		op := &store.User{Username: "op", PasswordHash: "h", Role: store.RoleOperator, Groups: []int64{gb.ID, ga.ID, ga.ID}}
		require.NoError(t, s.CreateUser(ctx, op))
		require.Equal(t, []int64{ga.ID, gb.ID}, op.Groups, "sorted, without duplicates")
		got, err := s.GetUser(ctx, op.ID)
		require.NoError(t, err)
		require.Equal(t, op, got)

		users, total, err := s.ListUsers(ctx, store.Page{Page: 1, PageSize: 10})
		require.NoError(t, err)
		require.Equal(t, 2, total)
		require.Equal(t, []int64{ga.ID, gb.ID}, users[1].Groups)
		require.Empty(t, users[0].Groups)

		// A session ends when the password changes.
		now := time.Now().UTC()
		require.NoError(t, s.CreateSession(ctx, &store.Session{TokenHash: "s1", UserID: op.ID, CSRFToken: "c",
			CreatedAt: now, LastSeenAt: now, ExpiresAt: now.Add(time.Hour)}))
		_, su, err := s.SessionByHash(ctx, "s1", now, time.Minute)
		require.NoError(t, err)
		require.Equal(t, op.ID, su.ID)
		name, hash, only := "operator", "h2", []int64{gb.ID}
		before, after, err := s.UpdateUser(ctx, op.ID, store.UserChange{Username: &name, PasswordHash: &hash, Groups: &only})
		require.NoError(t, err)
		require.Equal(t, "op", before.Username)
		require.Equal(t, "operator", after.Username)
		require.Equal(t, []int64{gb.ID}, after.Groups)
		_, _, err = s.SessionByHash(ctx, "s1", now, time.Minute)
		require.ErrorIs(t, err, store.ErrNotFound, "a password change ends the user's sessions")

		// The last enabled admin stays.
		viewer := store.RoleViewer
		yes := true
		_, _, err = s.UpdateUser(ctx, admin.ID, store.UserChange{Role: &viewer})
		require.ErrorIs(t, err, store.ErrLastAdmin)
		require.ErrorIs(t, err, store.ErrConflict)
		_, _, err = s.UpdateUser(ctx, admin.ID, store.UserChange{Disabled: &yes})
		require.ErrorIs(t, err, store.ErrLastAdmin)
		_, err = s.DeleteUser(ctx, admin.ID)
		require.ErrorIs(t, err, store.ErrLastAdmin)
		adminRole := store.RoleAdmin
		_, _, err = s.UpdateUser(ctx, op.ID, store.UserChange{Role: &adminRole})
		require.NoError(t, err)
		_, _, err = s.UpdateUser(ctx, admin.ID, store.UserChange{Disabled: &yes})
		require.NoError(t, err, "another enabled admin exists")

		// Deleting a group removes its grants.
		require.NoError(t, s.DeleteGroup(ctx, gb.ID))
		got, err = s.GetUser(ctx, op.ID)
		require.NoError(t, err)
		require.Empty(t, got.Groups)

		deleted, err := s.DeleteUser(ctx, admin.ID)
		require.NoError(t, err)
		require.Equal(t, "root", deleted.Username)
		_, err = s.GetUser(ctx, admin.ID)
		require.ErrorIs(t, err, store.ErrNotFound)
		_, _, err = s.UpdateUser(ctx, admin.ID, store.UserChange{Role: &viewer})
		require.ErrorIs(t, err, store.ErrNotFound)

		got2, err := s.ExistingGroups(ctx, []int64{ga.ID, gb.ID, 999})
		require.NoError(t, err)
		require.Equal(t, []int64{ga.ID}, got2)
	})

	t.Run("Sessions", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)
		u := &store.User{Username: "alice", PasswordHash: "h", Role: store.RoleAdmin}
		require.NoError(t, s.CreateUser(ctx, u))
		now := time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)
		require.NoError(t, s.CreateSession(ctx, &store.Session{TokenHash: "live", UserID: u.ID, CSRFToken: "csrf",
			CreatedAt: now, LastSeenAt: now, ExpiresAt: now.Add(time.Hour).In(time.FixedZone("x", 5*3600))}))
		ss, su, err := s.SessionByHash(ctx, "live", now.Add(time.Minute), 10*time.Minute)
		require.NoError(t, err)
		require.Equal(t, "csrf", ss.CSRFToken)
		require.Equal(t, u.ID, su.ID)
		_, _, err = s.SessionByHash(ctx, "live", now.Add(10*time.Minute), 10*time.Minute)
		require.ErrorIs(t, err, store.ErrNotFound, "idle")
		require.NoError(t, s.TouchSession(ctx, "live", now.Add(9*time.Minute)))
		_, _, err = s.SessionByHash(ctx, "live", now.Add(10*time.Minute), 10*time.Minute)
		require.NoError(t, err, "touched")
		_, _, err = s.SessionByHash(ctx, "live", now.Add(time.Hour), 2*time.Hour)
		require.ErrorIs(t, err, store.ErrNotFound, "expires_at is exclusive")
		require.NoError(t, s.DeleteSession(ctx, "live"))
		_, _, err = s.SessionByHash(ctx, "live", now, time.Hour)
		require.ErrorIs(t, err, store.ErrNotFound)
		require.NoError(t, s.DeleteExpiredSessions(ctx, now, time.Hour))
	})

	t.Run("Tokens", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)
		u := &store.User{Username: "alice", PasswordHash: "h", Role: store.RoleOperator}
		require.NoError(t, s.CreateUser(ctx, u))
		now := time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)
		exp := now.Add(time.Hour)
		forever := &store.AccessToken{TokenHash: "h1", UserID: u.ID, Name: "ci", Role: store.RoleViewer, Groups: []int64{3, 1}}
		require.NoError(t, s.CreateAccessToken(ctx, forever))
		require.NotZero(t, forever.ID)
		short := &store.AccessToken{TokenHash: "h2", UserID: u.ID, Name: "short", Role: store.RoleOperator, ExpiresAt: &exp}
		require.NoError(t, s.CreateAccessToken(ctx, short))

		tok, owner, err := s.AccessTokenByHash(ctx, "h1", now.Add(1000*time.Hour))
		require.NoError(t, err)
		require.Equal(t, []int64{1, 3}, tok.Groups)
		require.Equal(t, u.ID, owner.ID)
		require.Equal(t, "alice", tok.Username)
		_, _, err = s.AccessTokenByHash(ctx, "h2", now)
		require.NoError(t, err)
		_, _, err = s.AccessTokenByHash(ctx, "h2", exp)
		require.ErrorIs(t, err, store.ErrNotFound, "expired")

		list, total, err := s.ListAccessTokens(ctx, u.ID, store.Page{Page: 1, PageSize: 10})
		require.NoError(t, err)
		require.Equal(t, 2, total)
		require.Equal(t, "short", list[0].Name)
		require.Equal(t, "alice", list[0].Username)
		require.NotNil(t, list[0].ExpiresAt)
		require.Nil(t, list[1].ExpiresAt)
		require.Nil(t, list[1].LastUsedAt, "never used")

		used := now.Add(90 * time.Second)
		require.NoError(t, s.TouchAccessToken(ctx, forever.ID, used))
		tok, _, err = s.AccessTokenByHash(ctx, "h1", now)
		require.NoError(t, err)
		require.NotNil(t, tok.LastUsedAt)
		require.True(t, used.Equal(*tok.LastUsedAt), "%v", tok.LastUsedAt)
		require.NoError(t, s.TouchAccessToken(ctx, 999999, used), "a revoked token is no error")
		_, total, err = s.ListAccessTokens(ctx, u.ID+1, store.Page{Page: 1, PageSize: 10})
		require.NoError(t, err)
		require.Zero(t, total)

		require.NoError(t, s.DeleteAccessToken(ctx, forever.ID))
		require.ErrorIs(t, s.DeleteAccessToken(ctx, forever.ID), store.ErrNotFound)
		_, _, err = s.AccessTokenByHash(ctx, "h1", now)
		require.ErrorIs(t, err, store.ErrNotFound, "revoked")

		yes := true
		_, _, err = s.UpdateUser(ctx, u.ID, store.UserChange{Disabled: &yes})
		require.NoError(t, err)
		_, _, err = s.AccessTokenByHash(ctx, "h2", now)
		require.ErrorIs(t, err, store.ErrNotFound, "a disabled owner's tokens stop working")
	})

	t.Run("Audit", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)
		t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
		for i, e := range []store.AuditEntry{
			{At: t0, Username: "alice", Address: "127.0.0.1", Action: "create", ObjectType: "job", ObjectID: "1",
				Diff: json.RawMessage(`{"name":"x"}`)},
			{At: t0.Add(time.Minute), Username: "bob", Action: "update", ObjectType: "job", ObjectID: "1"},
			{At: t0.Add(2 * time.Minute), Username: "alice", Action: "login_failed", ObjectType: "session"},
		} {
			require.NoError(t, s.InsertAudit(ctx, &e), i)
			require.NotZero(t, e.ID)
		}
		all, total, err := s.FindAudit(ctx, store.AuditFilter{}, store.Page{Page: 1, PageSize: 10})
		require.NoError(t, err)
		require.Equal(t, 3, total)
		require.Equal(t, "login_failed", all[0].Action, "newest first")
		require.JSONEq(t, `{"name":"x"}`, string(all[2].Diff))
		require.Nil(t, all[1].Diff)
		got, total, err := s.FindAudit(ctx, store.AuditFilter{ObjectType: "job", ObjectID: "1", Username: "alice"}, store.Page{})
		require.NoError(t, err)
		require.Equal(t, 1, total)
		require.Equal(t, "create", got[0].Action)
		_, total, err = s.FindAudit(ctx, store.AuditFilter{From: t0.Add(time.Minute), To: t0.Add(2 * time.Minute)}, store.Page{})
		require.NoError(t, err)
		require.Equal(t, 1, total)
	})

	t.Run("Scopes", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)
		ga, gb := &store.Group{AppName: "a"}, &store.Group{AppName: "b"}
		require.NoError(t, s.CreateGroup(ctx, ga))
		require.NoError(t, s.CreateGroup(ctx, gb))
		ja := &store.Job{Name: "ja", Group: "a", Schedule: "@every 1m", Handler: "shell"}
		jb := &store.Job{Name: "jb", Group: "b", Schedule: "@every 1m", Handler: "shell"}
		require.NoError(t, s.CreateJob(ctx, ja))
		require.NoError(t, s.CreateJob(ctx, jb))
		_, err := s.InsertRuns(ctx, []store.Run{
			{FireID: "a-1", JobID: ja.ID, Status: "triggered", ScheduledAt: time.Now()},
			{FireID: "b-1", JobID: jb.ID, Status: "triggered", ScheduledAt: time.Now()},
		})
		require.NoError(t, err)
		onlyA := &store.Scope{GroupIDs: []int64{ga.ID}}

		jobs, total, err := s.FindJobs(ctx, store.JobFilter{Scope: onlyA}, store.Page{})
		require.NoError(t, err)
		require.Equal(t, 1, total)
		require.Equal(t, "ja", jobs[0].Name)
		_, total, err = s.FindJobs(ctx, store.JobFilter{Scope: &store.Scope{}}, store.Page{})
		require.NoError(t, err)
		require.Zero(t, total, "an empty scope sees nothing")
		_, total, err = s.FindJobs(ctx, store.JobFilter{}, store.Page{})
		require.NoError(t, err)
		require.Equal(t, 2, total, "no scope sees everything")

		runs, total, err := s.FindRuns(ctx, store.RunFilter{Scope: onlyA}, store.Page{})
		require.NoError(t, err)
		require.Equal(t, 1, total)
		require.Equal(t, "a-1", runs[0].FireID)

		groups, total, err := s.FindGroups(ctx, store.GroupFilter{Scope: onlyA}, store.Page{})
		require.NoError(t, err)
		require.Equal(t, 1, total)
		require.Equal(t, "a", groups[0].AppName)
	})
}
