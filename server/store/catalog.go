package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/uptrace/bun"

	schema "github.com/cronix/cronix/sql"
)

// CatalogHandler is one entry of the handler catalog: a handler some node
// has published (or a built-in), as last seen.
type CatalogHandler struct {
	Name         string
	Version      string
	Description  string
	ParamsSchema json.RawMessage // nil when the handler published none
	UpdatedAt    time.Time
}

type catalogRow struct {
	bun.BaseModel `bun:"table:handler_catalog,alias:hc"`

	Name         string    `bun:"name,pk"`
	Version      string    `bun:"version,notnull"`
	Description  string    `bun:"description,notnull"`
	ParamsSchema string    `bun:"params_schema,notnull"`
	UpdatedAt    time.Time `bun:"updated_at,notnull"`
}

// HandlerCatalog returns the catalog sorted by name.
func (s *Store) HandlerCatalog(ctx context.Context) ([]CatalogHandler, error) {
	var rows []catalogRow
	if err := s.db.NewSelect().Model(&rows).Order("name ASC").Scan(ctx); err != nil {
		return nil, wrap(err, "read the handler catalog")
	}
	out := make([]CatalogHandler, 0, len(rows))
	for _, r := range rows {
		h := CatalogHandler{Name: r.Name, Version: r.Version, Description: r.Description, UpdatedAt: r.UpdatedAt.UTC()}
		if r.ParamsSchema != "" {
			h.ParamsSchema = json.RawMessage(r.ParamsSchema)
		}
		out = append(out, h)
	}
	return out, nil
}

// UpsertHandlerCatalog writes hs into the catalog, replacing the entries of
// the same names (UpdatedAt is set to now).
func (s *Store) UpsertHandlerCatalog(ctx context.Context, hs []CatalogHandler) error {
	if len(hs) == 0 {
		return nil
	}
	t := now()
	rows := make([]catalogRow, 0, len(hs))
	for _, h := range hs {
		rows = append(rows, catalogRow{Name: h.Name, Version: h.Version, Description: h.Description,
			ParamsSchema: string(h.ParamsSchema), UpdatedAt: t})
	}
	q := s.db.NewInsert().Model(&rows)
	if s.dialect == schema.MySQL {
		q = q.On("DUPLICATE KEY UPDATE").
			Set("version = VALUES(version)").Set("description = VALUES(description)").
			Set("params_schema = VALUES(params_schema)").Set("updated_at = VALUES(updated_at)")
	} else {
		q = q.On("CONFLICT (name) DO UPDATE").
			Set("version = EXCLUDED.version").Set("description = EXCLUDED.description").
			Set("params_schema = EXCLUDED.params_schema").Set("updated_at = EXCLUDED.updated_at")
	}
	if _, err := q.Exec(ctx); err != nil {
		return wrap(err, "update the handler catalog")
	}
	return nil
}
