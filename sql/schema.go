// Package schema holds Cronix's SQL schema migrations, one directory per
// dialect (sqlite/, postgres/, mysql/), embedded in the binary.
//
// A migration is a file named "<version>_<name>.up.sql", for example
// "0001_init.up.sql": version is a positive integer, applied in ascending
// order and recorded by version in a bookkeeping table by the runner in
// server/store. Files hold plain SQL statements, each ending with ";" at the
// end of a line; lines starting with "--" are comments. Migrations are only
// ever added, never edited once released, and must be written so that
// re-running a partially applied one is harmless (IF NOT EXISTS), because
// MySQL cannot roll back DDL.
package schema

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

// Dialect names, as reported by store.Store.Dialect.
const (
	SQLite   = "sqlite"
	Postgres = "postgres"
	MySQL    = "mysql"
)

//go:embed sqlite/*.sql postgres/*.sql mysql/*.sql
var files embed.FS

// Migration is one parsed migration file.
type Migration struct {
	// Version orders migrations and identifies them in the bookkeeping table.
	Version int64
	// Name is the file name, e.g. "0001_init.up.sql".
	Name string
	// Statements are the file's SQL statements, without trailing ";".
	Statements []string
}

// Migrations returns the migration files of a dialect ("sqlite",
// "postgres" or "mysql") as a file system rooted at the dialect directory.
func Migrations(dialect string) (fs.FS, error) {
	switch dialect {
	case SQLite, Postgres, MySQL:
	default:
		return nil, fmt.Errorf("schema: unknown dialect %q", dialect)
	}
	sub, err := fs.Sub(files, dialect)
	if err != nil {
		return nil, fmt.Errorf("schema: open %s migrations: %w", dialect, err)
	}
	return sub, nil
}

// Load returns the parsed migrations of a dialect in ascending version order.
func Load(dialect string) ([]Migration, error) {
	fsys, err := Migrations(dialect)
	if err != nil {
		return nil, err
	}
	names, err := fs.Glob(fsys, "*.up.sql")
	if err != nil {
		return nil, fmt.Errorf("schema: list %s migrations: %w", dialect, err)
	}
	migs := make([]Migration, 0, len(names))
	seen := make(map[int64]string, len(names))
	for _, name := range names {
		version, err := parseVersion(name)
		if err != nil {
			return nil, err
		}
		if prev, dup := seen[version]; dup {
			return nil, fmt.Errorf("schema: %s migrations %s and %s share version %d", dialect, prev, name, version)
		}
		seen[version] = name
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("schema: read %s/%s: %w", dialect, name, err)
		}
		stmts := SplitStatements(string(body))
		if len(stmts) == 0 {
			return nil, fmt.Errorf("schema: %s/%s holds no statement", dialect, name)
		}
		migs = append(migs, Migration{Version: version, Name: name, Statements: stmts})
	}
	sort.Slice(migs, func(i, j int) bool { return migs[i].Version < migs[j].Version })
	return migs, nil
}

// parseVersion reads the leading digits of a migration file name.
func parseVersion(name string) (int64, error) {
	i := strings.IndexByte(name, '_')
	if i <= 0 {
		return 0, fmt.Errorf("schema: migration %q is not named <version>_<name>.up.sql", name)
	}
	v, err := strconv.ParseInt(name[:i], 10, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("schema: migration %q has no positive version", name)
	}
	return v, nil
}

// SplitStatements splits a migration file into statements: a statement ends
// with a line whose last non-blank character is ";". Lines whose first
// non-blank characters are "--" are dropped. It does not parse SQL, so a
// migration must not end a line with ";" inside a string literal.
func SplitStatements(body string) []string {
	var (
		stmts []string
		cur   strings.Builder
	)
	flush := func() {
		s := strings.TrimSpace(cur.String())
		s = strings.TrimSpace(strings.TrimSuffix(s, ";"))
		if s != "" {
			stmts = append(stmts, s)
		}
		cur.Reset()
	}
	for _, line := range strings.Split(body, "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "--") {
			continue
		}
		cur.WriteString(strings.TrimRight(line, " \t\r"))
		cur.WriteByte('\n')
		if strings.HasSuffix(trimmed, ";") {
			flush()
		}
	}
	flush()
	return stmts
}
