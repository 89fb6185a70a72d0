package store

import (
	"sort"
	"strings"

	"github.com/uptrace/bun"

	schema "github.com/cronix/cronix/sql"
)

// On SQLite the runs' unique fire id index is on (fire_key, fire_id), where
// fire_key is a virtual column: the fire id after its first '-' (migration
// 0012 says why). SQLite uses that index only when a lookup names fire_key
// too, so every read or write of runs by fire id goes through the helpers
// here; on PostgreSQL and MySQL they name fire_id alone.

// fireKey is SQLite's runs.fire_key of a fire id:
// substr(fire_id, instr(fire_id, '-') + 1). The first '-' byte is the first
// '-' character in UTF-8, so the suffix is the same string either way.
func fireKey(fireID string) string {
	return fireID[strings.IndexByte(fireID, '-')+1:]
}

// maxFireKeysPerStatement bounds the fire_key groups of one statement's
// condition: each is a term of an OR that SQLite's parser nests one level
// deeper (its expression depth limit is 1000).
const maxFireKeysPerStatement = 100

// fireConflict is the ON CONFLICT clause of an upsert by fire id
// (PostgreSQL, SQLite), with action ("DO NOTHING", "DO UPDATE").
func (s *Store) fireConflict(action string) string {
	if s.dialect == schema.SQLite {
		return "CONFLICT (fire_key, fire_id) " + action
	}
	return "CONFLICT (fire_id) " + action
}

// fireIDEquals is the condition and arguments of a lookup of one fire id,
// with the table alias (e.g. "r.", or "").
func (s *Store) fireIDEquals(alias, fireID string) (string, []any) {
	if s.dialect == schema.SQLite {
		return alias + "fire_key = ? AND " + alias + "fire_id = ?", []any{fireKey(fireID), fireID}
	}
	return alias + "fire_id = ?", []any{fireID}
}

// fireIDChunks splits unique fire ids into the groups one statement's
// fireIDsIn condition may list: at most maxIDs ids and, on SQLite, at most
// maxFireKeysPerStatement distinct fire keys. The ids come back sorted (by
// fire key first on SQLite).
func (s *Store) fireIDChunks(ids []string, maxIDs int) [][]string {
	ids = uniqueSorted(ids)
	if s.dialect == schema.SQLite {
		sort.SliceStable(ids, func(i, j int) bool { return fireKey(ids[i]) < fireKey(ids[j]) })
	}
	var chunks [][]string
	start, keys := 0, 0
	for i, id := range ids {
		newKey := i == start || fireKey(id) != fireKey(ids[i-1])
		if i > start && (i-start == maxIDs || (s.dialect == schema.SQLite && newKey && keys == maxFireKeysPerStatement)) {
			chunks = append(chunks, ids[start:i])
			start, keys, newKey = i, 0, true
		}
		if newKey {
			keys++
		}
	}
	if start < len(ids) {
		chunks = append(chunks, ids[start:])
	}
	return chunks
}

// fireIDsIn is the condition and arguments matching the runs whose fire id
// is one of a chunk from fireIDChunks, with the table alias. On SQLite it is
// one term per fire key, "(fire_key = ? AND fire_id IN (…)) OR …", which
// SQLite answers with one index search per fire id.
func (s *Store) fireIDsIn(alias string, chunk []string) (string, []any) {
	if s.dialect != schema.SQLite {
		return alias + "fire_id IN (?)", []any{bun.List(chunk)}
	}
	var b strings.Builder
	var args []any
	b.WriteByte('(')
	for start := 0; start < len(chunk); {
		key := fireKey(chunk[start])
		end := start + 1
		for end < len(chunk) && fireKey(chunk[end]) == key {
			end++
		}
		if start > 0 {
			b.WriteString(" OR ")
		}
		b.WriteString("(" + alias + "fire_key = ? AND " + alias + "fire_id IN (?))")
		args = append(args, key, bun.List(chunk[start:end]))
		start = end
	}
	b.WriteByte(')')
	return b.String(), args
}
