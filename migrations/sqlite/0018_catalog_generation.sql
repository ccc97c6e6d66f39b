-- A counter that every change to a table the compiled catalog is made of moves, in the
-- change's own transaction. Each replica (or second process on this file) polls it and
-- recompiles its catalog snapshot when it moved (docs/operations.md, "Catalog changes").
-- Triggers, not application code: no write path can forget it.
CREATE TABLE catalog_generation (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    n  INTEGER NOT NULL
);
INSERT INTO catalog_generation (id, n) VALUES (1, 0);
CREATE TRIGGER upstreams_insert_moves_catalog AFTER INSERT ON upstreams
    BEGIN UPDATE catalog_generation SET n = n + 1; END;
CREATE TRIGGER upstreams_update_moves_catalog AFTER UPDATE ON upstreams
    BEGIN UPDATE catalog_generation SET n = n + 1; END;
CREATE TRIGGER upstreams_delete_moves_catalog AFTER DELETE ON upstreams
    BEGIN UPDATE catalog_generation SET n = n + 1; END;
CREATE TRIGGER tools_insert_moves_catalog AFTER INSERT ON tools
    BEGIN UPDATE catalog_generation SET n = n + 1; END;
CREATE TRIGGER tools_update_moves_catalog AFTER UPDATE ON tools
    BEGIN UPDATE catalog_generation SET n = n + 1; END;
CREATE TRIGGER tools_delete_moves_catalog AFTER DELETE ON tools
    BEGIN UPDATE catalog_generation SET n = n + 1; END;
CREATE TRIGGER skills_insert_moves_catalog AFTER INSERT ON skills
    BEGIN UPDATE catalog_generation SET n = n + 1; END;
CREATE TRIGGER skills_update_moves_catalog AFTER UPDATE ON skills
    BEGIN UPDATE catalog_generation SET n = n + 1; END;
CREATE TRIGGER skills_delete_moves_catalog AFTER DELETE ON skills
    BEGIN UPDATE catalog_generation SET n = n + 1; END;
CREATE TRIGGER skill_versions_insert_moves_catalog AFTER INSERT ON skill_versions
    BEGIN UPDATE catalog_generation SET n = n + 1; END;
CREATE TRIGGER skill_versions_update_moves_catalog AFTER UPDATE ON skill_versions
    BEGIN UPDATE catalog_generation SET n = n + 1; END;
CREATE TRIGGER skill_versions_delete_moves_catalog AFTER DELETE ON skill_versions
    BEGIN UPDATE catalog_generation SET n = n + 1; END;
CREATE TRIGGER roles_insert_moves_catalog AFTER INSERT ON roles
    BEGIN UPDATE catalog_generation SET n = n + 1; END;
CREATE TRIGGER roles_update_moves_catalog AFTER UPDATE ON roles
    BEGIN UPDATE catalog_generation SET n = n + 1; END;
CREATE TRIGGER roles_delete_moves_catalog AFTER DELETE ON roles
    BEGIN UPDATE catalog_generation SET n = n + 1; END;
CREATE TRIGGER scopes_insert_moves_catalog AFTER INSERT ON scopes
    BEGIN UPDATE catalog_generation SET n = n + 1; END;
CREATE TRIGGER scopes_update_moves_catalog AFTER UPDATE ON scopes
    BEGIN UPDATE catalog_generation SET n = n + 1; END;
CREATE TRIGGER scopes_delete_moves_catalog AFTER DELETE ON scopes
    BEGIN UPDATE catalog_generation SET n = n + 1; END;
