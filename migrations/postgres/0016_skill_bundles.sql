-- Agent Skills bundles (issue 19).
--
-- A SKILL.md may carry frontmatter beyond name and description (license, metadata,
-- allowed-tools, …): each version keeps those fields as a JSON object, and console edits
-- carry them forward. A version made by approving an uploaded SKILL.md also keeps the file
-- exactly as uploaded (`skill_md`), so its export is byte-identical; versions saved any
-- other way have none and are rendered from their fields.
-- PostgreSQL translation of migrations/sqlite/0016_skill_bundles.sql.
ALTER TABLE skill_versions ADD COLUMN frontmatter TEXT NOT NULL DEFAULT '{}';
ALTER TABLE skill_versions ADD COLUMN skill_md TEXT NULL;

-- What an upload proposes besides instructions and description: its extra frontmatter,
-- the resources of a zip's references/ (NULL: keep the base version's), the verbatim file.
ALTER TABLE skill_candidates ADD COLUMN frontmatter TEXT NULL;
ALTER TABLE skill_candidates ADD COLUMN resources TEXT NULL;
ALTER TABLE skill_candidates ADD COLUMN skill_md TEXT NULL;
