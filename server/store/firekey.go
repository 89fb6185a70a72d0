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

// fireIDBatch is one statement's share of a lookup by fire ids: the ids
// and the condition (with its arguments) that matches exactly them.
type fireIDBatch struct {
	ids   []string
	where string
	args  []any
}

// fireIDBatches splits fire ids (duplicates dropped) into the batches of
// one statement each, with the table alias (e.g. "r.", or ""): at most
// maxIDs ids and, on SQLite, at most maxFireKeysPerStatement fire keys,
// each its own term, "(fire_key = ? AND fire_id IN (…)) OR …", which SQLite
// answers with one index search per fire id.
func (s *Store) fireIDBatches(alias string, fireIDs []string, maxIDs int) []fireIDBatch {
	ids := uniqueSorted(fireIDs)
	var batches []fireIDBatch
	if s.dialect != schema.SQLite {
		for start := 0; start < len(ids); start += maxIDs {
			chunk := ids[start:min(start+maxIDs, len(ids))]
			batches = append(batches, fireIDBatch{ids: chunk, where: alias + "fire_id IN (?)", args: []any{bun.List(chunk)}})
		}
		return batches
	}
	sort.SliceStable(ids, func(i, j int) bool { return fireKey(ids[i]) < fireKey(ids[j]) })
	var (
		terms []string
		args  []any
		first int // ids[first:] are not in a batch yet
	)
	for i := 0; i < len(ids); {
		key := fireKey(ids[i])
		j := i + 1
		for j < len(ids) && j-first < maxIDs && fireKey(ids[j]) == key {
			j++
		}
		terms = append(terms, "("+alias+"fire_key = ? AND "+alias+"fire_id IN (?))")
		args = append(args, key, bun.List(ids[i:j]))
		i = j
		if i == len(ids) || i-first == maxIDs || len(terms) == maxFireKeysPerStatement {
			batches = append(batches, fireIDBatch{ids: ids[first:i], where: "(" + strings.Join(terms, " OR ") + ")", args: args})
			terms, args, first = nil, nil, i
		}
	}
	return batches
}
