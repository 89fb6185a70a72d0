-- Cronix schema v6 (MySQL 8 / MariaDB 10.5+): roles, group grants,
-- sessions, API tokens and the audit log. The old role "user" becomes
-- "viewer" (it could see everything; now it sees the groups granted to it,
-- none at first). Login tokens of v1 (api_tokens) are replaced by sessions:
-- everyone logs in again. Every statement is re-runnable (a duplicate
-- column is recognised by the migration runner).

UPDATE users SET role = 'viewer' WHERE role = 'user';
ALTER TABLE users ADD COLUMN disabled BOOLEAN NOT NULL DEFAULT FALSE;

CREATE TABLE IF NOT EXISTS user_groups (
    user_id  BIGINT NOT NULL,
    group_id BIGINT NOT NULL,
    PRIMARY KEY (user_id, group_id),
    KEY user_groups_group_id_idx (group_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

DROP TABLE IF EXISTS api_tokens;

CREATE TABLE IF NOT EXISTS sessions (
    token_hash   VARCHAR(128) NOT NULL PRIMARY KEY,
    user_id      BIGINT       NOT NULL,
    csrf_token   VARCHAR(128) NOT NULL,
    created_at   DATETIME(6)  NOT NULL,
    last_seen_at DATETIME(6)  NOT NULL,
    expires_at   DATETIME(6)  NOT NULL,
    KEY sessions_user_id_idx (user_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS access_tokens (
    id          BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    token_hash  VARCHAR(128) NOT NULL,
    user_id     BIGINT       NOT NULL,
    name        VARCHAR(191) NOT NULL,
    role        VARCHAR(32)  NOT NULL,
    group_ids   TEXT         NOT NULL,
    expires_at  DATETIME(6)  NULL,
    created_at  DATETIME(6)  NOT NULL,
    UNIQUE KEY access_tokens_token_hash_key (token_hash),
    KEY access_tokens_user_id_idx (user_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS audit_log (
    id          BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    at          DATETIME(6)  NOT NULL,
    user_id     BIGINT       NOT NULL DEFAULT 0,
    username    VARCHAR(191) NOT NULL DEFAULT '',
    address     VARCHAR(191) NOT NULL DEFAULT '',
    action      VARCHAR(64)  NOT NULL,
    object_type VARCHAR(64)  NOT NULL DEFAULT '',
    object_id   VARCHAR(191) NOT NULL DEFAULT '',
    diff        MEDIUMTEXT   NOT NULL,
    KEY audit_log_at_idx (at),
    KEY audit_log_object_idx (object_type, object_id),
    KEY audit_log_username_idx (username)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
