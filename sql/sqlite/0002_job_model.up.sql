-- Cronix schema v2 (SQLite): the full job model. Jobs get the misfire
-- catch-up bound and a node pin, runs the attempt count and shard position,
-- groups an address type and a manual node list. Before v2 nothing wrote
-- misfire_policy, so its old column default becomes the API default.

UPDATE jobs SET misfire_policy = 'FIRE_ONCE_NOW' WHERE misfire_policy = 'DO_NOTHING';

ALTER TABLE jobs ADD COLUMN misfire_max_catch_up INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN node_uuid VARCHAR(128) NOT NULL DEFAULT '';

ALTER TABLE runs ADD COLUMN attempt INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN shard_index INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN shard_total INTEGER NOT NULL DEFAULT 0;

CREATE INDEX IF NOT EXISTS runs_scheduled_at_idx ON runs (scheduled_at);
CREATE INDEX IF NOT EXISTS runs_node_idx ON runs (node);
CREATE INDEX IF NOT EXISTS jobs_handler_idx ON jobs (handler);

ALTER TABLE job_groups ADD COLUMN address_type VARCHAR(16) NOT NULL DEFAULT 'auto';
ALTER TABLE job_groups ADD COLUMN addresses TEXT NOT NULL DEFAULT '';
