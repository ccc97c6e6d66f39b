-- An upstream's identity (issue #34, "Transport and identity"): the SHA-256 of its TLS
-- certificate's public key and its MCP `serverInfo`, pinned at its first sync like a tool
-- definition. An identity that differs later (a re-issued certificate, even from the same
-- CA, or another server version) is stored beside the pin and quarantines the upstream:
-- calls of its tools are refused (UPSTREAM_QUARANTINED) until an admin admits it. It is
-- part of the compiled catalog, so a change moves the catalog generation (0018's function).
-- PostgreSQL translation of migrations/sqlite/0021_upstream_identity.sql.
CREATE TABLE upstream_identity (
    upstream          TEXT PRIMARY KEY REFERENCES upstreams (name) ON DELETE CASCADE,
    endpoint          TEXT NOT NULL,
    pinned            TEXT NOT NULL,
    offered           TEXT,
    state             TEXT NOT NULL CHECK (state IN ('pinned', 'quarantined')),
    pinned_at         TEXT NOT NULL,
    quarantined_since TEXT
);
CREATE TRIGGER upstream_identity_moves_catalog
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON upstream_identity
    FOR EACH STATEMENT EXECUTE FUNCTION move_catalog_generation();
