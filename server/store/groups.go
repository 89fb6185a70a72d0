package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/uptrace/bun"

	schema "github.com/cronix/cronix/sql"
)

// EnsureGroup creates the group (address type auto) if no group has this
// appname; it returns the stored group.
func (s *Store) EnsureGroup(ctx context.Context, appName, title string) (*Group, error) {
	if err := s.insertGroupIfMissing(ctx, s.db, appName, title, now()); err != nil {
		return nil, wrap(err, "ensure group %q", appName)
	}
	return s.GroupByName(ctx, appName)
}

// insertGroupIfMissing inserts group appName (address type auto) on db
// unless a group has this appname already.
func (s *Store) insertGroupIfMissing(ctx context.Context, db bun.IDB, appName, title string, t time.Time) error {
	row := groupRow{AppName: appName, Title: title, AddressType: AddressAuto, CreatedAt: t, UpdatedAt: t}
	q := db.NewInsert().Model(&row).Column("appname", "title", "address_type", "addresses", "created_at", "updated_at")
	if s.dialect == schema.MySQL {
		q = q.On("DUPLICATE KEY UPDATE").Set("id = id")
	} else {
		q = q.On("CONFLICT (appname) DO NOTHING")
	}
	_, err := q.Exec(ctx)
	return err
}

// ensureJobGroups creates in tx, as EnsureGroup does (titled by their
// appname), the groups that jobs name and that do not exist yet, in
// appname order (so that concurrent transactions take their locks in one
// order).
func (s *Store) ensureJobGroups(ctx context.Context, tx bun.Tx, jobs []*Job, t time.Time) error {
	names := make([]string, 0, len(jobs))
	for _, j := range jobs {
		names = append(names, j.Group)
	}
	slices.Sort(names)
	for _, name := range slices.Compact(names) {
		if err := s.insertGroupIfMissing(ctx, tx, name, name, t); err != nil {
			return wrap(err, "ensure group %q", name)
		}
	}
	return nil
}

// CreateGroup inserts g (sets ID, CreatedAt, UpdatedAt; an empty
// AddressType is stored and written back as AddressAuto). ErrConflict if the
// appname exists.
func (s *Store) CreateGroup(ctx context.Context, g *Group) error {
	t := now()
	row := groupRowOf(g)
	row.CreatedAt, row.UpdatedAt = t, t
	q := s.db.NewInsert().Model(&row).Column("appname", "title", "address_type", "addresses", "created_at", "updated_at")
	if s.dialect != schema.MySQL {
		q = q.Returning("id")
	}
	if _, err := q.Exec(ctx); err != nil {
		return wrap(err, "create group %q", g.AppName)
	}
	g.ID, g.AddressType, g.CreatedAt, g.UpdatedAt = row.ID, row.AddressType, t, t
	return nil
}

// GetGroup returns the group or ErrNotFound.
func (s *Store) GetGroup(ctx context.Context, id int64) (*Group, error) {
	var row groupRow
	if err := s.db.NewSelect().Model(&row).Where("g.id = ?", id).Limit(1).Scan(ctx); err != nil {
		return nil, wrap(err, "group %d", id)
	}
	g := row.domain()
	return &g, nil
}

// GroupByName returns the group with this appname or ErrNotFound.
func (s *Store) GroupByName(ctx context.Context, appName string) (*Group, error) {
	var row groupRow
	if err := s.db.NewSelect().Model(&row).Where("g.appname = ?", appName).Limit(1).Scan(ctx); err != nil {
		return nil, wrap(err, "group %q", appName)
	}
	g := row.domain()
	return &g, nil
}

// UpdateGroup overwrites the group's appname, title, address type and
// addresses (UpdatedAt and CreatedAt are written back into g). ErrNotFound if
// absent; ErrConflict if the new appname is taken, or if the appname changes
// while jobs use the group (jobs name their group by appname).
func (s *Store) UpdateGroup(ctx context.Context, g *Group) error {
	t := now()
	row := groupRowOf(g)
	row.UpdatedAt = t
	var stored groupRow
	err := s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var old groupRow
		if err := s.lockRow(tx.NewSelect().Model(&old).Where("g.id = ?", g.ID).Limit(1)).Scan(ctx); err != nil {
			return err
		}
		if old.AppName != row.AppName {
			n, err := tx.NewSelect().Model((*jobRow)(nil)).Where("j.group_name = ?", old.AppName).Count(ctx)
			if err != nil {
				return err
			}
			if n > 0 {
				return fmt.Errorf("%w: %d jobs use appname %q", ErrConflict, n, old.AppName)
			}
		}
		if _, err := tx.NewUpdate().Model(&row).
			Column("appname", "title", "address_type", "addresses", "updated_at").
			Where("id = ?", g.ID).Exec(ctx); err != nil {
			return err
		}
		stored = old
		return nil
	})
	if err != nil {
		return wrap(err, "update group %d", g.ID)
	}
	g.AddressType, g.CreatedAt, g.UpdatedAt = row.AddressType, stored.CreatedAt.UTC(), t
	return nil
}

// DeleteGroup deletes the group and the grants of it to users. ErrNotFound if absent, ErrConflict while
// jobs use it.
func (s *Store) DeleteGroup(ctx context.Context, id int64) error {
	err := s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var old groupRow
		if err := s.lockRow(tx.NewSelect().Model(&old).Where("g.id = ?", id).Limit(1)).Scan(ctx); err != nil {
			return err
		}
		n, err := tx.NewSelect().Model((*jobRow)(nil)).Where("j.group_name = ?", old.AppName).Count(ctx)
		if err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("%w: %d jobs use group %q", ErrConflict, n, old.AppName)
		}
		if _, err := tx.NewDelete().TableExpr("user_groups").Where("group_id = ?", id).Exec(ctx); err != nil {
			return err
		}
		_, err = tx.NewDelete().TableExpr("job_groups").Where("id = ?", id).Exec(ctx)
		return err
	})
	return wrap(err, "delete group %d", id)
}

// ListGroups returns every group ordered by appname.
func (s *Store) ListGroups(ctx context.Context) ([]Group, error) {
	groups, _, err := s.FindGroups(ctx, GroupFilter{}, Page{})
	return groups, err
}

// FindGroups returns a page of the groups f selects, ordered by appname, and
// how many it selects in all.
func (s *Store) FindGroups(ctx context.Context, f GroupFilter, p Page) ([]Group, int, error) {
	filter := func(q *bun.SelectQuery) *bun.SelectQuery {
		q = scopeWhere(q, "g.id", f.Scope)
		if f.AppName != "" {
			q = q.Where("LOWER(g.appname) LIKE ? ESCAPE '!'", containsPattern(f.AppName))
		}
		if f.Title != "" {
			q = q.Where("LOWER(g.title) LIKE ? ESCAPE '!'", containsPattern(f.Title))
		}
		return q
	}
	total, err := filter(s.db.NewSelect().Model((*groupRow)(nil))).Count(ctx)
	if err != nil {
		return nil, 0, wrap(err, "count groups")
	}
	var rows []groupRow
	q := paginate(filter(s.db.NewSelect().Model(&rows)).Order("g.appname ASC"), p)
	if err := q.Scan(ctx); err != nil {
		return nil, 0, wrap(err, "list groups")
	}
	out := make([]Group, len(rows))
	for i := range rows {
		out[i] = rows[i].domain()
	}
	return out, int(total), nil
}

// lockRow makes q lock the rows it reads until the transaction ends
// (SELECT ... FOR UPDATE); SQLite transactions hold the database write lock
// already and have no FOR UPDATE.
func (s *Store) lockRow(q *bun.SelectQuery) *bun.SelectQuery {
	if s.dialect == schema.SQLite {
		return q
	}
	return q.For("UPDATE")
}
