-- Cronix schema v11: the alert scanner's index. runs_updated_at_id_status_idx
-- orders the runs by (updated_at, id) and carries their status, so the
-- scanner's read of the runs that became terminal since its cursor is an
-- index range scan that reads no table rows. It replaces
-- runs_updated_at_idx, of which it is an extension (one index to keep up to
-- date per run write, as before). runs_scheduled_at_idx is dropped too: it
-- holds the same keys as runs_scheduled_at_id_idx (0010), which serves
-- every read it served, and each index costs every run insert.

CREATE INDEX IF NOT EXISTS runs_updated_at_id_status_idx ON runs (updated_at, id, status);
DROP INDEX IF EXISTS runs_updated_at_idx;
DROP INDEX IF EXISTS runs_scheduled_at_idx;
