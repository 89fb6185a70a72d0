-- Cronix schema v6 (MySQL 8 / MariaDB 10.5+): the handler catalog, every
-- handler a node has published (plus the built-ins), so a job can be
-- validated and saved while no node offering its handler is live. One row
-- per handler name: the newest version seen, its description and params
-- JSON Schema. Re-runnable (IF NOT EXISTS).

CREATE TABLE IF NOT EXISTS handler_catalog (
    name          VARCHAR(191) NOT NULL PRIMARY KEY,
    version       VARCHAR(64)  NOT NULL DEFAULT '',
    description   TEXT         NOT NULL,
    params_schema MEDIUMTEXT   NOT NULL,
    updated_at    DATETIME(6)  NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
