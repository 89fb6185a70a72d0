-- Cronix schema v14 (PostgreSQL): drop the index on jobs (group_name),
-- which v13's index on jobs (group_name, id) covers (a lookup by group
-- reads the new index's leading column): one index fewer to write for
-- every job insert and group change.
DROP INDEX IF EXISTS jobs_group_name_idx;
