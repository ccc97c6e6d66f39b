-- An upstream's identity (issue #34, "Transport and identity"): the SHA-256 of its TLS
-- certificate's public key and its MCP `serverInfo`, pinned at its first sync like a tool
-- definition. An identity that differs later (a re-issued certificate, even from the same
-- CA, or another server version) is stored beside the pin and quarantines the upstream:
-- calls of its tools are refused (UPSTREAM_QUARANTINED) until an admin admits it. It is
-- part of the compiled catalog, so a change moves the catalog generation like 0018's.
CREATE TABLE upstream_identity (
    upstream          TEXT PRIMARY KEY REFERENCES upstreams (name) ON DELETE CASCADE,
    -- The upstream's config (JSON) when the identity was pinned: an admin who points the
    -- upstream elsewhere gets a new pin at the next sync, not a quarantine.
    endpoint          TEXT NOT NULL,
    -- {spki_sha256, server_name, server_version} as pinned.
    pinned            TEXT NOT NULL,
    -- The identity seen since, when it differs from the pin; NULL otherwise.
    offered           TEXT,
    state             TEXT NOT NULL CHECK (state IN ('pinned', 'quarantined')),
    pinned_at         TEXT NOT NULL,
    quarantined_since TEXT
);
CREATE TRIGGER upstream_identity_insert_moves_catalog AFTER INSERT ON upstream_identity
    BEGIN UPDATE catalog_generation SET n = n + 1; END;
CREATE TRIGGER upstream_identity_update_moves_catalog AFTER UPDATE ON upstream_identity
    BEGIN UPDATE catalog_generation SET n = n + 1; END;
CREATE TRIGGER upstream_identity_delete_moves_catalog AFTER DELETE ON upstream_identity
    BEGIN UPDATE catalog_generation SET n = n + 1; END;
