-- MCP 2025-11-25 core tasks (issue #51).
-- PostgreSQL translation of migrations/sqlite/0024_tasks_without_holds.sql.
ALTER TABLE call_tasks ALTER COLUMN hold_id DROP NOT NULL;
CREATE INDEX call_tasks_by_key ON call_tasks (key_id, created_at, id);
