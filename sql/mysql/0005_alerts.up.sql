-- Cronix schema v5 (MySQL 8 / MariaDB 10.5+): alerting. alert_events is the
-- outbox of alert events: one row per event, unique by dedupe_key (e.g.
-- "run.failed:<fire id>") so that a new trigger leader re-raising an event
-- finds it there and adds nothing. A throttled event is kept with
-- suppressed = TRUE and is not delivered; the next delivered event of its
-- job reports how many were suppressed. alert_deliveries holds one row per
-- event and channel target (the e-mail recipients, or one webhook) with its
-- delivery state; a replica sends a delivery only after claiming it
-- (claimed_until). settings holds JSON documents by name (the alerting
-- settings, the alert scanner's cursor). runs_updated_at_idx lets the alert
-- scanner read the runs that became terminal since its cursor. Every
-- statement is re-runnable (IF NOT EXISTS; the runner skips an ALTER that
-- fails only because its index exists).

CREATE TABLE IF NOT EXISTS alert_events (
    id                BIGINT        NOT NULL AUTO_INCREMENT PRIMARY KEY,
    dedupe_key        VARCHAR(191)  NOT NULL,
    kind              VARCHAR(64)   NOT NULL,
    job_id            BIGINT        NOT NULL DEFAULT 0,
    job_name          VARCHAR(255)  NOT NULL DEFAULT '',
    group_name        VARCHAR(191)  NOT NULL DEFAULT '',
    run_id            BIGINT        NOT NULL DEFAULT 0,
    fire_id           VARCHAR(128)  NOT NULL DEFAULT '',
    node              VARCHAR(128)  NOT NULL DEFAULT '',
    run_status        VARCHAR(32)   NOT NULL DEFAULT '',
    exit_code         INT           NULL,
    message           TEXT          NOT NULL,
    output_tail       TEXT          NOT NULL,
    link              VARCHAR(1024) NOT NULL DEFAULT '',
    occurred_at       DATETIME(6)   NOT NULL,
    suppressed        BOOLEAN       NOT NULL DEFAULT FALSE,
    suppressed_reason VARCHAR(64)   NOT NULL DEFAULT '',
    suppressed_count  INT           NOT NULL DEFAULT 0,
    created_at        DATETIME(6)   NOT NULL,
    UNIQUE KEY alert_events_dedupe_key_key (dedupe_key),
    KEY alert_events_job_id_idx (job_id, id),
    KEY alert_events_created_at_idx (created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS alert_deliveries (
    id              BIGINT        NOT NULL AUTO_INCREMENT PRIMARY KEY,
    event_id        BIGINT        NOT NULL,
    channel         VARCHAR(16)   NOT NULL,
    target          VARCHAR(191)  NOT NULL,
    recipients      TEXT          NOT NULL,
    status          VARCHAR(16)   NOT NULL,
    attempts        INT           NOT NULL DEFAULT 0,
    last_error      TEXT          NOT NULL,
    next_attempt_at DATETIME(6)   NOT NULL,
    claimed_until   DATETIME(6)   NULL,
    sent_at         DATETIME(6)   NULL,
    created_at      DATETIME(6)   NOT NULL,
    updated_at      DATETIME(6)   NOT NULL,
    UNIQUE KEY alert_deliveries_event_channel_target_key (event_id, channel, target),
    KEY alert_deliveries_status_next_idx (status, next_attempt_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS settings (
    name       VARCHAR(64)  NOT NULL PRIMARY KEY,
    value      MEDIUMTEXT   NOT NULL,
    updated_at DATETIME(6)  NOT NULL,
    updated_by VARCHAR(191) NOT NULL DEFAULT ''
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

ALTER TABLE runs ADD KEY runs_updated_at_idx (updated_at);
