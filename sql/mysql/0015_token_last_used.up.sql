-- Cronix schema v15: when each API token was last used, so that an admin
-- can tell a token in use from one to revoke. NULL = never used. The
-- server writes it at most once a minute per token (server/auth). When a
-- crashed migration is re-run, the store's runner skips the ALTER that
-- fails only because its column exists (error 1060).

ALTER TABLE access_tokens ADD COLUMN last_used_at DATETIME(6) NULL;
