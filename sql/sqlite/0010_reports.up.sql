-- Cronix schema v10 (SQLite): daily reports and retention. daily_reports
-- holds one row per UTC day and job: its runs by status and the p50/p99 of
-- lateness (scheduled -> started, scheduled fires only) and duration
-- (started -> finished), in milliseconds. The trigger leader rewrites the
-- rows of the days that are still open and marks a day final once it is
-- over (plus a settle time); run retention never deletes runs of a day that
-- is not final, so reports outlive the runs they count. runs_scheduled_at_idx
-- serves the report's and the retention's keyset reads by (scheduled_at, id).
-- jobs.alert_on_kill makes a killed run raise run.killed.

CREATE TABLE IF NOT EXISTS daily_reports (
    day              VARCHAR(10)  NOT NULL,
    job_id           INTEGER      NOT NULL,
    job_name         VARCHAR(255) NOT NULL DEFAULT '',
    group_name       VARCHAR(191) NOT NULL DEFAULT '',
    runs_total       INTEGER      NOT NULL DEFAULT 0,
    runs_success     INTEGER      NOT NULL DEFAULT 0,
    runs_failed      INTEGER      NOT NULL DEFAULT 0,
    runs_timeout     INTEGER      NOT NULL DEFAULT 0,
    runs_killed      INTEGER      NOT NULL DEFAULT 0,
    runs_lost        INTEGER      NOT NULL DEFAULT 0,
    runs_skipped     INTEGER      NOT NULL DEFAULT 0,
    runs_unfinished  INTEGER      NOT NULL DEFAULT 0,
    lateness_count   INTEGER      NOT NULL DEFAULT 0,
    lateness_p50_ms  INTEGER      NOT NULL DEFAULT 0,
    lateness_p99_ms  INTEGER      NOT NULL DEFAULT 0,
    duration_count   INTEGER      NOT NULL DEFAULT 0,
    duration_p50_ms  INTEGER      NOT NULL DEFAULT 0,
    duration_p99_ms  INTEGER      NOT NULL DEFAULT 0,
    final            BOOLEAN      NOT NULL DEFAULT FALSE,
    updated_at       TIMESTAMP    NOT NULL,
    PRIMARY KEY (day, job_id)
);
CREATE INDEX IF NOT EXISTS daily_reports_group_day_idx ON daily_reports (group_name, day);

CREATE INDEX IF NOT EXISTS runs_scheduled_at_id_idx ON runs (scheduled_at, id);

ALTER TABLE jobs ADD COLUMN alert_on_kill BOOLEAN NOT NULL DEFAULT FALSE;
