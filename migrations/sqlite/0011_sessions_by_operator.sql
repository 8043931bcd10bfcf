-- Sessions know whose they are, so that signing out everywhere, or disabling an operator,
-- ends every session of that operator at once (a stolen cookie dies with its owner's).
-- NULL for a session nobody signed in with yet.
ALTER TABLE dashboard_sessions ADD COLUMN username TEXT;
CREATE INDEX dashboard_sessions_username ON dashboard_sessions (username);
