"""The hook's events, each named once.

Inside cclg an event is one of the constants below, spelled as the hook is called with it
(``cclg-hook post-compact``), the way the contract's ``hook_event`` and the host templates
spell it. The host's own name (``PostCompact``) appears only at the edge, in
``cclg.hook.HOST_EVENTS``, where the hook answers the host.

A session's log (``sessions/<id>.events.jsonl``) has named each event with underscores since
its first version (``post_compact``). That is data on disk: ``logged`` gives the name an event
has there, and code that reads a log asks for ``logged(POST_COMPACT)`` instead of spelling it.
Standard library only, nothing imported: the hook imports this module at start-up.
"""

from __future__ import annotations

USER_PROMPT = "user-prompt"
POST_TOOL = "post-tool"
POST_TOOL_FAILURE = "post-tool-failure"
SESSION_START = "session-start"
PRE_COMPACT = "pre-compact"
POST_COMPACT = "post-compact"
STOP = "stop"
SESSION_END = "session-end"

EVENTS = (USER_PROMPT, POST_TOOL, POST_TOOL_FAILURE, SESSION_START, PRE_COMPACT, POST_COMPACT, STOP, SESSION_END)


def logged(event: str) -> str:
    """The name ``event`` has in a session's log: its hyphens written as underscores (``post_compact``)."""
    return event.replace("-", "_")
