-- The inspection policy: which content inspectors run on a governed call and what they do
-- with a finding, per tool, role or scope (issue #34). One catalog-wide JSON document in a
-- one-row table; no row reads as the built-in defaults (so `store copy` carries the row
-- like any other). It is part of the compiled catalog,
-- so a change moves the catalog generation (the function of 0018).
-- PostgreSQL translation of migrations/sqlite/0020_inspection_policy.sql.
CREATE TABLE inspection_policy (
    id         BIGINT PRIMARY KEY CHECK (id = 1),
    policy     TEXT NOT NULL,
    updated_at TEXT
);
CREATE TRIGGER inspection_policy_moves_catalog
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON inspection_policy
    FOR EACH STATEMENT EXECUTE FUNCTION move_catalog_generation();
