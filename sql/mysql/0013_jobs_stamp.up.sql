-- Cronix schema v13: SQLite and PostgreSQL keep a change stamp of the jobs
-- by triggers so that their store counts a jobs list's total, and reads a
-- deep page's anchors, again only after a change
-- (sqlite/0013_jobs_stamp.up.sql says why). MySQL gets none: CREATE
-- TRIGGER is refused to a user without SUPER while binary logging is on
-- (unless log_bin_trust_function_creators is set), and a migration must
-- not depend on that. Its store counts every time. Every dialect carries
-- every migration version.

SELECT 1;
