-- Cronix schema v6 (PostgreSQL): the handler catalog, every handler a node has
-- published (plus the built-ins), so a job can be validated and saved while
-- no node offering its handler is live. One row per handler name: the
-- newest version seen, its description and params JSON Schema.

CREATE TABLE IF NOT EXISTS handler_catalog (
    name          VARCHAR(191) NOT NULL PRIMARY KEY,
    version       VARCHAR(64)  NOT NULL DEFAULT '',
    description   TEXT         NOT NULL DEFAULT '',
    params_schema TEXT         NOT NULL DEFAULT '',
    updated_at    TIMESTAMPTZ  NOT NULL
);
