package store

import "context"

// ExecRaw runs a statement on the database (tests only: to take a database
// back to an earlier schema state).
func (s *Store) ExecRaw(ctx context.Context, query string, args ...any) error {
	_, err := s.db.ExecContext(ctx, query, args...)
	return err
}
