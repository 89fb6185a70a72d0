-- Cronix schema (SQLite): security events. A node refused a record it was
-- asked to act on (unsigned, mis-signed, replayed, stale term), or a
-- server refused a node's result for a fire not dispatched to that node.
-- Admins read them at GET /api/v1/security/events.

CREATE TABLE IF NOT EXISTS security_events (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    at          TIMESTAMP    NOT NULL,
    node        VARCHAR(128) NOT NULL DEFAULT '',
    kind        VARCHAR(64)  NOT NULL,
    record_key  TEXT         NOT NULL,
    reason      TEXT         NOT NULL,
    created_at  TIMESTAMP    NOT NULL
);

CREATE INDEX IF NOT EXISTS security_events_at_idx ON security_events (at);
