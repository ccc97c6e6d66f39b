-- An announcement whose hold was decided, expired or withdrawn before it went out is not
-- sent: its delivery ends 'skipped' (issue #56), not 'failed'. SQLite cannot change a
-- CHECK constraint, so the table is rebuilt; nothing references it.
CREATE TABLE hold_notifications_new (
    id              TEXT PRIMARY KEY,
    notifier_id     INTEGER NOT NULL REFERENCES hold_notifiers (id) ON DELETE CASCADE,
    hold_id         TEXT NOT NULL,
    event           TEXT NOT NULL CHECK (event IN ('hold.created', 'hold.expiring')),
    state           TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed', 'skipped')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TEXT NOT NULL,
    claimed_until   TEXT,
    last_status     INTEGER,
    last_error      TEXT,
    created_at      TEXT NOT NULL,
    delivered_at    TEXT,
    UNIQUE (notifier_id, hold_id, event)
);
INSERT INTO hold_notifications_new
    (id, notifier_id, hold_id, event, state, attempts, next_attempt_at, claimed_until,
     last_status, last_error, created_at, delivered_at)
SELECT id, notifier_id, hold_id, event, state, attempts, next_attempt_at, claimed_until,
       last_status, last_error, created_at, delivered_at
FROM hold_notifications;
DROP TABLE hold_notifications;
ALTER TABLE hold_notifications_new RENAME TO hold_notifications;
CREATE INDEX hold_notifications_due ON hold_notifications (state, next_attempt_at);
CREATE INDEX hold_notifications_hold ON hold_notifications (hold_id);
