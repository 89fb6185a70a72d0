package store

import "context"

// AppliedMigrations lists the versions in the bookkeeping table (tests only).
func (s *Store) AppliedMigrations(ctx context.Context) ([]int64, error) {
	var versions []int64
	err := s.db.NewSelect().TableExpr(migrationsTable).Column("version").Order("version ASC").Scan(ctx, &versions)
	return versions, err
}
