-- Console authoring (issue 5).
--
-- A new agent key created by a form post without JavaScript cannot travel back in the
-- redirect, so it waits here for the one page render that shows it: the row is deleted as
-- it is read, is only readable by the console user who created it, and expires after a
-- minute. `token_hash` is the SHA-256 of the random token in the redirect's URL.
CREATE TABLE agent_key_reveals (
    token_hash TEXT PRIMARY KEY,
    user_id    INTEGER NOT NULL,
    payload    TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
