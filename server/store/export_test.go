package store

import "context"

// AppliedMigrations lists the versions in the bookkeeping table (tests only).
func (s *Store) AppliedMigrations(ctx context.Context) ([]int64, error) {
	var versions []int64
	err := s.db.NewSelect().TableExpr(migrationsTable).Column("version").Order("version ASC").Scan(ctx, &versions)
	return versions, err
}

// ExplainTerminalRunKeys is SQLite's query plan of TerminalRunKeysSince
// (tests only).
func (s *Store) ExplainTerminalRunKeys(ctx context.Context) ([]string, error) {
	return s.explain(ctx, terminalSince(s.db.NewSelect().TableExpr(s.scanTable()).Column("r.id", "r.updated_at"),
		now(), 7, now(), 500).String())
}

// ExplainTerminalRunHeads is SQLite's query plan of TerminalRunHeads
// (tests only).
func (s *Store) ExplainTerminalRunHeads(ctx context.Context) ([]string, error) {
	var rows []runRow
	return s.explain(ctx, s.terminalRunHeads(&rows, []int64{3, 1, 2}).String())
}

// explain is SQLite's query plan of a statement.
func (s *Store) explain(ctx context.Context, query string) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			return nil, err
		}
		plan = append(plan, detail)
	}
	return plan, rows.Err()
}

// ForgetMigration deletes a version from the bookkeeping table, as if the
// process applying it had crashed before recording it (tests only).
func (s *Store) ForgetMigration(ctx context.Context, version int64) error {
	_, err := s.db.NewDelete().TableExpr(migrationsTable).Where("version = ?", version).Exec(ctx)
	return err
}
