-- Cronix schema v15: when each API token was last used, so that an admin
-- can tell a token in use from one to revoke. NULL = never used. The
-- server writes it at most once a minute per token (server/auth).

ALTER TABLE access_tokens ADD COLUMN IF NOT EXISTS last_used_at TIMESTAMPTZ NULL;
