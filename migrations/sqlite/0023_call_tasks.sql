-- Held calls as MCP tasks (issue #51). A client that asks for a task gets one for a call
-- that is held for approval: `call_tasks` binds the task id (random, unguessable) to the
-- hold and to the key that made the call, and keeps the call's result once it ran, so
-- any replica answers `tasks/get` and the approved call runs once whoever polls.
--
-- A task cancelled by its agent withdraws its hold: `holds.state` gains `withdrawn`.
-- SQLite cannot alter a CHECK constraint, so the table is rebuilt with the same rows.
CREATE TABLE holds_new (
    id                TEXT PRIMARY KEY,
    session_id        TEXT NOT NULL,
    key_id            INTEGER NOT NULL,
    key_name          TEXT NOT NULL,
    scope             TEXT NOT NULL,
    role              TEXT NOT NULL,
    tool              TEXT NOT NULL,
    arguments         TEXT NOT NULL,
    arguments_digest  TEXT NOT NULL,
    usage             TEXT NOT NULL,
    rule              TEXT NOT NULL,
    minutes           INTEGER NOT NULL,
    catalog_revision  TEXT NOT NULL,
    state             TEXT NOT NULL CHECK (state IN ('pending', 'approved', 'denied', 'expired', 'executed', 'refused', 'withdrawn')),
    created_at        TEXT NOT NULL,
    expires_at        TEXT NOT NULL,
    decided_by        TEXT,
    decided_at        TEXT,
    reason            TEXT,
    decided_revision  TEXT,
    finished_at       TEXT
);
INSERT INTO holds_new SELECT id, session_id, key_id, key_name, scope, role, tool, arguments,
    arguments_digest, usage, rule, minutes, catalog_revision, state, created_at, expires_at,
    decided_by, decided_at, reason, decided_revision, finished_at FROM holds;
DROP TABLE holds;
ALTER TABLE holds_new RENAME TO holds;
CREATE INDEX holds_by_state ON holds (state, created_at);
CREATE INDEX holds_by_call ON holds (session_id, tool, arguments_digest);

-- `status`: working (the hold waits, or was approved and has not run), completed
-- (`result` holds the call's MCP result: what ran, or the refusal that ended it),
-- cancelled (the agent withdrew it), failed (the gateway failed running it).
-- `expires_at` ends the task: `tasks/get` answers until then, and the row is removed after.
CREATE TABLE call_tasks (
    id          TEXT PRIMARY KEY,
    hold_id     TEXT NOT NULL,
    key_id      INTEGER NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('working', 'completed', 'cancelled', 'failed')),
    result      TEXT,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    expires_at  TEXT NOT NULL
);
CREATE INDEX call_tasks_by_hold ON call_tasks (hold_id);
CREATE INDEX call_tasks_by_expiry ON call_tasks (expires_at);
