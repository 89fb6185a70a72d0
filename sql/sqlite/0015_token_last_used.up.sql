-- Cronix schema v15: when each API token was last used, so that an admin
-- can tell a token in use from one to revoke. NULL = never used. The
-- server writes it at most once a minute per token (server/auth). SQLite
-- has no ADD COLUMN IF NOT EXISTS: should this migration run again on a
-- database that has the column, the store's runner skips the ALTER that
-- fails only because of that ("duplicate column name").

ALTER TABLE access_tokens ADD COLUMN last_used_at TIMESTAMP NULL;
