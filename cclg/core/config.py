"""The store's settings: the sections of its ``config.json`` that cclg reads, typed, with defaults.

``Store.open`` reads the file once; ``Settings`` (``store.settings``) checks each known key of each
section against what it expects and keeps the usable values. A value of the wrong type or shape is
not fatal (the hook never breaks its host over a typo): it falls back to its default, and
``ignored`` says which key, which value and what was expected, once, for ``cclg doctor`` to list.
Keys outside the sections (``schema_version``, ``format``, what another implementation writes)
are not cclg's settings and are left alone.
"""

from __future__ import annotations

import json

TYPE_CHECKING = False  # typing costs the hook ~4 ms of start-up; annotations are strings anyway
if TYPE_CHECKING:
    from typing import Any

POSITIVE = "a positive integer"
BOOLEAN = "true or false"
FOLDERS = "a list of folder paths (non-empty strings)"

SENSORS: dict[str, int] = {
    "context_window_tokens": 200_000,  # the host's context window (Claude Code's models; Codex's is larger)
    "burn_calls": 5,  # burn speaks when the recent pace would fill the window within this many calls
    "clock_steps": 50,  # clock speaks at this many tool calls since the last prompt (and each multiple)
    "clock_minutes": 30,  # or once this long has passed since it
    "pain_repeats": 3,  # pain speaks when the same failure comes back this many times in a row
    "loop_repeats": 3,  # loop speaks when the same read-only call gives the same answer this many times
    "reach_dependants": 10,  # reach speaks when an edited file is imported by this many others
}
LIMITS: dict[str, int] = {
    "memory_chars": 100_000,  # a memory's content: a note, not a document (keep documents with `cclg raw`)
    "raw_bytes": 64 * 1024 * 1024,  # one file of raw evidence (`cclg raw`)
}

# section -> key -> (default, what a usable value is); None: unset (the hook's caps are the host's)
SECTIONS: dict[str, dict[str, tuple[Any, str]]] = {
    "hook": {
        "max_chars": (None, POSITIVE),
        "max_tokens": (None, POSITIVE),
        "include_codegraph": (False, BOOLEAN),
    },
    "limits": {name: (value, POSITIVE) for name, value in LIMITS.items()},
    "mcp": {"allow_purge": (False, BOOLEAN), "code_index_repos": ((), FOLDERS)},
    "pack": {"include_confidential": (False, BOOLEAN)},
    "sensors": {name: (value, POSITIVE) for name, value in SENSORS.items()},
}


def _usable(value: Any, expected: str) -> bool:
    if expected == POSITIVE:
        return isinstance(value, int) and not isinstance(value, bool) and value > 0
    if expected == BOOLEAN:
        return isinstance(value, bool)
    return isinstance(value, list) and all(isinstance(item, str) and item for item in value)


def shown(value: Any) -> str:
    """``value`` as JSON text (ASCII, so no byte of it can upset a terminal or an encoder), cut to 80
    characters."""
    text = json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."


class Settings:
    """The usable settings of one ``config.json`` (its parsed object): ``get(section, key)``, and in
    ``ignored`` one message for each value that was left for its default."""

    def __init__(self, raw: dict[str, Any]) -> None:
        self.values: dict[str, dict[str, Any]] = {}
        self.ignored: list[str] = []
        self._written = {section: value for section, value in raw.items() if section in SECTIONS}
        for section, keys in SECTIONS.items():
            self.values[section] = {name: default for name, (default, _) in keys.items()}
            if section not in raw:
                continue
            given = raw[section]
            if not isinstance(given, dict):
                self.ignored.append(
                    f"config.json {shown(section)}: {shown(given)} is not an object; the defaults are used"
                )
                continue
            for name, value in given.items():
                self._take(section, str(name), value)

    def _take(self, section: str, name: str, value: Any) -> None:
        keys = SECTIONS[section]
        if name not in keys:
            known = ", ".join(keys)
            self.ignored.append(
                f"config.json {shown(f'{section}.{name}')} is not a setting cclg knows ({known}); ignored"
            )
            return
        default, expected = keys[name]
        if _usable(value, expected):
            self.values[section][name] = tuple(value) if isinstance(value, list) else value
            return
        fallback = "the host's cap" if default is None else shown(default)
        where = shown(f"{section}.{name}")
        self.ignored.append(f"config.json {where}: {shown(value)} is not {expected}; using {fallback}")

    def get(self, section: str, key: str) -> Any:
        """The usable value of ``key`` in ``section`` (one of ``SECTIONS``): the file's, else the default."""
        return self.values[section][key]

    def section(self, section: str) -> dict[str, Any]:
        """Every key of ``section`` with its usable value (a copy)."""
        return dict(self.values[section])

    def written(self, section: str, key: str) -> bool:
        """Whether the file itself speaks of ``key`` in ``section``: it holds the key (usable or not), or a
        ``section`` that is not an object. What cclg would set for the user it sets only where this is false,
        so a choice the user wrote, even one cclg cannot use, stays theirs."""
        given = self._written.get(section)
        return section in self._written and (not isinstance(given, dict) or key in given)
