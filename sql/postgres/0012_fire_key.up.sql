-- Cronix schema v12: SQLite rebuilds its runs table with a fire id index in
-- time order (sqlite/0012_fire_key.up.sql says why). Here runs keep
-- UNIQUE (fire_id): PostgreSQL and MySQL log row changes, not each page a
-- commit touched, so one index entry per job per second costs no page
-- write of its own. Every dialect carries every migration version.

SELECT 1;
