-- Approvers hear of holds (issue #56; docs/operations.md, "Hearing of holds: signed
-- webhooks").

-- Where holds are announced: `kind` 'webhook' posts to the URL in `target`, signed with
-- `secret` (HMAC-SHA256). The secret is one the gateway must use, so it is stored readable
-- by the server (protect the database as for upstream credentials) and never shown,
-- exported or logged after it is made. `scopes` and `roles` (JSON arrays, empty: every
-- one) choose which holds; a hold is announced when it is raised and, with
-- `expiring_minutes`, that long before it expires.
CREATE TABLE hold_notifiers (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    name             TEXT NOT NULL UNIQUE,
    kind             TEXT NOT NULL,
    target           TEXT NOT NULL,
    secret           TEXT NOT NULL,
    scopes           TEXT NOT NULL,
    roles            TEXT NOT NULL,
    expiring_minutes INTEGER,
    created_at       TEXT NOT NULL,
    created_by       TEXT NOT NULL
);

-- Each announcement of one hold to one notifier, delivered at least once: the outbox the
-- delivery worker of every replica takes from, and the delivery log the console shows.
-- `claimed_until` is a lease, so a replica that dies mid-delivery leaves it to another.
CREATE TABLE hold_notifications (
    id              TEXT PRIMARY KEY,
    notifier_id     INTEGER NOT NULL REFERENCES hold_notifiers (id) ON DELETE CASCADE,
    hold_id         TEXT NOT NULL,
    event           TEXT NOT NULL CHECK (event IN ('hold.created', 'hold.expiring')),
    state           TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TEXT NOT NULL,
    claimed_until   TEXT,
    last_status     INTEGER,
    last_error      TEXT,
    created_at      TEXT NOT NULL,
    delivered_at    TEXT,
    UNIQUE (notifier_id, hold_id, event)
);
CREATE INDEX hold_notifications_due ON hold_notifications (state, next_attempt_at);
CREATE INDEX hold_notifications_hold ON hold_notifications (hold_id);
