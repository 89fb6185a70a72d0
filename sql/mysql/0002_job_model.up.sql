-- Cronix schema v2 (MySQL 8 / MariaDB 10.5+): the full job model. Jobs get
-- the misfire catch-up bound and a node pin, runs the attempt count and
-- shard position, groups an address type and a manual node list. Before v2
-- nothing wrote misfire_policy, so its old column default becomes the API
-- default. One ALTER per table (each is atomic); when a crashed migration
-- is re-run, the store's runner skips an ALTER that fails only because its
-- column or index already exists (errors 1060, 1061).

UPDATE jobs SET misfire_policy = 'FIRE_ONCE_NOW' WHERE misfire_policy = 'DO_NOTHING';

ALTER TABLE jobs
    ALTER COLUMN misfire_policy SET DEFAULT 'FIRE_ONCE_NOW',
    ADD COLUMN misfire_max_catch_up INT NOT NULL DEFAULT 0,
    ADD COLUMN node_uuid VARCHAR(128) NOT NULL DEFAULT '',
    ADD KEY jobs_handler_idx (handler);

ALTER TABLE runs
    ADD COLUMN attempt INT NOT NULL DEFAULT 0,
    ADD COLUMN shard_index INT NOT NULL DEFAULT 0,
    ADD COLUMN shard_total INT NOT NULL DEFAULT 0,
    ADD KEY runs_scheduled_at_idx (scheduled_at),
    ADD KEY runs_node_idx (node);

ALTER TABLE job_groups
    ADD COLUMN address_type VARCHAR(16) NOT NULL DEFAULT 'auto',
    ADD COLUMN addresses VARCHAR(4096) NOT NULL DEFAULT '';
