-- Cronix schema v3 (SQLite): every saved version of a job (like xxl-job's
-- glue log). The store writes a row in the transaction that creates or
-- updates the job, one per revision; deleting the job deletes its rows.
-- The unique (job_id, revision) index also serves lookups by job_id.
-- Jobs saved before v3 get their current revision as their first version.

CREATE TABLE IF NOT EXISTS job_versions (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id        INTEGER      NOT NULL,
    revision      INTEGER      NOT NULL,
    name          VARCHAR(255) NOT NULL,
    schedule_type VARCHAR(32)  NOT NULL DEFAULT 'cron',
    schedule      VARCHAR(255) NOT NULL DEFAULT '',
    timezone      VARCHAR(64)  NOT NULL DEFAULT '',
    handler       VARCHAR(191) NOT NULL DEFAULT '',
    params        TEXT         NOT NULL DEFAULT '{}',
    saved_at      TIMESTAMP    NOT NULL,
    saved_by      VARCHAR(191) NOT NULL DEFAULT '',
    CONSTRAINT job_versions_job_id_revision_key UNIQUE (job_id, revision)
);

INSERT INTO job_versions (job_id, revision, name, schedule_type, schedule, timezone, handler, params, saved_at, saved_by)
SELECT j.id, j.revision, j.name, j.schedule_type, j.schedule, j.timezone, j.handler, j.params, j.updated_at, ''
FROM jobs j
WHERE NOT EXISTS (SELECT 1 FROM job_versions v WHERE v.job_id = j.id AND v.revision = j.revision);
