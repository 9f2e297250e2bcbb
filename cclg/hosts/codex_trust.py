"""Trust in Codex for the hooks ``cclg install codex`` wrote.

Codex runs a hook only once the user has trusted it: it keeps, per hook, the hash of the
handler the user approved in ``[hooks.state."<key>"] trusted_hash`` of the user's
``config.toml``, and asks again when the handler changes. Running ``cclg install codex`` is
the user's approval of cclg's own handlers, so install records that trust too (unless told
not to), for exactly those handlers: a hook whose command is ``cclg-hook ...`` and whose
file is the ``hooks.json`` install wrote. Nothing else is trusted.

The keys and hashes are Codex's own: its app server (``codex app-server``, JSON-RPC on
stdin and stdout) lists them with ``hooks/list``, so no hashing rule of Codex is copied
here. The tables install adds carry a marker comment; ``uninstall`` removes exactly those.
Without ``codex`` on the PATH, or when it does not answer, nothing is recorded and the
user trusts the hooks in Codex's ``/hooks``.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from cclg.core.fields import parse_json
from cclg.hosts import config_text

MARKER = "# cclg install: trusts the cclg-hook it installed"
ASK_TIMEOUT_S = 10.0  # it answers in well under a second; a Codex that hangs costs install this much
_REQUESTS = [
    {"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "cclg-install", "version": "1"}}},
    {"method": "initialized"},
]


def untrusted_hooks(hooks_file: Path, cwd: Path, codex: str | None = None) -> list[tuple[str, str]] | None:
    """(key, hash) of each cclg-hook handler in ``hooks_file`` that Codex does not trust yet, as
    Codex's app server lists them for ``cwd``; None when Codex cannot be asked."""
    codex = codex or shutil.which("codex")
    if codex is None:
        return None
    answer = _ask(codex, cwd, {"id": 2, "method": "hooks/list", "params": {"cwds": [str(cwd)]}})
    if answer is None:
        return None
    found = []
    for entry in answer.get("data", []):
        for hook in entry.get("hooks", []) if isinstance(entry, dict) else []:
            ours = str(hook.get("command", "")).split(" ")[0] == "cclg-hook"
            if ours and hook.get("sourcePath") == str(hooks_file) and hook.get("trustStatus") == "untrusted":
                found.append((str(hook["key"]), str(hook["currentHash"])))
    return found


def _ask(codex: str, cwd: Path, request: dict[str, Any]) -> dict[str, Any] | None:
    """The result of one JSON-RPC request to a fresh ``codex app-server``, or None."""
    import subprocess  # here: doctor imports this module (through install) and needs none of it

    try:
        process = subprocess.Popen(
            [codex, "app-server"],
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
    except OSError:
        return None
    assert process.stdin is not None and process.stdout is not None
    try:
        lines = [json.dumps(message) for message in [*_REQUESTS, request]]
        process.stdin.write(("\n".join(lines) + "\n").encode())
        process.stdin.flush()
        return _read_answer(process.stdout.fileno(), request["id"], time.monotonic() + ASK_TIMEOUT_S)
    except OSError:
        return None
    finally:
        process.stdin.close()  # the app server stops at the end of its input
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stdout.close()


def _read_answer(fd: int, request_id: int, deadline: float) -> dict[str, Any] | None:
    import selectors

    pending = b""
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not selector.select(timeout=max(0.0, deadline - time.monotonic())):
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                try:
                    message = parse_json(line)
                except ValueError:  # not JSON, or nested too deep
                    continue
                if isinstance(message, dict) and message.get("id") == request_id:
                    result = message.get("result")
                    return result if isinstance(result, dict) else None
    return None


def with_trust(text: str, entries: list[tuple[str, str]]) -> str:
    """``text`` (a Codex ``config.toml``) with a marked ``[hooks.state."<key>"]`` table per entry at its
    end, replacing the marked tables already there for the same keys."""
    text = without_trust(text, {key for key, _ in entries})
    for key, digest in entries:
        text = config_text.toml_append_table(
            text, [f"[hooks.state.{_quoted(key)}]  {MARKER}", f"trusted_hash = {_quoted(digest)}"]
        )
    return text


def without_trust(text: str, keys: set[str] | None = None) -> str:
    """``text`` without the marked trust tables (those for ``keys`` only, when given), each with the blank
    line ``with_trust`` put before it."""

    def ours(header: str) -> bool:
        return header.rstrip().endswith(MARKER) and (keys is None or _table_key(header) in keys)

    return config_text.toml_remove_tables(text, ours)


def marked_keys(text: str) -> list[str]:
    """The keys of the marked trust tables in ``text``."""
    return [
        _table_key(line)
        for line in text.split("\n")
        if line.lstrip().startswith("[") and line.rstrip().endswith(MARKER)
    ]


def _table_key(header: str) -> str:
    """The key of a marked header line, ``[hooks.state."<key>"]  <marker>``."""
    body = header.strip()[: -len(MARKER)].rstrip()
    quoted = body.removeprefix("[hooks.state.").removesuffix("]")
    try:
        return str(parse_json(quoted))
    except ValueError:
        return quoted


def _quoted(value: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's, with the characters kept as they are)."""
    return json.dumps(value, ensure_ascii=False)
