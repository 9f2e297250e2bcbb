-- A claude-mem database, shaped as its schema declares the tables cclg reads (written for these tests).
CREATE TABLE sdk_sessions (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  content_session_id TEXT UNIQUE NOT NULL,
  memory_session_id TEXT UNIQUE,
  project TEXT NOT NULL,
  platform_source TEXT NOT NULL DEFAULT 'claude',
  user_prompt TEXT,
  started_at TEXT NOT NULL,
  started_at_epoch INTEGER NOT NULL,
  completed_at TEXT,
  completed_at_epoch INTEGER,
  status TEXT NOT NULL DEFAULT 'active'
);
CREATE TABLE observations (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  memory_session_id TEXT NOT NULL,
  project TEXT NOT NULL,
  text TEXT,
  type TEXT NOT NULL,
  title TEXT,
  subtitle TEXT,
  facts TEXT,
  narrative TEXT,
  concepts TEXT,
  files_read TEXT,
  files_modified TEXT,
  prompt_number INTEGER,
  discovery_tokens INTEGER DEFAULT 0,
  content_hash TEXT,
  created_at TEXT NOT NULL,
  created_at_epoch INTEGER NOT NULL
);
CREATE TABLE session_summaries (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  memory_session_id TEXT NOT NULL,
  project TEXT NOT NULL,
  request TEXT,
  investigated TEXT,
  learned TEXT,
  completed TEXT,
  next_steps TEXT,
  files_read TEXT,
  files_edited TEXT,
  notes TEXT,
  prompt_number INTEGER,
  created_at TEXT NOT NULL,
  created_at_epoch INTEGER NOT NULL
);
INSERT INTO sdk_sessions (content_session_id, memory_session_id, project, user_prompt, started_at, started_at_epoch, status)
VALUES ('3f2a9c1e-claude', 'mem-3f2a9c1e', 'shop', 'why does checkout time out?', '2026-11-18T10:00:00Z', 1795000000, 'completed');
INSERT INTO observations (memory_session_id, project, type, title, subtitle, facts, narrative, concepts, files_read, files_modified, prompt_number, created_at, created_at_epoch)
VALUES ('mem-3f2a9c1e', 'shop', 'bugfix', 'Checkout timeout traced to the tax service',
        'A 30 s default timeout', '["The tax client had no timeout", "A 5 s timeout with one retry fixed it"]',
        'The checkout hung when the tax service was slow; the client now times out after 5 seconds.',
        '["how-it-works", "problem-solution"]', '["src/tax/client.py"]', '["src/tax/client.py"]', 1,
        '2026-11-18T10:20:00Z', 1795001200);
INSERT INTO observations (memory_session_id, project, type, title, facts, narrative, concepts, prompt_number, created_at, created_at_epoch)
VALUES ('mem-3f2a9c1e', 'shop', 'decision', 'Retries only for idempotent calls', '[]',
        'Only GET calls to the tax service are retried; POSTs are never retried.', '["pattern"]', 2,
        '2026-11-18T10:40:00Z', 1795002400);
INSERT INTO session_summaries (memory_session_id, project, request, investigated, learned, completed, next_steps, prompt_number, created_at, created_at_epoch)
VALUES ('mem-3f2a9c1e', 'shop', 'Fix the checkout timeout', 'The tax client and its settings',
        'The tax service client must always be given an explicit timeout.', 'Added a 5 s timeout and a retry', 'Add a metric for tax latency', 2,
        '2026-11-18T10:45:00Z', 1795002700);
