-- Cronix schema v4 (MySQL 8 / MariaDB 10.5+): job names are unique within a
-- group. Existing duplicates keep their oldest job's name; every later one
-- gets its id appended ("nightly backup (12)") before the unique key is
-- added. Both statements are re-runnable: once renamed nothing is
-- duplicated, and the runner skips an ADD whose key exists.

UPDATE jobs j
JOIN (SELECT group_name, name, MIN(id) AS keep_id FROM jobs GROUP BY group_name, name HAVING COUNT(*) > 1) d
  ON j.group_name = d.group_name AND j.name = d.name AND j.id <> d.keep_id
SET j.name = CONCAT(j.name, ' (', j.id, ')');

ALTER TABLE jobs ADD UNIQUE KEY jobs_group_name_name_key (group_name, name);
