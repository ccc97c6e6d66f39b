-- Skill revisions (WikiSkill candidates), wiki patterns and human feedback.
-- A candidate is a proposed new version of a skill with cited sources, evidence and the
-- gate verdict the server computed; a human decides it. Approval creates a row in
-- skill_versions through the catalog store and links it here (approved_version).
-- PostgreSQL translation of migrations/sqlite/0007_skill_revisions.sql.
CREATE TABLE skill_candidates (
    id                  TEXT PRIMARY KEY,
    skill               TEXT NOT NULL REFERENCES skills (slug) ON DELETE CASCADE,
    base_version        BIGINT NOT NULL,
    description         TEXT NULL,
    instructions        TEXT NOT NULL,
    note                TEXT NOT NULL,
    sources             TEXT NOT NULL,
    evidence            TEXT NULL,
    verdict             TEXT NOT NULL,
    verdict_explanation TEXT NOT NULL,
    proposer_kind       TEXT NOT NULL CHECK (proposer_kind IN ('agent', 'user')),
    proposer            TEXT NOT NULL,
    status              TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved', 'rejected')),
    decided_by          TEXT NULL,
    reason              TEXT NULL,
    decided_at          TEXT NULL,
    approved_version    BIGINT NULL,
    created_at          TEXT NOT NULL
);
CREATE INDEX skill_candidates_status ON skill_candidates (status, created_at);
CREATE INDEX skill_candidates_skill ON skill_candidates (skill, created_at);

-- Distilled, cited lessons about a skill, written by curators.
CREATE TABLE wiki_patterns (
    id         TEXT PRIMARY KEY,
    skill      TEXT NOT NULL REFERENCES skills (slug) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    content    TEXT NOT NULL,
    sources    TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (skill, name)
);

-- Reviewers add feedback in the console too: general, or an explicit requirement that the
-- paired gate holds candidates to.
ALTER TABLE skill_feedback ADD COLUMN kind TEXT NOT NULL DEFAULT 'general' CHECK (kind IN ('general', 'requirement'));
ALTER TABLE skill_feedback ADD COLUMN author TEXT NULL;
