-- Cronix schema v11 (MySQL 8 / MariaDB 10.5+): the alert scanner's index.
-- runs_updated_at_id_status_idx orders the runs by (updated_at, id) and
-- carries their status, so the scanner's read of the runs that became
-- terminal since its cursor is an index range scan that reads no table rows.
-- It replaces runs_updated_at_idx, of which it is an extension (one index to
-- keep up to date per run write, as before). runs_scheduled_at_idx is
-- dropped too: it holds the same keys as runs_scheduled_at_id_idx (0010),
-- which serves every read it served, and each index costs every run
-- insert. Re-runnable: the runner skips an ALTER that fails only because
-- its index exists, or is already dropped.

ALTER TABLE runs ADD KEY runs_updated_at_id_status_idx (updated_at, id, status);
ALTER TABLE runs DROP KEY runs_updated_at_idx;
ALTER TABLE runs DROP KEY runs_scheduled_at_idx;
