-- Sharing one upstream into several workspaces (issue #55; docs/architecture.md, "Sharing
-- one upstream into several workspaces"). The platform database keeps the upstream and,
-- in `upstream_shares`, the workspaces it is shared into. Each of those workspaces holds a
-- copy of the upstream's rows (config, credentials, tools with their pins, identity pin)
-- whose `upstreams.shared_from` names the workspace it comes from: that workspace's door
-- refuses to change it. Not NULL only in a workspace's database; NULL: its own upstream.
CREATE TABLE upstream_shares (
    upstream  TEXT NOT NULL REFERENCES upstreams (name),
    workspace TEXT NOT NULL REFERENCES workspaces (slug),
    shared_by TEXT NOT NULL,
    shared_at TEXT NOT NULL,
    PRIMARY KEY (upstream, workspace)
);

ALTER TABLE upstreams ADD COLUMN shared_from TEXT NULL;
