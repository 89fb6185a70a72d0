-- Cronix schema v13 (PostgreSQL): a change stamp of the jobs, kept by
-- triggers (sqlite/0013_jobs_stamp.up.sql says why: the store keeps the
-- jobs list's totals while the stamp stays put), and an index on
-- (group_name, id) so that a group's page in id order takes its OFFSET
-- from an index alone (SQLite's group_name index ends with the id).
--
-- The triggers are per statement: a batch of 1,000 jobs moves the stamp
-- once. A statement that changes no row moves it too, which only costs
-- the next list page a count. The stamp row is locked by every writing
-- transaction until it commits, so job and group writes commit one after
-- another; they are rare beside runs, which it does not touch.
--
-- A function's body ends its statements with ";", so it is written on one
-- line (sql/schema.go splits statements at a ";" that ends a line).

CREATE TABLE IF NOT EXISTS jobs_stamp (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    stamp BIGINT  NOT NULL
);

INSERT INTO jobs_stamp (id, stamp) VALUES (1, 0) ON CONFLICT (id) DO NOTHING;

CREATE OR REPLACE FUNCTION jobs_stamp_move() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN UPDATE jobs_stamp SET stamp = stamp + 1 WHERE id = 1; RETURN NULL; END $$;

DROP TRIGGER IF EXISTS jobs_stamp_jobs ON jobs;
CREATE TRIGGER jobs_stamp_jobs AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON jobs FOR EACH STATEMENT EXECUTE FUNCTION jobs_stamp_move();
DROP TRIGGER IF EXISTS jobs_stamp_groups ON job_groups;
CREATE TRIGGER jobs_stamp_groups AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON job_groups FOR EACH STATEMENT EXECUTE FUNCTION jobs_stamp_move();

CREATE INDEX IF NOT EXISTS jobs_group_name_id_idx ON jobs (group_name, id);
