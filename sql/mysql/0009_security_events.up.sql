-- Cronix schema (MySQL 8 / MariaDB 10.5+): security events. A node refused
-- a record it was asked to act on (unsigned, mis-signed, replayed, stale
-- term), or a server refused a node's result for a fire not dispatched to
-- that node. Admins read them at GET /api/v1/security/events. Re-runnable.

CREATE TABLE IF NOT EXISTS security_events (
    id          BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    at          DATETIME(6)  NOT NULL,
    node        VARCHAR(128) NOT NULL DEFAULT '',
    kind        VARCHAR(64)  NOT NULL,
    record_key  TEXT         NOT NULL,
    reason      TEXT         NOT NULL,
    created_at  DATETIME(6)  NOT NULL,
    KEY security_events_at_idx (at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
