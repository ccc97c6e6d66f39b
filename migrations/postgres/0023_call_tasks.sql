-- Held calls as MCP tasks (issue #51).
-- PostgreSQL translation of migrations/sqlite/0023_call_tasks.sql.
ALTER TABLE holds DROP CONSTRAINT holds_state_check;
ALTER TABLE holds ADD CONSTRAINT holds_state_check
    CHECK (state IN ('pending', 'approved', 'denied', 'expired', 'executed', 'refused', 'withdrawn'));

CREATE TABLE call_tasks (
    id          TEXT PRIMARY KEY,
    hold_id     TEXT NOT NULL,
    key_id      BIGINT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('working', 'completed', 'cancelled', 'failed')),
    result      TEXT,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    expires_at  TEXT NOT NULL
);
CREATE INDEX call_tasks_by_hold ON call_tasks (hold_id);
CREATE INDEX call_tasks_by_expiry ON call_tasks (expires_at);
