-- MCP 2025-11-25 core tasks (issue #51): a client may ask for any `call_tool` to run as a
-- task, and the gateway cannot know before deciding whether the call will be held. A call
-- that was not held (it ran, or was refused) becomes a task that is already finished, with
-- its result, so `call_tasks.hold_id` may be NULL. SQLite cannot drop a NOT NULL
-- constraint, so the table is rebuilt with the same rows.
--
-- `tasks/list` pages a key's tasks in creation order: `call_tasks_by_key`.
CREATE TABLE call_tasks_new (
    id          TEXT PRIMARY KEY,
    hold_id     TEXT,
    key_id      INTEGER NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('working', 'completed', 'cancelled', 'failed')),
    result      TEXT,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    expires_at  TEXT NOT NULL
);
INSERT INTO call_tasks_new SELECT id, hold_id, key_id, status, result, created_at, updated_at,
    expires_at FROM call_tasks;
DROP TABLE call_tasks;
ALTER TABLE call_tasks_new RENAME TO call_tasks;
CREATE INDEX call_tasks_by_hold ON call_tasks (hold_id);
CREATE INDEX call_tasks_by_expiry ON call_tasks (expires_at);
CREATE INDEX call_tasks_by_key ON call_tasks (key_id, created_at, id);
