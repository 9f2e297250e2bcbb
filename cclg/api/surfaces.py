"""What the surfaces (the command line, the MCP tools, the hook) share besides the operations.

The label vocabularies their options offer; how many questions a memory may carry, and how long
(``MAX_QUESTIONS``, ``QUESTION_CHARS``); showing outside text on a terminal and in JSON or
TOML without anything in it turning active (``terminal_text``, ``escape_invisible``); a
``--project`` value as a filter (``project_filter``) and the repository folder holding a folder
(``git_root``); the bytes of a file given as input, a
regular file only (``read_regular``). They are the library's so that a surface imports only the
library (``tests/test_architecture.py`` holds it); they are not in ``cclg.__all__``, which is
the operations and their records.
"""

from __future__ import annotations

from cclg.core.fencing import escape_invisible, terminal_text
from cclg.core.files import read_regular
from cclg.core.labels import DEFAULT_RETENTION, DEFAULT_SENSITIVITY, RETENTION, SENSITIVITY, TRUST
from cclg.core.records import MAX_QUESTIONS, QUESTION_CHARS
from cclg.core.repository import git_root, project_filter

__all__ = [
    "DEFAULT_RETENTION",
    "DEFAULT_SENSITIVITY",
    "MAX_QUESTIONS",
    "QUESTION_CHARS",
    "RETENTION",
    "SENSITIVITY",
    "TRUST",
    "escape_invisible",
    "git_root",
    "project_filter",
    "read_regular",
    "terminal_text",
]
