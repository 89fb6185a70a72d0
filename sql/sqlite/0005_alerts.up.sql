-- Cronix schema v5 (SQLite): alerting. alert_events is the outbox of alert
-- events: one row per event, unique by dedupe_key (e.g. "run.failed:<fire
-- id>") so that a new trigger leader re-raising an event finds it there and
-- adds nothing. A throttled event is kept with suppressed = 1 and is not
-- delivered; the next delivered event of its job reports how many were
-- suppressed. alert_deliveries holds one row per event and channel target
-- (the e-mail recipients, or one webhook) with its delivery state; a
-- replica sends a delivery only after claiming it (claimed_until).
-- settings holds JSON documents by name (the alerting settings, the alert
-- scanner's cursor). runs_updated_at_idx lets the alert scanner read the
-- runs that became terminal since its cursor.

CREATE TABLE IF NOT EXISTS alert_events (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    dedupe_key        VARCHAR(191)  NOT NULL,
    kind              VARCHAR(64)   NOT NULL,
    job_id            INTEGER       NOT NULL DEFAULT 0,
    job_name          VARCHAR(255)  NOT NULL DEFAULT '',
    group_name        VARCHAR(191)  NOT NULL DEFAULT '',
    run_id            INTEGER       NOT NULL DEFAULT 0,
    fire_id           VARCHAR(128)  NOT NULL DEFAULT '',
    node              VARCHAR(128)  NOT NULL DEFAULT '',
    run_status        VARCHAR(32)   NOT NULL DEFAULT '',
    exit_code         INTEGER       NULL,
    message           TEXT          NOT NULL DEFAULT '',
    output_tail       TEXT          NOT NULL DEFAULT '',
    link              VARCHAR(1024) NOT NULL DEFAULT '',
    occurred_at       TIMESTAMP     NOT NULL,
    suppressed        BOOLEAN       NOT NULL DEFAULT 0,
    suppressed_reason VARCHAR(64)   NOT NULL DEFAULT '',
    suppressed_count  INTEGER       NOT NULL DEFAULT 0,
    created_at        TIMESTAMP     NOT NULL,
    CONSTRAINT alert_events_dedupe_key_key UNIQUE (dedupe_key)
);
CREATE INDEX IF NOT EXISTS alert_events_job_id_idx ON alert_events (job_id, id);
CREATE INDEX IF NOT EXISTS alert_events_created_at_idx ON alert_events (created_at);

CREATE TABLE IF NOT EXISTS alert_deliveries (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id        INTEGER       NOT NULL,
    channel         VARCHAR(16)   NOT NULL,
    target          VARCHAR(191)  NOT NULL,
    recipients      TEXT          NOT NULL DEFAULT '',
    status          VARCHAR(16)   NOT NULL,
    attempts        INTEGER       NOT NULL DEFAULT 0,
    last_error      TEXT          NOT NULL DEFAULT '',
    next_attempt_at TIMESTAMP     NOT NULL,
    claimed_until   TIMESTAMP     NULL,
    sent_at         TIMESTAMP     NULL,
    created_at      TIMESTAMP     NOT NULL,
    updated_at      TIMESTAMP     NOT NULL,
    CONSTRAINT alert_deliveries_event_channel_target_key UNIQUE (event_id, channel, target)
);
CREATE INDEX IF NOT EXISTS alert_deliveries_status_next_idx ON alert_deliveries (status, next_attempt_at);

CREATE TABLE IF NOT EXISTS settings (
    name       VARCHAR(64)  NOT NULL PRIMARY KEY,
    value      TEXT         NOT NULL,
    updated_at TIMESTAMP    NOT NULL,
    updated_by VARCHAR(191) NOT NULL DEFAULT ''
);

CREATE INDEX IF NOT EXISTS runs_updated_at_idx ON runs (updated_at);
