-- Cronix schema v4 (SQLite): job names are unique within a group. Existing
-- duplicates keep their oldest job's name; every later one gets its id
-- appended ("nightly backup (12)") before the unique index is built.

UPDATE jobs SET name = name || ' (' || id || ')'
WHERE EXISTS (SELECT 1 FROM jobs k WHERE k.group_name = jobs.group_name AND k.name = jobs.name AND k.id < jobs.id);

CREATE UNIQUE INDEX IF NOT EXISTS jobs_group_name_name_key ON jobs (group_name, name);
