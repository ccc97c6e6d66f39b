-- The tamper-evident audit chain. The hash of each row is defined in core/src/audit/mod.rs:
-- hash = SHA-256(canonical(seq, at, session_id, kind, actor, payload) || prev_hash).
-- seq is assigned by the writer (chain tip + 1) inside the appending transaction.
-- PostgreSQL translation of migrations/sqlite/0003_audit.sql. `seq` is a plain BIGINT
-- primary key, not an identity column: the writer always supplies it (it is part of the
-- hash), so a generated sequence would never advance and could only hand out wrong values.
CREATE TABLE audit_events (
    seq        BIGINT  PRIMARY KEY,
    at         TEXT    NOT NULL,
    session_id TEXT,
    kind       TEXT    NOT NULL,
    actor      TEXT,
    payload    TEXT    NOT NULL,
    prev_hash  TEXT    NOT NULL,
    hash       TEXT    NOT NULL
);

CREATE INDEX audit_events_session ON audit_events (session_id, seq);
CREATE INDEX audit_events_kind_at ON audit_events (kind, at);

-- Retention: the last event of each pruned segment. Verification of what remains starts
-- from the newest anchor instead of the genesis.
CREATE TABLE audit_anchors (
    seq       BIGINT PRIMARY KEY,
    hash      TEXT NOT NULL,
    pruned_at TEXT NOT NULL
);
