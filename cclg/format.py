"""Schema ids, vocabularies, canonical field orders and paths of cclg.format.v0.1.

Everything here is read from the contract shipped with the package
(``cclg/contract/cclg.format.v0.1.toml``, the same file as ``format/`` at the top
of the repository), so the contract is the one place these names are written.
"""

from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path
from typing import Any

CONTRACT_FILE = "cclg.format.v0.1.toml"


@cache
def contract() -> dict[str, Any]:
    """The parsed contract (read once per process)."""
    # Package data beside this module (importlib.resources would add ~10 ms of
    # imports to every start-up, which the hook pays on each prompt).
    text = (Path(__file__).parent / "contract" / CONTRACT_FILE).read_text(encoding="utf-8")
    return tomllib.loads(text)


def _vocabulary(name: str) -> tuple[str, ...]:
    return tuple(contract()["vocabulary"][name])


def record_spec(kind: str) -> dict[str, Any]:
    """The ``[record.<kind>]`` table: schema_version, canonical_order, required."""
    spec: dict[str, Any] = contract()["record"][kind]
    return spec


def canonical_order(kind: str) -> tuple[str, ...]:
    return tuple(record_spec(kind)["canonical_order"])


def required_fields(kind: str) -> tuple[str, ...]:
    return tuple(record_spec(kind).get("required", ()))


_c = contract()
FORMAT_ID: str = _c["format"]["id"]
VERSIONS: dict[str, str] = dict(_c["versions"])
NODE_SCHEMA = VERSIONS["memory_node"]
PATCH_SCHEMA = VERSIONS["memory_patch"]
EDGE_SCHEMA = VERSIONS["memory_edge"]
SESSION_SCHEMA = VERSIONS["session"]
STORE_SCHEMA = VERSIONS["store"]
PACK_SCHEMA = VERSIONS["active_memory_pack"]

NODE_TYPES = _vocabulary("node_type")
NODE_STATUSES = _vocabulary("node_status")
PATCH_OPERATIONS = _vocabulary("patch_operation")
EDGE_KINDS = _vocabulary("edge_kind")
HOOK_EVENTS = _vocabulary("hook_event")
SCOPE_KEYS = _vocabulary("scope_keys")
SCOPE_PRECEDENCE = _vocabulary("scope_precedence")
AUDIT_EVENTS = _vocabulary("audit_event")
RELATION_KINDS = canonical_order("relations")
DOCTOR_CHECKS: tuple[str, ...] = tuple(_c["validation"]["doctor_checks"])
PATHS: dict[str, str] = dict(_c["paths"])
del _c
