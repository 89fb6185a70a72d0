-- Cronix schema v6 (SQLite): roles, group grants, sessions, API tokens and
-- the audit log. The old role "user" becomes "viewer" (it could see
-- everything; now it sees the groups granted to it, none at first). Login
-- tokens of v1 (api_tokens) are replaced by sessions: everyone logs in again.

UPDATE users SET role = 'viewer' WHERE role = 'user';
ALTER TABLE users ADD COLUMN disabled BOOLEAN NOT NULL DEFAULT FALSE;

CREATE TABLE IF NOT EXISTS user_groups (
    user_id  INTEGER NOT NULL,
    group_id INTEGER NOT NULL,
    PRIMARY KEY (user_id, group_id)
);

CREATE INDEX IF NOT EXISTS user_groups_group_id_idx ON user_groups (group_id);

DROP TABLE IF EXISTS api_tokens;

CREATE TABLE IF NOT EXISTS sessions (
    token_hash   VARCHAR(128) NOT NULL PRIMARY KEY,
    user_id      INTEGER      NOT NULL,
    csrf_token   VARCHAR(128) NOT NULL,
    created_at   TIMESTAMP    NOT NULL,
    last_seen_at TIMESTAMP    NOT NULL,
    expires_at   TIMESTAMP    NOT NULL
);

CREATE INDEX IF NOT EXISTS sessions_user_id_idx ON sessions (user_id);

CREATE TABLE IF NOT EXISTS access_tokens (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    token_hash  VARCHAR(128) NOT NULL,
    user_id     INTEGER      NOT NULL,
    name        VARCHAR(191) NOT NULL,
    role        VARCHAR(32)  NOT NULL,
    group_ids   TEXT         NOT NULL DEFAULT '',
    expires_at  TIMESTAMP    NULL,
    created_at  TIMESTAMP    NOT NULL,
    CONSTRAINT access_tokens_token_hash_key UNIQUE (token_hash)
);

CREATE INDEX IF NOT EXISTS access_tokens_user_id_idx ON access_tokens (user_id);

CREATE TABLE IF NOT EXISTS audit_log (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    at          TIMESTAMP    NOT NULL,
    user_id     INTEGER      NOT NULL DEFAULT 0,
    username    VARCHAR(191) NOT NULL DEFAULT '',
    address     VARCHAR(191) NOT NULL DEFAULT '',
    action      VARCHAR(64)  NOT NULL,
    object_type VARCHAR(64)  NOT NULL DEFAULT '',
    object_id   VARCHAR(191) NOT NULL DEFAULT '',
    diff        TEXT         NOT NULL DEFAULT ''
);

CREATE INDEX IF NOT EXISTS audit_log_at_idx ON audit_log (at);
CREATE INDEX IF NOT EXISTS audit_log_object_idx ON audit_log (object_type, object_id);
CREATE INDEX IF NOT EXISTS audit_log_username_idx ON audit_log (username);
