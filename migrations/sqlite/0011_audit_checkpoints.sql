-- Signed checkpoints of the audit chain tip (core/src/audit/checkpoint.rs): the server signs
-- `seq`, `hash` and `at` with its Ed25519 audit key, so deleting the newest events (or
-- rewriting them) no longer verifies as intact. `public_key` says which key signed; a
-- verifier trusts only the key it is given, never this column.
CREATE TABLE audit_checkpoints (
    seq        INTEGER PRIMARY KEY,
    hash       TEXT NOT NULL,
    at         TEXT NOT NULL,
    public_key TEXT NOT NULL,
    signature  TEXT NOT NULL
);
