-- Cronix schema v13: SQLite keeps a change stamp of the jobs by triggers so
-- that its store counts a jobs list's total again only after a change
-- (sqlite/0013_jobs_stamp.up.sql says why). PostgreSQL and MySQL count in
-- their own server process and need no stamp; MySQL would also refuse
-- CREATE TRIGGER to a user without SUPER while binary logging is on.
-- Every dialect carries every migration version.

SELECT 1;
