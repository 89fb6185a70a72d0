// Package store is Cronix's SQL record (bun): users, API tokens, groups,
// jobs and runs, on SQLite, PostgreSQL and MySQL/MariaDB. Schema migrations
// live in the top-level sql/ directory and are applied by Open.
//
// # DSNs
//
//	sqlite:///abs/path/cronix.db   SQLite file (also sqlite://rel/path.db,
//	                               sqlite:path.db, file:path.db or a bare path;
//	                               ":memory:" for a throwaway database)
//	postgres://user:pass@host:5432/db?sslmode=disable[&search_path=schema]
//	mysql://user:pass@tcp(host:3306)/db?parseTime=true
//
// A SQLite DSN may carry modernc.org/sqlite parameters after "?"; the store
// adds _pragma=busy_timeout(5000), _pragma=journal_mode(WAL),
// _pragma=foreign_keys(1), _pragma=temp_store(MEMORY) unless the DSN sets
// them, and _txlock=immediate so that a writing transaction takes SQLite's
// lock before it reads. The writers of one process queue for that lock in
// arrival order on the store's write gate (sqlitegate.go): a write
// transaction holds it from BEGIN to its end, a write outside one for its
// statement; reads on the pool never wait for it. The store's transactions on a SQLite
// file all run on one connection of their own, taken after the gate:
// SQLite drops a connection's page cache when another one wrote since its
// last transaction, so transactions that took turns on the pool read
// every page they touched from the file again. For the same reason the
// reads of rows just written that the fire path makes every second (a
// result batch's nodes, RunNodes; the alert scanner's run heads,
// TerminalRunHeads; the child jobs of finished runs, ChildJobIDs) take the
// gate and run on that connection too: on the pool, after a second of
// writes, half of their time was reading pages again. SQLite's own busy handler polls and
// is not fair, and under a steady stream of writers one of them lost every
// poll for busy_timeout and failed with SQLITE_BUSY. busy_timeout still
// applies between processes sharing a file. A PostgreSQL DSN is pgdriver's: unknown query
// parameters (search_path, application_name, ...) are sent as session
// parameters. A MySQL DSN is go-sql-driver's after "mysql://"; parseTime
// and loc=UTC are forced, and unless the DSN sets sql_mode the session
// drops NO_BACKSLASH_ESCAPES (bun escapes backslashes).
//
// # Time
//
// Every time is stored in UTC with microsecond precision and returned in
// UTC.
//
// # Runs
//
// Runs are unique by fire id. On SQLite the unique index is on
// (fire_key, fire_id), fire_key being the fire id after its first '-' (the
// scheduled unix ms): it orders a tick's fires after the previous tick's,
// so a tick's inserts write the index's last pages instead of a page per
// job (SQLite's WAL writes every page a commit touched). Every read by fire
// id names both columns (firekey.go); PostgreSQL and MySQL keep a unique
// index on fire_id alone. InsertRuns and ApplyResults are batched: one
// multi-row statement per chunk of at most 1,000 rows and about 4 MiB
// (below MySQL's max_allowed_packet), all chunks of a call in one
// transaction, rows sorted by fire id so that concurrent overlapping
// batches lock in the same order. On a SQLite file a chunk runs as a
// statement with placeholders, prepared once and kept, its values bound
// (prepared.go): bun writes the values into a statement's text, which
// SQLite then parsed and compiled for every batch. A column with one value
// in every row is bound once, the others per row, so a tick's insert of up
// to 16,374 runs fits SQLite's 32,766 values; a chunk that does not fit
// takes bun's statement. Statuses only move forward: triggered,
// then running, then a terminal status (cluster.Terminal), which is final.
// Output is cut to MaxOutputBytes; NUL bytes and invalid UTF-8 become
// U+FFFD.
//
// # Tests
//
// The conformance suite (runSuite in suite_test.go) runs against SQLite in
// a temporary directory always, against PostgreSQL when
// CRONIX_TEST_POSTGRES_DSN is set (e.g.
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable) and against
// MySQL/MariaDB when CRONIX_TEST_MYSQL_DSN is set (e.g.
// mysql://root@tcp(127.0.0.1:3306)/test?parseTime=true). Each test creates
// its own schema (PostgreSQL) or database (MySQL) named cronix_t_<random>
// and drops it afterwards, so the DSN's user needs CREATE/DROP rights.
package store
