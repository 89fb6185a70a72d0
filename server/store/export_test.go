package store

import (
	"context"

	schema "github.com/cronix/cronix/sql"
)

// AppliedMigrations lists the versions in the bookkeeping table (tests only).
func (s *Store) AppliedMigrations(ctx context.Context) ([]int64, error) {
	var versions []int64
	err := s.db.NewSelect().TableExpr(migrationsTable).Column("version").Order("version ASC").Scan(ctx, &versions)
	return versions, err
}

// ExplainTerminalRunKeys is SQLite's query plan of TerminalRunKeysSince
// (tests only).
func (s *Store) ExplainTerminalRunKeys(ctx context.Context) ([]string, error) {
	return s.explain(ctx, terminalSince(s.scanSelect("r.id", "r.updated_at"), now(), 7, now(), 500).String())
}

// ExplainTerminalRunIDs is SQLite's query plan of TerminalRunIDsThrough
// (tests only).
func (s *Store) ExplainTerminalRunIDs(ctx context.Context) ([]string, error) {
	return s.explain(ctx, terminalThrough(s.scanSelect("r.id"), now(), now(), 7).String())
}

// ExplainTerminalRunHeads is SQLite's query plan of TerminalRunHeads
// (tests only).
func (s *Store) ExplainTerminalRunHeads(ctx context.Context) ([]string, error) {
	var rows []runRow
	return s.explain(ctx, s.terminalRunHeads(s.db, &rows, []int64{3, 1, 2}).String())
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

// OpenAtVersion opens dsn and applies the migrations up to version only,
// as a binary of that schema would have left the database (tests only;
// SQLite and PostgreSQL).
func OpenAtVersion(ctx context.Context, dsn string, version int64) (*Store, error) {
	odb, err := openDB(ctx, dsn)
	if err != nil {
		return nil, err
	}
	s := newStore(odb)
	migs, err := schema.Load(s.dialect)
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	var upTo []schema.Migration
	for _, m := range migs {
		if m.Version <= version {
			upTo = append(upTo, m)
		}
	}
	if err := s.migrateTx(ctx, upTo); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// ExplainRunsByFireIDs is SQLite's query plan of the reads by fire id:
// RunByFireID's and one RunsByFireIDs statement of ids (tests only).
func (s *Store) ExplainRunsByFireIDs(ctx context.Context, ids []string) (one, many []string, err error) {
	var row runRow
	cond, args := s.fireIDEquals("r.", ids[0])
	if one, err = s.explain(ctx, s.db.NewSelect().Model(&row).Where(cond, args...).String()); err != nil {
		return nil, nil, err
	}
	var rows []runRow
	b := s.fireIDBatches("r.", ids, maxIDsPerStatement)[0]
	many, err = s.explain(ctx, s.db.NewSelect().Model(&rows).Where(b.where, b.args...).String())
	return one, many, err
}

// FireIDChunks lists the fire ids of each of fireIDBatches' batches (tests
// only).
func (s *Store) FireIDChunks(ids []string, maxIDs int) [][]string {
	var chunks [][]string
	for _, b := range s.fireIDBatches("", ids, maxIDs) {
		chunks = append(chunks, b.ids)
	}
	return chunks
}

// SetAnchorEvery sets how many jobs apart the jobs list's kept page
// anchors are (tests only; before the store is used).
func (s *Store) SetAnchorEvery(n int) { s.jobList.every = n }
