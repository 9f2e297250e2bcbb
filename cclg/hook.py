"""``cclg-hook EVENT``: the entry point agent hosts call (placeholder).

The hook events (user-prompt, post-tool, session-start, ...) arrive with the
hooks issue. Until then this command already keeps the hook's one promise: it
reads its input, prints one valid JSON object and exits 0, so registering it
can never break a host. It imports only the standard library.
"""

from __future__ import annotations

import contextlib
import json
import sys


def main() -> None:
    with contextlib.suppress(Exception):  # the hook never fails the host, whatever stdin holds
        sys.stdin.read()
    print("cclg-hook: hook events are not implemented yet; this hook adds no context", file=sys.stderr)
    print(json.dumps({}))
    sys.exit(0)
