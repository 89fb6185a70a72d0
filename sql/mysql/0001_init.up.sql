-- Cronix schema v1 (MySQL 8 / MariaDB 10.5+). Times are DATETIME(6) holding
-- UTC. DDL is not transactional here, so every statement is idempotent
-- (IF NOT EXISTS) and indexes are declared inline (MySQL has no
-- CREATE INDEX IF NOT EXISTS). runs.insert_token marks the rows one
-- InsertRuns batch created, because MySQL has no INSERT ... RETURNING.

CREATE TABLE IF NOT EXISTS users (
    id            BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    username      VARCHAR(191) NOT NULL,
    password_hash TEXT         NOT NULL,
    role          VARCHAR(32)  NOT NULL DEFAULT 'user',
    created_at    DATETIME(6)  NOT NULL,
    updated_at    DATETIME(6)  NOT NULL,
    UNIQUE KEY users_username_key (username)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS api_tokens (
    token_hash VARCHAR(128) NOT NULL PRIMARY KEY,
    user_id    BIGINT       NOT NULL,
    expires_at DATETIME(6)  NOT NULL,
    created_at DATETIME(6)  NOT NULL,
    KEY api_tokens_user_id_idx (user_id),
    CONSTRAINT api_tokens_user_id_fk FOREIGN KEY (user_id) REFERENCES users (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS job_groups (
    id         BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    appname    VARCHAR(191) NOT NULL,
    title      VARCHAR(255) NOT NULL DEFAULT '',
    created_at DATETIME(6)  NOT NULL,
    updated_at DATETIME(6)  NOT NULL,
    UNIQUE KEY job_groups_appname_key (appname)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS jobs (
    id                     BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    name                   VARCHAR(255) NOT NULL,
    group_name             VARCHAR(191) NOT NULL DEFAULT '',
    schedule_type          VARCHAR(32)  NOT NULL DEFAULT 'cron',
    schedule               VARCHAR(255) NOT NULL DEFAULT '',
    timezone               VARCHAR(64)  NOT NULL DEFAULT '',
    handler                VARCHAR(191) NOT NULL DEFAULT '',
    params                 TEXT         NOT NULL,
    timeout_seconds        INT          NOT NULL DEFAULT 0,
    enabled                BOOLEAN      NOT NULL DEFAULT FALSE,
    description            TEXT         NOT NULL,
    author                 VARCHAR(191) NOT NULL DEFAULT '',
    revision               BIGINT       NOT NULL DEFAULT 1,
    route_strategy         VARCHAR(64)  NOT NULL DEFAULT 'FIRST',
    block_strategy         VARCHAR(64)  NOT NULL DEFAULT 'SERIAL_EXECUTION',
    misfire_policy         VARCHAR(64)  NOT NULL DEFAULT 'DO_NOTHING',
    retry_count            INT          NOT NULL DEFAULT 0,
    retry_interval_seconds INT          NOT NULL DEFAULT 0,
    alarm_emails           VARCHAR(2048) NOT NULL DEFAULT '',
    child_job_ids          VARCHAR(2048) NOT NULL DEFAULT '',
    created_at             DATETIME(6)  NOT NULL,
    updated_at             DATETIME(6)  NOT NULL,
    KEY jobs_group_name_idx (group_name),
    KEY jobs_enabled_idx (enabled)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS runs (
    id               BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    fire_id          VARCHAR(128) NOT NULL,
    job_id           BIGINT       NOT NULL,
    `trigger`        VARCHAR(32)  NOT NULL DEFAULT 'schedule',
    status           VARCHAR(32)  NOT NULL,
    node             VARCHAR(128) NOT NULL DEFAULT '',
    scheduled_at     DATETIME(6)  NOT NULL,
    dispatched_at    DATETIME(6)  NULL,
    started_at       DATETIME(6)  NULL,
    finished_at      DATETIME(6)  NULL,
    exit_code        INT          NULL,
    output           MEDIUMTEXT   NOT NULL,
    output_truncated BOOLEAN      NOT NULL DEFAULT FALSE,
    message          TEXT         NOT NULL,
    insert_token     BIGINT       NOT NULL DEFAULT 0,
    created_at       DATETIME(6)  NOT NULL,
    updated_at       DATETIME(6)  NOT NULL,
    UNIQUE KEY runs_fire_id_key (fire_id),
    KEY runs_job_id_scheduled_at_idx (job_id, scheduled_at),
    KEY runs_status_idx (status)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
