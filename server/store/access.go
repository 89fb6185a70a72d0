package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/uptrace/bun"

	schema "github.com/cronix/cronix/sql"
)

// ErrLastAdmin is returned (wrapping ErrConflict) by UpdateUser and
// DeleteUser when the change would leave no enabled admin.
var ErrLastAdmin = fmt.Errorf("%w: the last enabled admin cannot be demoted, disabled or deleted", ErrConflict)

// Scope limits a list to the groups a principal may see: the ids of those
// groups. A nil *Scope is no limit; an empty one matches nothing.
type Scope struct {
	GroupIDs []int64
}

// Session is a login session: a browser cookie or a bearer token that
// expires after IdleTimeout without use or at ExpiresAt, whichever is first.
type Session struct {
	// TokenHash is the SHA-256 (hex) of the session token, the only form stored.
	TokenHash string
	UserID    int64
	// CSRFToken is the value unsafe cookie-authenticated requests carry in X-CSRF-Token.
	CSRFToken  string
	CreatedAt  time.Time
	LastSeenAt time.Time
	ExpiresAt  time.Time
}

// AccessToken is a named long-lived API token of a user, with a role and
// groups no wider than its owner's.
type AccessToken struct {
	ID        int64
	TokenHash string // SHA-256 (hex) of the secret
	UserID    int64
	Username  string // the owner's name (read only)
	Name      string
	Role      string
	Groups    []int64
	ExpiresAt *time.Time // nil = never
	CreatedAt time.Time
	// LastUsedAt is when a request last authenticated with the token, to
	// within a minute (see TouchAccessToken); nil = never.
	LastUsedAt *time.Time
}

// AuditEntry is one row of the audit log.
type AuditEntry struct {
	ID         int64
	At         time.Time
	UserID     int64
	Username   string
	Address    string
	Action     string
	ObjectType string
	ObjectID   string
	// Diff is a JSON object ({"field":{"from":..,"to":..}} or the created
	// object), or nil.
	Diff json.RawMessage
}

// AuditFilter selects audit entries; zero fields match every entry.
type AuditFilter struct {
	Username   string
	ObjectType string
	ObjectID   string
	// From (inclusive) and To (exclusive) bound At.
	From time.Time
	To   time.Time
}

type userRow struct {
	bun.BaseModel `bun:"table:users,alias:u"`

	ID           int64     `bun:"id,pk,autoincrement"`
	Username     string    `bun:"username,notnull"`
	PasswordHash string    `bun:"password_hash,notnull"`
	Role         string    `bun:"role,notnull"`
	Disabled     bool      `bun:"disabled,notnull"`
	CreatedAt    time.Time `bun:"created_at,notnull"`
	UpdatedAt    time.Time `bun:"updated_at,notnull"`
}

func (r *userRow) domain() *User {
	return &User{
		ID:           r.ID,
		Username:     r.Username,
		PasswordHash: r.PasswordHash,
		Role:         r.Role,
		Disabled:     r.Disabled,
		CreatedAt:    r.CreatedAt.UTC(),
		UpdatedAt:    r.UpdatedAt.UTC(),
	}
}

type userGroupRow struct {
	bun.BaseModel `bun:"table:user_groups,alias:ug"`

	UserID  int64 `bun:"user_id,pk"`
	GroupID int64 `bun:"group_id,pk"`
}

type sessionRow struct {
	bun.BaseModel `bun:"table:sessions,alias:s"`

	TokenHash  string    `bun:"token_hash,pk"`
	UserID     int64     `bun:"user_id,notnull"`
	CSRFToken  string    `bun:"csrf_token,notnull"`
	CreatedAt  time.Time `bun:"created_at,notnull"`
	LastSeenAt time.Time `bun:"last_seen_at,notnull"`
	ExpiresAt  time.Time `bun:"expires_at,notnull"`
}

type accessTokenRow struct {
	bun.BaseModel `bun:"table:access_tokens,alias:t"`

	ID         int64      `bun:"id,pk,autoincrement"`
	TokenHash  string     `bun:"token_hash,notnull"`
	UserID     int64      `bun:"user_id,notnull"`
	Name       string     `bun:"name,notnull"`
	Role       string     `bun:"role,notnull"`
	GroupIDs   string     `bun:"group_ids,notnull"`
	ExpiresAt  *time.Time `bun:"expires_at"`
	CreatedAt  time.Time  `bun:"created_at,notnull"`
	LastUsedAt *time.Time `bun:"last_used_at"`
}

func (r *accessTokenRow) domain() AccessToken {
	t := AccessToken{ID: r.ID, TokenHash: r.TokenHash, UserID: r.UserID, Name: r.Name,
		Role: r.Role, Groups: splitIDs(r.GroupIDs), CreatedAt: r.CreatedAt.UTC()}
	if r.ExpiresAt != nil {
		e := r.ExpiresAt.UTC()
		t.ExpiresAt = &e
	}
	if r.LastUsedAt != nil {
		u := r.LastUsedAt.UTC()
		t.LastUsedAt = &u
	}
	return t
}

type auditRow struct {
	bun.BaseModel `bun:"table:audit_log,alias:a"`

	ID         int64     `bun:"id,pk,autoincrement"`
	At         time.Time `bun:"at,notnull"`
	UserID     int64     `bun:"user_id,notnull"`
	Username   string    `bun:"username,notnull"`
	Address    string    `bun:"address,notnull"`
	Action     string    `bun:"action,notnull"`
	ObjectType string    `bun:"object_type,notnull"`
	ObjectID   string    `bun:"object_id,notnull"`
	Diff       string    `bun:"diff,notnull"`
}

// --- users

// CreateUser inserts u with its group grants (ID, CreatedAt, UpdatedAt are
// set). ErrConflict if the name exists. An empty Role is stored (and written
// back) as RoleViewer.
func (s *Store) CreateUser(ctx context.Context, u *User) error {
	t := now()
	row := userRow{Username: u.Username, PasswordHash: u.PasswordHash, Role: u.Role, Disabled: u.Disabled,
		CreatedAt: t, UpdatedAt: t}
	if row.Role == "" {
		row.Role = RoleViewer
	}
	err := s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		q := tx.NewInsert().Model(&row).Column("username", "password_hash", "role", "disabled", "created_at", "updated_at")
		if s.dialect != schema.MySQL {
			q = q.Returning("id")
		}
		res, err := q.Exec(ctx)
		if err != nil {
			return err
		}
		if row.ID == 0 {
			if row.ID, err = res.LastInsertId(); err != nil {
				return err
			}
		}
		return setUserGroups(ctx, tx, row.ID, u.Groups)
	})
	if err != nil {
		return wrap(err, "create user %q", u.Username)
	}
	u.ID, u.Role, u.CreatedAt, u.UpdatedAt = row.ID, row.Role, t, t
	u.Groups = normIDs(u.Groups)
	return nil
}

// normIDs is ids sorted ascending without duplicates; never nil.
func normIDs(ids []int64) []int64 {
	out := append([]int64{}, ids...)
	slices.Sort(out)
	return slices.Compact(out)
}

// setUserGroups replaces the group grants of user id.
func setUserGroups(ctx context.Context, tx bun.Tx, id int64, groups []int64) error {
	if _, err := tx.NewDelete().TableExpr("user_groups").Where("user_id = ?", id).Exec(ctx); err != nil {
		return err
	}
	groups = normIDs(groups)
	if len(groups) == 0 {
		return nil
	}
	rows := make([]userGroupRow, len(groups))
	for i, g := range groups {
		rows[i] = userGroupRow{UserID: id, GroupID: g}
	}
	_, err := tx.NewInsert().Model(&rows).Exec(ctx)
	return err
}

// userGroups returns the group ids granted to each of ids.
func (s *Store) userGroups(ctx context.Context, db bun.IDB, ids ...int64) (map[int64][]int64, error) {
	out := make(map[int64][]int64, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	var rows []userGroupRow
	if err := db.NewSelect().Model(&rows).Where("ug.user_id IN (?)", bun.List(ids)).
		Order("ug.user_id ASC", "ug.group_id ASC").Scan(ctx); err != nil {
		return nil, err
	}
	for _, r := range rows {
		out[r.UserID] = append(out[r.UserID], r.GroupID)
	}
	return out, nil
}

// withGroups fills u.Groups.
func (s *Store) withGroups(ctx context.Context, u *User) (*User, error) {
	m, err := s.userGroups(ctx, s.db, u.ID)
	if err != nil {
		return nil, err
	}
	u.Groups = normIDs(m[u.ID])
	return u, nil
}

// GetUser returns the user with its groups, or ErrNotFound.
func (s *Store) GetUser(ctx context.Context, id int64) (*User, error) {
	var row userRow
	if err := s.db.NewSelect().Model(&row).Where("u.id = ?", id).Limit(1).Scan(ctx); err != nil {
		return nil, wrap(err, "user %d", id)
	}
	u, err := s.withGroups(ctx, row.domain())
	return u, wrap(err, "groups of user %d", id)
}

// UserByName returns the user with its groups, or ErrNotFound.
func (s *Store) UserByName(ctx context.Context, username string) (*User, error) {
	var row userRow
	if err := s.db.NewSelect().Model(&row).Where("u.username = ?", username).Limit(1).Scan(ctx); err != nil {
		return nil, wrap(err, "user %q", username)
	}
	u, err := s.withGroups(ctx, row.domain())
	return u, wrap(err, "groups of user %q", username)
}

// CountUsers returns the number of users.
func (s *Store) CountUsers(ctx context.Context) (int, error) {
	n, err := s.db.NewSelect().Model((*userRow)(nil)).Count(ctx)
	if err != nil {
		return 0, wrap(err, "count users")
	}
	return int(n), nil
}

// ListUsers returns a page of users ordered by id, with their groups, and the total.
func (s *Store) ListUsers(ctx context.Context, p Page) ([]User, int, error) {
	total, err := s.db.NewSelect().Model((*userRow)(nil)).Count(ctx)
	if err != nil {
		return nil, 0, wrap(err, "count users")
	}
	var rows []userRow
	if err := paginate(s.db.NewSelect().Model(&rows).Order("u.id ASC"), p).Scan(ctx); err != nil {
		return nil, 0, wrap(err, "list users")
	}
	ids := make([]int64, len(rows))
	for i := range rows {
		ids[i] = rows[i].ID
	}
	groups, err := s.userGroups(ctx, s.db, ids...)
	if err != nil {
		return nil, 0, wrap(err, "list user groups")
	}
	out := make([]User, len(rows))
	for i := range rows {
		out[i] = *rows[i].domain()
		out[i].Groups = normIDs(groups[rows[i].ID])
	}
	return out, int(total), nil
}

// UserChange is a partial update of a user: nil fields stay as they are.
type UserChange struct {
	Username     *string
	PasswordHash *string
	Role         *string
	Disabled     *bool
	Groups       *[]int64
}

// UpdateUser applies ch to user id and returns the user before and after.
// ErrNotFound if absent, ErrConflict if the new name is taken, ErrLastAdmin
// if no enabled admin would remain. A new password hash or disabling the
// user deletes its sessions in the same transaction.
func (s *Store) UpdateUser(ctx context.Context, id int64, ch UserChange) (before, after *User, err error) {
	t := now()
	err = s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var old userRow
		if err := s.lockRow(tx.NewSelect().Model(&old).Where("u.id = ?", id).Limit(1)).Scan(ctx); err != nil {
			return err
		}
		gm, err := s.userGroups(ctx, tx, id)
		if err != nil {
			return err
		}
		before = old.domain()
		before.Groups = normIDs(gm[id])
		row := old
		if ch.Username != nil {
			row.Username = *ch.Username
		}
		if ch.PasswordHash != nil {
			row.PasswordHash = *ch.PasswordHash
		}
		if ch.Role != nil {
			row.Role = *ch.Role
		}
		if ch.Disabled != nil {
			row.Disabled = *ch.Disabled
		}
		row.UpdatedAt = t
		if old.Role == RoleAdmin && !old.Disabled && (row.Role != RoleAdmin || row.Disabled) {
			if err := s.checkOtherAdmin(ctx, tx, id); err != nil {
				return err
			}
		}
		if _, err := tx.NewUpdate().Model(&row).Column("username", "password_hash", "role", "disabled", "updated_at").
			Where("id = ?", id).Exec(ctx); err != nil {
			return err
		}
		after = row.domain()
		after.Groups = before.Groups
		if ch.Groups != nil {
			if err := setUserGroups(ctx, tx, id, *ch.Groups); err != nil {
				return err
			}
			after.Groups = normIDs(*ch.Groups)
		}
		if (ch.PasswordHash != nil) || (row.Disabled && !old.Disabled) {
			if _, err := tx.NewDelete().TableExpr("sessions").Where("user_id = ?", id).Exec(ctx); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, wrap(err, "update user %d", id)
	}
	return before, after, nil
}

// checkOtherAdmin returns ErrLastAdmin unless an enabled admin other than
// id exists; it locks the admin rows it reads.
func (s *Store) checkOtherAdmin(ctx context.Context, tx bun.Tx, id int64) error {
	var others []userRow
	q := tx.NewSelect().Model(&others).Column("id").
		Where("u.role = ?", RoleAdmin).Where("u.disabled = ?", false).Where("u.id <> ?", id)
	if err := s.lockRow(q).Scan(ctx); err != nil {
		return err
	}
	if len(others) == 0 {
		return ErrLastAdmin
	}
	return nil
}

// DeleteUser deletes the user, its group grants, sessions and API tokens,
// and returns the deleted user. ErrNotFound if absent, ErrLastAdmin if it is
// the last enabled admin.
func (s *Store) DeleteUser(ctx context.Context, id int64) (*User, error) {
	var deleted *User
	err := s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var old userRow
		if err := s.lockRow(tx.NewSelect().Model(&old).Where("u.id = ?", id).Limit(1)).Scan(ctx); err != nil {
			return err
		}
		if old.Role == RoleAdmin && !old.Disabled {
			if err := s.checkOtherAdmin(ctx, tx, id); err != nil {
				return err
			}
		}
		gm, err := s.userGroups(ctx, tx, id)
		if err != nil {
			return err
		}
		deleted = old.domain()
		deleted.Groups = normIDs(gm[id])
		for _, table := range []string{"user_groups", "sessions", "access_tokens"} {
			if _, err := tx.NewDelete().TableExpr(table).Where("user_id = ?", id).Exec(ctx); err != nil {
				return err
			}
		}
		_, err = tx.NewDelete().TableExpr("users").Where("id = ?", id).Exec(ctx)
		return err
	})
	if err != nil {
		return nil, wrap(err, "delete user %d", id)
	}
	return deleted, nil
}

// ExistingGroups returns those of ids that are ids of groups.
func (s *Store) ExistingGroups(ctx context.Context, ids []int64) ([]int64, error) {
	ids = normIDs(ids)
	if len(ids) == 0 {
		return []int64{}, nil
	}
	var got []int64
	if err := s.db.NewSelect().TableExpr("job_groups").Column("id").Where("id IN (?)", bun.List(ids)).
		Order("id ASC").Scan(ctx, &got); err != nil {
		return nil, wrap(err, "look up groups")
	}
	return got, nil
}

// --- sessions

// CreateSession stores a login session.
func (s *Store) CreateSession(ctx context.Context, ss *Session) error {
	row := sessionRow{TokenHash: ss.TokenHash, UserID: ss.UserID, CSRFToken: ss.CSRFToken,
		CreatedAt: utc(ss.CreatedAt), LastSeenAt: utc(ss.LastSeenAt), ExpiresAt: utc(ss.ExpiresAt)}
	if _, err := s.db.NewInsert().Model(&row).Exec(ctx); err != nil {
		return wrap(err, "create session for user %d", ss.UserID)
	}
	return nil
}

// SessionByHash returns a session and its enabled user if the session is
// unexpired at now and was last seen less than idle ago; ErrNotFound
// otherwise.
func (s *Store) SessionByHash(ctx context.Context, tokenHash string, now time.Time, idle time.Duration) (*Session, *User, error) {
	var row sessionRow
	err := s.db.NewSelect().Model(&row).
		Where("s.token_hash = ?", tokenHash).
		Where("s.expires_at > ?", utc(now)).
		Where("s.last_seen_at > ?", utc(now.Add(-idle))).
		Limit(1).Scan(ctx)
	if err != nil {
		return nil, nil, wrap(err, "session")
	}
	u, err := s.GetUser(ctx, row.UserID)
	if err != nil {
		return nil, nil, err
	}
	if u.Disabled {
		return nil, nil, wrap(ErrNotFound, "session of disabled user %d", u.ID)
	}
	return &Session{TokenHash: row.TokenHash, UserID: row.UserID, CSRFToken: row.CSRFToken,
		CreatedAt: row.CreatedAt.UTC(), LastSeenAt: row.LastSeenAt.UTC(), ExpiresAt: row.ExpiresAt.UTC()}, u, nil
}

// TouchSession records that the session was used at now.
func (s *Store) TouchSession(ctx context.Context, tokenHash string, now time.Time) error {
	_, err := s.db.NewUpdate().TableExpr("sessions").Set("last_seen_at = ?", utc(now)).
		Where("token_hash = ?", tokenHash).Exec(ctx)
	return wrap(err, "touch session")
}

// DeleteSession deletes one session (logout); absent is not an error.
func (s *Store) DeleteSession(ctx context.Context, tokenHash string) error {
	_, err := s.db.NewDelete().TableExpr("sessions").Where("token_hash = ?", tokenHash).Exec(ctx)
	return wrap(err, "delete session")
}

// DeleteUserSessions deletes every session of a user.
func (s *Store) DeleteUserSessions(ctx context.Context, userID int64) error {
	_, err := s.db.NewDelete().TableExpr("sessions").Where("user_id = ?", userID).Exec(ctx)
	return wrap(err, "delete sessions of user %d", userID)
}

// DeleteExpiredSessions deletes sessions expired or idle at now.
func (s *Store) DeleteExpiredSessions(ctx context.Context, now time.Time, idle time.Duration) error {
	_, err := s.db.NewDelete().TableExpr("sessions").
		WhereOr("expires_at <= ?", utc(now)).WhereOr("last_seen_at <= ?", utc(now.Add(-idle))).Exec(ctx)
	return wrap(err, "delete expired sessions")
}

// --- API tokens

// CreateAccessToken stores t (ID and CreatedAt are set).
func (s *Store) CreateAccessToken(ctx context.Context, t *AccessToken) error {
	row := accessTokenRow{TokenHash: t.TokenHash, UserID: t.UserID, Name: t.Name, Role: t.Role,
		GroupIDs: joinIDs(normIDs(t.Groups)), CreatedAt: now()}
	if t.ExpiresAt != nil {
		e := utc(*t.ExpiresAt)
		row.ExpiresAt = &e
	}
	q := s.db.NewInsert().Model(&row).Column("token_hash", "user_id", "name", "role", "group_ids", "expires_at", "created_at")
	if s.dialect != schema.MySQL {
		q = q.Returning("id")
	} else {
		q = q.Returning("NULL") // MariaDB would otherwise return the NULL columns
	}
	if _, err := q.Exec(ctx); err != nil {
		return wrap(err, "create API token %q", t.Name)
	}
	if s.dialect == schema.MySQL {
		// No RETURNING on MySQL: read the id back by the unique hash.
		if err := s.db.NewSelect().TableExpr("access_tokens").Column("id").Where("token_hash = ?", row.TokenHash).
			Scan(ctx, &row.ID); err != nil {
			return wrap(err, "id of API token %q", t.Name)
		}
	}
	t.ID, t.CreatedAt, t.Groups = row.ID, row.CreatedAt, normIDs(t.Groups)
	return nil
}

// AccessTokenByHash returns an unexpired token and its enabled owner, or ErrNotFound.
func (s *Store) AccessTokenByHash(ctx context.Context, tokenHash string, now time.Time) (*AccessToken, *User, error) {
	var row accessTokenRow
	err := s.db.NewSelect().Model(&row).
		Where("t.token_hash = ?", tokenHash).
		WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery {
			return q.Where("t.expires_at IS NULL").WhereOr("t.expires_at > ?", utc(now))
		}).
		Limit(1).Scan(ctx)
	if err != nil {
		return nil, nil, wrap(err, "API token")
	}
	u, err := s.GetUser(ctx, row.UserID)
	if err != nil {
		return nil, nil, err
	}
	if u.Disabled {
		return nil, nil, wrap(ErrNotFound, "API token of disabled user %d", u.ID)
	}
	t := row.domain()
	t.Username = u.Username
	return &t, u, nil
}

// ListAccessTokens returns the tokens of user userID (0 = every user),
// newest first, with a page and the total.
func (s *Store) ListAccessTokens(ctx context.Context, userID int64, p Page) ([]AccessToken, int, error) {
	filter := func(q *bun.SelectQuery) *bun.SelectQuery {
		if userID != 0 {
			q = q.Where("t.user_id = ?", userID)
		}
		return q
	}
	total, err := filter(s.db.NewSelect().Model((*accessTokenRow)(nil))).Count(ctx)
	if err != nil {
		return nil, 0, wrap(err, "count API tokens")
	}
	var rows []accessTokenRow
	if err := paginate(filter(s.db.NewSelect().Model(&rows)).Order("t.id DESC"), p).Scan(ctx); err != nil {
		return nil, 0, wrap(err, "list API tokens")
	}
	names := map[int64]string{}
	var ids []int64
	for _, r := range rows {
		ids = append(ids, r.UserID)
	}
	if len(ids) > 0 {
		var users []userRow
		if err := s.db.NewSelect().Model(&users).Column("id", "username").Where("u.id IN (?)", bun.List(normIDs(ids))).
			Scan(ctx); err != nil {
			return nil, 0, wrap(err, "owners of API tokens")
		}
		for _, u := range users {
			names[u.ID] = u.Username
		}
	}
	out := make([]AccessToken, len(rows))
	for i := range rows {
		out[i] = rows[i].domain()
		out[i].Username = names[rows[i].UserID]
	}
	return out, int(total), nil
}

// TouchAccessToken records that token id was used at now. Absent is not an
// error (the token was revoked meanwhile).
func (s *Store) TouchAccessToken(ctx context.Context, id int64, now time.Time) error {
	_, err := s.db.NewUpdate().TableExpr("access_tokens").Set("last_used_at = ?", utc(now)).
		Where("id = ?", id).Exec(ctx)
	return wrap(err, "touch API token %d", id)
}

// GetAccessToken returns a token by id, or ErrNotFound.
func (s *Store) GetAccessToken(ctx context.Context, id int64) (*AccessToken, error) {
	var row accessTokenRow
	if err := s.db.NewSelect().Model(&row).Where("t.id = ?", id).Limit(1).Scan(ctx); err != nil {
		return nil, wrap(err, "API token %d", id)
	}
	t := row.domain()
	return &t, nil
}

// DeleteAccessToken revokes a token. ErrNotFound if absent.
func (s *Store) DeleteAccessToken(ctx context.Context, id int64) error {
	res, err := s.db.NewDelete().TableExpr("access_tokens").Where("id = ?", id).Exec(ctx)
	if err != nil {
		return wrap(err, "delete API token %d", id)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return wrap(ErrNotFound, "delete API token %d", id)
	}
	return nil
}

// --- audit

// InsertAudit appends an entry (ID is set; a zero At is now).
func (s *Store) InsertAudit(ctx context.Context, e *AuditEntry) error {
	if e.At.IsZero() {
		e.At = now()
	}
	row := auditRow{At: utc(e.At), UserID: e.UserID, Username: e.Username, Address: e.Address, Action: e.Action,
		ObjectType: e.ObjectType, ObjectID: e.ObjectID, Diff: string(e.Diff)}
	q := s.db.NewInsert().Model(&row).Column("at", "user_id", "username", "address", "action", "object_type", "object_id", "diff")
	if s.dialect != schema.MySQL {
		q = q.Returning("id")
	}
	res, err := q.Exec(ctx)
	if err != nil {
		return wrap(err, "insert audit entry %s", e.Action)
	}
	if row.ID == 0 {
		if row.ID, err = res.LastInsertId(); err != nil {
			return wrap(err, "id of audit entry %s", e.Action)
		}
	}
	e.ID = row.ID
	return nil
}

// FindAudit returns a page of the entries f selects, newest first, and the total.
func (s *Store) FindAudit(ctx context.Context, f AuditFilter, p Page) ([]AuditEntry, int, error) {
	filter := func(q *bun.SelectQuery) *bun.SelectQuery {
		if f.Username != "" {
			q = q.Where("a.username = ?", f.Username)
		}
		if f.ObjectType != "" {
			q = q.Where("a.object_type = ?", f.ObjectType)
		}
		if f.ObjectID != "" {
			q = q.Where("a.object_id = ?", f.ObjectID)
		}
		if !f.From.IsZero() {
			q = q.Where("a.at >= ?", utc(f.From))
		}
		if !f.To.IsZero() {
			q = q.Where("a.at < ?", utc(f.To))
		}
		return q
	}
	total, err := filter(s.db.NewSelect().Model((*auditRow)(nil))).Count(ctx)
	if err != nil {
		return nil, 0, wrap(err, "count audit entries")
	}
	var rows []auditRow
	if err := paginate(filter(s.db.NewSelect().Model(&rows)).Order("a.at DESC", "a.id DESC"), p).Scan(ctx); err != nil {
		return nil, 0, wrap(err, "list audit entries")
	}
	out := make([]AuditEntry, len(rows))
	for i, r := range rows {
		out[i] = AuditEntry{ID: r.ID, At: r.At.UTC(), UserID: r.UserID, Username: r.Username, Address: r.Address,
			Action: r.Action, ObjectType: r.ObjectType, ObjectID: r.ObjectID}
		if r.Diff != "" {
			out[i].Diff = json.RawMessage(r.Diff)
		}
	}
	return out, int(total), nil
}

// scopeWhere restricts q to the ids in sc (column col); nil sc is no limit.
func scopeWhere(q *bun.SelectQuery, col string, sc *Scope) *bun.SelectQuery {
	if sc == nil {
		return q
	}
	if len(sc.GroupIDs) == 0 {
		return q.Where("1 = 0")
	}
	return q.Where(col+" IN (?)", bun.List(sc.GroupIDs))
}

// scopeJobsWhere restricts q (jobs aliased j) to the jobs of sc's groups.
func scopeJobsWhere(q *bun.SelectQuery, sc *Scope) *bun.SelectQuery {
	if sc == nil {
		return q
	}
	if len(sc.GroupIDs) == 0 {
		return q.Where("1 = 0")
	}
	return q.Where("j.group_name IN (SELECT sg.appname FROM job_groups AS sg WHERE sg.id IN (?))", bun.List(sc.GroupIDs))
}

// scopeRunsWhere restricts q (runs aliased r) to the runs of jobs of sc's groups.
func scopeRunsWhere(q *bun.SelectQuery, sc *Scope) *bun.SelectQuery {
	if sc == nil {
		return q
	}
	if len(sc.GroupIDs) == 0 {
		return q.Where("1 = 0")
	}
	return q.Where("r.job_id IN (SELECT sj.id FROM jobs AS sj JOIN job_groups AS sg ON sg.appname = sj.group_name WHERE sg.id IN (?))",
		bun.List(sc.GroupIDs))
}
