"""Schema ids, vocabularies, canonical field orders and paths of cclg.format.v0.1.

Everything here is read from the contract shipped with the package
(``cclg/contract/cclg.format.v0.1.toml``, the same file as ``format/`` at the top
of the repository), so the contract is the one place these names are written.

At run time the package reads the same contract compiled to JSON
(``cclg.format.v0.1.json`` beside it): parsing TOML costs every start-up about
6 ms, which the hook would pay on each prompt; JSON costs a tenth of a millisecond.
After editing the TOML, run ``python -m cclg.format`` to compile it again; a test
fails while the two disagree.
"""

from __future__ import annotations

import json
import os
from functools import cache

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

CONTRACT_FILE = "cclg.format.v0.1.toml"
COMPILED_FILE = "cclg.format.v0.1.json"
# Package data beside this module (importlib.resources would add ~10 ms of
# imports to every start-up).
CONTRACT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "contract")


@cache
def contract() -> dict[str, Any]:
    """The contract (read once per process, from its compiled JSON)."""
    with open(os.path.join(CONTRACT_DIR, COMPILED_FILE), encoding="utf-8") as file:
        data: dict[str, Any] = json.load(file)
    return data


def contract_from_toml() -> dict[str, Any]:
    """The contract parsed from its TOML source."""
    import tomllib

    with open(os.path.join(CONTRACT_DIR, CONTRACT_FILE), "rb") as file:
        return tomllib.load(file)


def compiled_contract() -> str:
    """The JSON text ``contract()`` reads, compiled from the TOML source."""
    return json.dumps(contract_from_toml(), ensure_ascii=False, indent=1) + "\n"


def _vocabulary(name: str) -> tuple[str, ...]:
    return tuple(contract()["vocabulary"][name])


def record_spec(kind: str) -> dict[str, Any]:
    """The ``[record.<kind>]`` table: schema_version, canonical_order, required."""
    spec: dict[str, Any] = contract()["record"][kind]
    return spec


@cache  # asked once per record read: a doctor or a rebuild reads 100,000
def canonical_order(kind: str) -> tuple[str, ...]:
    return tuple(record_spec(kind)["canonical_order"])


@cache
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
HOOK_EVENTS_HANDLED = HOOK_EVENTS + _vocabulary("hook_event_added")  # what cclg-hook answers to
SCOPE_KEYS = _vocabulary("scope_keys")
SCOPE_PRECEDENCE = _vocabulary("scope_precedence")
AUDIT_EVENTS = _vocabulary("audit_event")
RELATION_KINDS = canonical_order("relations")
DOCTOR_CHECKS: tuple[str, ...] = tuple(_c["validation"]["doctor_checks"])
PATHS: dict[str, str] = dict(_c["paths"])
del _c


def main() -> None:
    """``python -m cclg.format``: compile the TOML contract to the JSON the package reads."""
    path = os.path.join(CONTRACT_DIR, COMPILED_FILE)
    with open(path, "w", encoding="utf-8") as file:
        file.write(compiled_contract())
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
