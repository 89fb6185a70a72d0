package store

import (
	"context"
	"time"

	"github.com/uptrace/bun"

	"github.com/cronix/cronix/cluster"
)

// SecurityEvent is a stored security event: a record a node refused to act
// on, or a result a server refused (see cluster.SecurityEvent).
type SecurityEvent struct {
	ID int64
	// At is when the node (or server) refused it.
	At time.Time
	// Node is the reporting (or offending) node's uuid.
	Node string
	// Kind is the refusal kind (unsigned_record, bad_signature, stale_term,
	// malformed_record, foreign_result).
	Kind string
	// Key is the refused record's etcd key, or the fire id of a refused result.
	Key string
	// Reason says why.
	Reason    string
	CreatedAt time.Time
}

type securityEventRow struct {
	bun.BaseModel `bun:"table:security_events,alias:se"`

	ID        int64     `bun:"id,pk,autoincrement"`
	At        time.Time `bun:"at,notnull"`
	Node      string    `bun:"node,notnull"`
	Kind      string    `bun:"kind,notnull"`
	RecordKey string    `bun:"record_key,notnull"`
	Reason    string    `bun:"reason,notnull"`
	CreatedAt time.Time `bun:"created_at,notnull"`
}

// maxSecurityText bounds the stored key and reason.
const maxSecurityText = 2048

func clip(s string) string {
	if len(s) > maxSecurityText {
		return s[:maxSecurityText]
	}
	return s
}

// InsertSecurityEvents stores events reported by (or about) node.
func (s *Store) InsertSecurityEvents(ctx context.Context, node string, events []cluster.SecurityEvent) error {
	if len(events) == 0 {
		return nil
	}
	t := now()
	rows := make([]securityEventRow, len(events))
	for i, e := range events {
		at := e.At
		if at.IsZero() {
			at = t
		}
		rows[i] = securityEventRow{At: utc(at), Node: clip(node), Kind: clip(e.Kind), RecordKey: clip(e.Key),
			Reason: clip(e.Reason), CreatedAt: t}
	}
	if _, err := s.db.NewInsert().Model(&rows).Exec(ctx); err != nil {
		return wrap(err, "insert %d security events", len(rows))
	}
	return nil
}

// ListSecurityEvents returns a page of security events, newest first, and
// how many there are.
func (s *Store) ListSecurityEvents(ctx context.Context, p Page) ([]SecurityEvent, int, error) {
	total, err := s.db.NewSelect().Model((*securityEventRow)(nil)).Count(ctx)
	if err != nil {
		return nil, 0, wrap(err, "count security events")
	}
	var rows []securityEventRow
	q := s.db.NewSelect().Model(&rows).Order("se.at DESC", "se.id DESC")
	if err := paginate(q, p).Scan(ctx); err != nil {
		return nil, 0, wrap(err, "list security events")
	}
	out := make([]SecurityEvent, len(rows))
	for i, r := range rows {
		out[i] = SecurityEvent{ID: r.ID, At: r.At.UTC(), Node: r.Node, Kind: r.Kind, Key: r.RecordKey,
			Reason: r.Reason, CreatedAt: r.CreatedAt.UTC()}
	}
	return out, int(total), nil
}

// RunNodes returns the node each of the given fires was dispatched to
// ("" for a run with no node); fires without a run are absent. It reads
// rows just written, on the writer connection of a SQLite file (onWriter).
func (s *Store) RunNodes(ctx context.Context, fireIDs []string) (map[string]string, error) {
	out := make(map[string]string, len(fireIDs))
	for _, b := range s.fireIDBatches("", fireIDs, 500) {
		var rows []struct {
			FireID string `bun:"fire_id"`
			Node   string `bun:"node"`
		}
		if err := s.onWriter(ctx, func(db bun.IDB) error {
			return db.NewSelect().Table("runs").Column("fire_id", "node").Where(b.where, b.args...).Scan(ctx, &rows)
		}); err != nil {
			return nil, wrap(err, "read the nodes of %d runs", len(b.ids))
		}
		for _, r := range rows {
			out[r.FireID] = r.Node
		}
	}
	return out, nil
}
