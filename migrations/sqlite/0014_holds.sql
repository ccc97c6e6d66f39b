-- Approval holds: calls every limit allows but that wait for a reviewer's approval of the
-- exact call. `arguments` is the call's JSON object (needed to run it once approved;
-- the console shows sensitive arguments as digests); `usage` is what the hold reserved in
-- its session, released if it is denied or expires.
CREATE TABLE holds (
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
    state             TEXT NOT NULL CHECK (state IN ('pending', 'approved', 'denied', 'expired', 'executed', 'refused')),
    created_at        TEXT NOT NULL,
    expires_at        TEXT NOT NULL,
    decided_by        TEXT,
    decided_at        TEXT,
    reason            TEXT,
    decided_revision  TEXT,
    finished_at       TEXT
);

CREATE INDEX holds_by_state ON holds (state, created_at);
CREATE INDEX holds_by_call ON holds (session_id, tool, arguments_digest);
