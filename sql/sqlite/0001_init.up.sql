-- Cronix schema v1 (SQLite). Times are stored as UTC text in bun's format
-- '2006-01-02 15:04:05.999999+00:00', which sorts chronologically.

CREATE TABLE IF NOT EXISTS users (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    username      VARCHAR(191) NOT NULL,
    password_hash TEXT         NOT NULL DEFAULT '',
    role          VARCHAR(32)  NOT NULL DEFAULT 'user',
    created_at    TIMESTAMP    NOT NULL,
    updated_at    TIMESTAMP    NOT NULL,
    CONSTRAINT users_username_key UNIQUE (username)
);

CREATE TABLE IF NOT EXISTS api_tokens (
    token_hash VARCHAR(128) NOT NULL PRIMARY KEY,
    user_id    INTEGER      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    expires_at TIMESTAMP    NOT NULL,
    created_at TIMESTAMP    NOT NULL
);

CREATE INDEX IF NOT EXISTS api_tokens_user_id_idx ON api_tokens (user_id);

CREATE TABLE IF NOT EXISTS job_groups (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    appname    VARCHAR(191) NOT NULL,
    title      VARCHAR(255) NOT NULL DEFAULT '',
    created_at TIMESTAMP    NOT NULL,
    updated_at TIMESTAMP    NOT NULL,
    CONSTRAINT job_groups_appname_key UNIQUE (appname)
);

CREATE TABLE IF NOT EXISTS jobs (
    id                     INTEGER PRIMARY KEY AUTOINCREMENT,
    name                   VARCHAR(255) NOT NULL,
    group_name             VARCHAR(191) NOT NULL DEFAULT '',
    schedule_type          VARCHAR(32)  NOT NULL DEFAULT 'cron',
    schedule               VARCHAR(255) NOT NULL DEFAULT '',
    timezone               VARCHAR(64)  NOT NULL DEFAULT '',
    handler                VARCHAR(191) NOT NULL DEFAULT '',
    params                 TEXT         NOT NULL DEFAULT '{}',
    timeout_seconds        INTEGER      NOT NULL DEFAULT 0,
    enabled                BOOLEAN      NOT NULL DEFAULT FALSE,
    description            TEXT         NOT NULL DEFAULT '',
    author                 VARCHAR(191) NOT NULL DEFAULT '',
    revision               INTEGER      NOT NULL DEFAULT 1,
    route_strategy         VARCHAR(64)  NOT NULL DEFAULT 'FIRST',
    block_strategy         VARCHAR(64)  NOT NULL DEFAULT 'SERIAL_EXECUTION',
    misfire_policy         VARCHAR(64)  NOT NULL DEFAULT 'DO_NOTHING',
    retry_count            INTEGER      NOT NULL DEFAULT 0,
    retry_interval_seconds INTEGER      NOT NULL DEFAULT 0,
    alarm_emails           TEXT         NOT NULL DEFAULT '',
    child_job_ids          TEXT         NOT NULL DEFAULT '',
    created_at             TIMESTAMP    NOT NULL,
    updated_at             TIMESTAMP    NOT NULL
);

CREATE INDEX IF NOT EXISTS jobs_group_name_idx ON jobs (group_name);
CREATE INDEX IF NOT EXISTS jobs_enabled_idx ON jobs (enabled);

CREATE TABLE IF NOT EXISTS runs (
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
    CONSTRAINT runs_fire_id_key UNIQUE (fire_id)
);

CREATE INDEX IF NOT EXISTS runs_job_id_scheduled_at_idx ON runs (job_id, scheduled_at);
CREATE INDEX IF NOT EXISTS runs_status_idx ON runs (status);
