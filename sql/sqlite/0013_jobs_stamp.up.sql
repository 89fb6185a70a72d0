-- Cronix schema v13 (SQLite): a change stamp of the jobs, kept by triggers.
--
-- The jobs list's total is a count of the jobs its filter selects, and
-- SQLite counts by stepping through every matching index entry: at 100,000
-- jobs in one group that is most of the page's time, on every page, and
-- so is a deep page's OFFSET. The store keeps the totals it counted, and
-- the ids at every 1,000th position in id order (page anchors), beside
-- the stamp they were read at (server/store/joblist.go), and reads them
-- again only when the stamp moved. The triggers move it on every insert,
-- update and delete of a job or a group (a group's id names its jobs in a
-- user's scope), whoever writes: this server, another process on the same
-- file, or a hand-made statement. One row, one column.
--
-- A trigger's body ends its statement with ";" inside BEGIN ... END, so
-- each trigger is written on one line (sql/schema.go splits statements at
-- a ";" that ends a line).

CREATE TABLE IF NOT EXISTS jobs_stamp (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    stamp INTEGER NOT NULL
);

INSERT OR IGNORE INTO jobs_stamp (id, stamp) VALUES (1, 0);

CREATE TRIGGER IF NOT EXISTS jobs_stamp_job_insert AFTER INSERT ON jobs BEGIN UPDATE jobs_stamp SET stamp = stamp + 1 WHERE id = 1; END;
CREATE TRIGGER IF NOT EXISTS jobs_stamp_job_update AFTER UPDATE ON jobs BEGIN UPDATE jobs_stamp SET stamp = stamp + 1 WHERE id = 1; END;
CREATE TRIGGER IF NOT EXISTS jobs_stamp_job_delete AFTER DELETE ON jobs BEGIN UPDATE jobs_stamp SET stamp = stamp + 1 WHERE id = 1; END;
CREATE TRIGGER IF NOT EXISTS jobs_stamp_group_insert AFTER INSERT ON job_groups BEGIN UPDATE jobs_stamp SET stamp = stamp + 1 WHERE id = 1; END;
CREATE TRIGGER IF NOT EXISTS jobs_stamp_group_update AFTER UPDATE ON job_groups BEGIN UPDATE jobs_stamp SET stamp = stamp + 1 WHERE id = 1; END;
CREATE TRIGGER IF NOT EXISTS jobs_stamp_group_delete AFTER DELETE ON job_groups BEGIN UPDATE jobs_stamp SET stamp = stamp + 1 WHERE id = 1; END;
