-- Cronix schema v14: PostgreSQL drops its index on jobs (group_name), which
-- its v13 index on (group_name, id) covers. Here the group_name index
-- already ends with the row's id (the rowid in SQLite, the primary key in
-- InnoDB), so there is nothing to drop. Every dialect carries every
-- migration version.

SELECT 1;
