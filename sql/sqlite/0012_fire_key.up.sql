-- Cronix schema v12 (SQLite): the runs' fire id index in time order.
--
-- A fire id is "<job_id>-<scheduled unix ms>", so an index on fire_id keeps
-- each job's runs together: every second, each job firing adds its entry
-- on a page of its own, and SQLite's WAL writes every page a commit
-- touched. With a few thousand jobs firing every second that is a few
-- thousand pages (4 KiB each) per commit for this index alone, growing as
-- the runs table grows until each job's runs fill pages of their own.
--
-- fire_key is the fire id after its first '-' (the scheduled unix ms, with
-- "-s<shard>" for a shard, or "m<revision>" for a manual fire): a virtual
-- column, computed, not stored. The unique index on (fire_key, fire_id)
-- holds the same uniqueness as one on fire_id (fire_key is a function of
-- fire_id) but orders a second's fires together after the previous
-- second's, so a tick's inserts land on the index's last pages. Every
-- lookup by fire id names both columns (server/store: fireKey).
--
-- SQLite cannot drop a table constraint, so the table is rebuilt (its
-- documented twelve-step way: new table, copy, drop, rename) with every
-- index and the AUTOINCREMENT counter, so run ids are never reused.
-- PostgreSQL and MySQL keep UNIQUE (fire_id): they log row changes, not
-- whole pages per commit.

CREATE TABLE runs_v12 (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    fire_id          VARCHAR(128) NOT NULL,
    job_id           INTEGER      NOT NULL,
    "trigger"        VARCHAR(32)  NOT NULL DEFAULT 'schedule',
    status           VARCHAR(32)  NOT NULL,
    node             VARCHAR(128) NOT NULL DEFAULT '',
    scheduled_at     TIMESTAMP    NOT NULL,
    dispatched_at    TIMESTAMP    NULL,
    started_at       TIMESTAMP    NULL,
    finished_at      TIMESTAMP    NULL,
    exit_code        INTEGER      NULL,
    output           TEXT         NOT NULL DEFAULT '',
    output_truncated BOOLEAN      NOT NULL DEFAULT FALSE,
    message          TEXT         NOT NULL DEFAULT '',
    created_at       TIMESTAMP    NOT NULL,
    updated_at       TIMESTAMP    NOT NULL,
    attempt          INTEGER      NOT NULL DEFAULT 0,
    shard_index      INTEGER      NOT NULL DEFAULT 0,
    shard_total      INTEGER      NOT NULL DEFAULT 0,
    fire_key         VARCHAR(128) GENERATED ALWAYS AS (substr(fire_id, instr(fire_id, '-') + 1)) VIRTUAL
);

INSERT INTO runs_v12 (id, fire_id, job_id, "trigger", status, node, scheduled_at, dispatched_at,
    started_at, finished_at, exit_code, output, output_truncated, message, created_at, updated_at,
    attempt, shard_index, shard_total)
SELECT id, fire_id, job_id, "trigger", status, node, scheduled_at, dispatched_at,
    started_at, finished_at, exit_code, output, output_truncated, message, created_at, updated_at,
    attempt, shard_index, shard_total
FROM runs ORDER BY id;

-- The AUTOINCREMENT counter moves with the table: DROP TABLE deletes the
-- row named for it, and RENAME renames it.
DELETE FROM sqlite_sequence WHERE name = 'runs_v12';
UPDATE sqlite_sequence SET name = 'runs_v12' WHERE name = 'runs';

DROP TABLE runs;
ALTER TABLE runs_v12 RENAME TO runs;

CREATE UNIQUE INDEX runs_fire_key_fire_id_key ON runs (fire_key, fire_id);
CREATE INDEX runs_job_id_scheduled_at_idx ON runs (job_id, scheduled_at);
CREATE INDEX runs_status_idx ON runs (status);
CREATE INDEX runs_node_idx ON runs (node);
CREATE INDEX runs_scheduled_at_id_idx ON runs (scheduled_at, id);
CREATE INDEX runs_updated_at_id_status_idx ON runs (updated_at, id, status);
