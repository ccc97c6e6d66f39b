-- The inspection policy: which content inspectors run on a governed call and what they do
-- with a finding, per tool, role or scope (issue #34). One catalog-wide JSON document in a
-- one-row table; no row reads as the built-in defaults (so `store copy` carries the row
-- like any other). It is part of the compiled catalog,
-- so a change moves the catalog generation like the triggers of 0018.
CREATE TABLE inspection_policy (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    policy     TEXT NOT NULL,
    updated_at TEXT
);
CREATE TRIGGER inspection_policy_insert_moves_catalog AFTER INSERT ON inspection_policy
    BEGIN UPDATE catalog_generation SET n = n + 1; END;
CREATE TRIGGER inspection_policy_update_moves_catalog AFTER UPDATE ON inspection_policy
    BEGIN UPDATE catalog_generation SET n = n + 1; END;
CREATE TRIGGER inspection_policy_delete_moves_catalog AFTER DELETE ON inspection_policy
    BEGIN UPDATE catalog_generation SET n = n + 1; END;
