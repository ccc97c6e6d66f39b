-- A counter that every change to a table the compiled catalog is made of moves, in the
-- change's own transaction. Each replica polls it and recompiles its catalog snapshot when
-- it moved (docs/operations.md, "Catalog changes"). Triggers, not application code: no
-- write path can forget it. PostgreSQL translation of migrations/sqlite/0018: one
-- statement-level trigger per table.
CREATE TABLE catalog_generation (
    id BIGINT PRIMARY KEY CHECK (id = 1),
    n  BIGINT NOT NULL
);
INSERT INTO catalog_generation (id, n) VALUES (1, 0);

CREATE FUNCTION move_catalog_generation() RETURNS trigger
    LANGUAGE plpgsql
    AS $$ BEGIN UPDATE catalog_generation SET n = n + 1; RETURN NULL; END $$;
CREATE TRIGGER upstreams_moves_catalog AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON upstreams
    FOR EACH STATEMENT EXECUTE FUNCTION move_catalog_generation();
CREATE TRIGGER tools_moves_catalog AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON tools
    FOR EACH STATEMENT EXECUTE FUNCTION move_catalog_generation();
CREATE TRIGGER skills_moves_catalog AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON skills
    FOR EACH STATEMENT EXECUTE FUNCTION move_catalog_generation();
CREATE TRIGGER skill_versions_moves_catalog AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON skill_versions
    FOR EACH STATEMENT EXECUTE FUNCTION move_catalog_generation();
CREATE TRIGGER roles_moves_catalog AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON roles
    FOR EACH STATEMENT EXECUTE FUNCTION move_catalog_generation();
CREATE TRIGGER scopes_moves_catalog AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON scopes
    FOR EACH STATEMENT EXECUTE FUNCTION move_catalog_generation();
