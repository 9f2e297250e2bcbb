"""The contract cclg ships agrees with the reference implementation's contract.

``tests/data/reference-format.v0.1.toml`` is the contract published by the
reference implementation (cclg 0.2.3). Ours may add keys (marked "cclg
addition") but never renames, drops or reorders what the reference defines.
"""

from __future__ import annotations

import copy
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from cclg import format as fmt

DATA = Path(__file__).parent / "data"
REPO = Path(__file__).parent.parent
REFERENCE: dict[str, Any] = tomllib.loads((DATA / "reference-format.v0.1.toml").read_text(encoding="utf-8"))

REFERENCE_RECORDS = sorted(REFERENCE["record"])
REFERENCE_VOCABULARIES = sorted(REFERENCE["vocabulary"])
REFERENCE_PATHS = sorted(REFERENCE["paths"])

# Fields cclg adds to the reference's memory_patch (see the contract's comments).
PATCH_ADDITIONS = {"prior_states", "rollback_of"}
# Fields cclg adds after the reference's fields of the pack, in order: a reader of the reference ignores them.
PACK_ADDITIONS = ["possibly_related", "semantic"]


@pytest.fixture
def ours() -> dict[str, Any]:
    """A private copy of our parsed contract, so no test can change the cached one."""
    return copy.deepcopy(fmt.contract())


def is_subsequence(short: list[str], long: list[str]) -> bool:
    """True when every item of ``short`` appears in ``long`` in the same relative order."""
    remaining = iter(long)
    return all(item in remaining for item in short)


def test_is_subsequence_helper() -> None:
    assert is_subsequence(["a", "c"], ["a", "b", "c"])
    assert not is_subsequence(["c", "a"], ["a", "b", "c"])
    assert not is_subsequence(["a", "d"], ["a", "b", "c"])


def test_reference_contract_was_read() -> None:
    # Guards the parametrised tests below against silently running zero cases.
    assert {"memory_node", "memory_patch", "memory_edge", "session", "source", "relations", "retrieval"} <= set(
        REFERENCE_RECORDS
    )
    assert {"node_type", "node_status", "patch_operation", "edge_kind", "hook_event"} <= set(REFERENCE_VOCABULARIES)
    assert {"memory_node", "memory_patch", "memory_edge", "session", "audit"} <= set(REFERENCE_PATHS)


# ---------------------------------------------------------------- records


@pytest.mark.parametrize("kind", REFERENCE_RECORDS)
def test_record_canonical_order(kind: str, ours: dict[str, Any]) -> None:
    reference_order = REFERENCE["record"][kind].get("canonical_order")
    our_order = ours["record"][kind].get("canonical_order")
    if kind == "active_memory_pack":  # the reference's fields first, in its order, then cclg's
        assert our_order == reference_order + PACK_ADDITIONS
        assert not set(PACK_ADDITIONS) & set(ours["record"][kind]["required"])
        return
    if kind != "memory_patch":
        assert our_order == reference_order
        return
    # memory_patch: ours may add fields, but the reference's keep their relative order.
    assert is_subsequence(reference_order, our_order), (reference_order, our_order)
    assert [name for name in our_order if name in reference_order] == reference_order
    added = [name for name in our_order if name not in reference_order]
    assert set(added) <= PATCH_ADDITIONS, added
    # The reference implementation writes prior_states right after resolution_policy.
    assert our_order[our_order.index("resolution_policy") + 1] == "prior_states"


@pytest.mark.parametrize("kind", REFERENCE_RECORDS)
def test_record_required_fields(kind: str, ours: dict[str, Any]) -> None:
    assert ours["record"][kind].get("required") == REFERENCE["record"][kind].get("required")


@pytest.mark.parametrize("kind", REFERENCE_RECORDS)
def test_record_field_types(kind: str, ours: dict[str, Any]) -> None:
    reference_fields = REFERENCE["record"][kind].get("fields", {})
    our_fields = ours["record"][kind].get("fields", {})
    missing = sorted(set(reference_fields) - set(our_fields))
    assert not missing, f"record.{kind}.fields lacks {missing}"
    for name, type_string in reference_fields.items():
        assert our_fields[name] == type_string, f"record.{kind}.fields.{name}"


@pytest.mark.parametrize("kind", REFERENCE_RECORDS)
def test_record_scalars(kind: str, ours: dict[str, Any]) -> None:
    """schema_version, path, value and any other plain key of a record table match exactly."""
    reference_table = REFERENCE["record"][kind]
    scalars = {k: v for k, v in reference_table.items() if k not in ("canonical_order", "required", "fields")}
    assert {k: ours["record"][kind].get(k) for k in scalars} == scalars


def test_patch_additions_are_declared(ours: dict[str, Any]) -> None:
    """Every field our memory_patch adds is typed in [record.memory_patch.fields] and optional."""
    spec = ours["record"]["memory_patch"]
    reference = REFERENCE["record"]["memory_patch"]
    added = set(spec["canonical_order"]) - set(reference["canonical_order"])
    assert added == PATCH_ADDITIONS
    assert added <= set(spec["fields"])
    assert not added & set(spec["required"])


def test_pack_additions_are_declared(ours: dict[str, Any]) -> None:
    """Every field our pack adds is typed in [record.active_memory_pack.fields] and optional."""
    spec = ours["record"]["active_memory_pack"]
    assert set(PACK_ADDITIONS) <= set(spec["fields"])
    assert not set(PACK_ADDITIONS) & set(spec["required"])


def test_every_record_field_is_in_canonical_order(ours: dict[str, Any]) -> None:
    for kind, spec in ours["record"].items():
        order = spec.get("canonical_order", [])
        assert len(order) == len(set(order)), f"record.{kind}: duplicate in canonical_order"
        assert set(spec.get("required", [])) <= set(order), f"record.{kind}: required outside canonical_order"
        assert set(spec.get("fields", {})) <= set(order), f"record.{kind}: field outside canonical_order"


# ---------------------------------------------------------------- vocabularies, paths, versions


@pytest.mark.parametrize("name", REFERENCE_VOCABULARIES)
def test_vocabulary_matches_reference(name: str, ours: dict[str, Any]) -> None:
    assert ours["vocabulary"].get(name) == REFERENCE["vocabulary"][name]


@pytest.mark.parametrize("name", REFERENCE_PATHS)
def test_path_matches_reference(name: str, ours: dict[str, Any]) -> None:
    assert ours["paths"].get(name) == REFERENCE["paths"][name]


def test_versions_match_reference(ours: dict[str, Any]) -> None:
    assert ours["versions"] == REFERENCE["versions"]


def test_doctor_checks_match_reference(ours: dict[str, Any]) -> None:
    assert ours["validation"]["doctor_checks"] == REFERENCE["validation"]["doctor_checks"]


@pytest.mark.parametrize("table", ["format", "compatibility", "prompt"])
def test_other_reference_tables_match(table: str, ours: dict[str, Any]) -> None:
    assert ours[table] == REFERENCE[table]


# ---------------------------------------------------------------- the shipped file


def test_top_level_contract_is_the_packaged_contract() -> None:
    top_level = (REPO / "format" / fmt.CONTRACT_FILE).read_bytes()
    packaged = resources.files("cclg").joinpath("contract", fmt.CONTRACT_FILE).read_bytes()
    assert top_level == packaged


def test_contract_loads_the_packaged_file() -> None:
    packaged = resources.files("cclg").joinpath("contract", fmt.CONTRACT_FILE).read_text(encoding="utf-8")
    assert fmt.contract() == tomllib.loads(packaged)


# ---------------------------------------------------------------- module constants


@pytest.mark.parametrize(
    ("constant", "vocabulary"),
    [
        ("NODE_TYPES", "node_type"),
        ("NODE_STATUSES", "node_status"),
        ("PATCH_OPERATIONS", "patch_operation"),
        ("EDGE_KINDS", "edge_kind"),
        ("HOOK_EVENTS", "hook_event"),
        ("SCOPE_KEYS", "scope_keys"),
        ("SCOPE_PRECEDENCE", "scope_precedence"),
        ("AUDIT_EVENTS", "audit_event"),
    ],
)
def test_vocabulary_constants(constant: str, vocabulary: str, ours: dict[str, Any]) -> None:
    value = getattr(fmt, constant)
    assert isinstance(value, tuple)
    assert list(value) == ours["vocabulary"][vocabulary]
    assert value, f"{constant} is empty"
    if vocabulary in REFERENCE["vocabulary"]:
        assert list(value) == REFERENCE["vocabulary"][vocabulary]


def test_other_constants(ours: dict[str, Any]) -> None:
    assert fmt.FORMAT_ID == ours["format"]["id"] == "cclg.format.v0.1"
    assert ours["versions"] == fmt.VERSIONS
    assert fmt.NODE_SCHEMA == ours["record"]["memory_node"]["schema_version"] == "cclg.memory_node.v0.1"
    assert ours["record"]["memory_patch"]["schema_version"] == fmt.PATCH_SCHEMA
    assert ours["record"]["memory_edge"]["schema_version"] == fmt.EDGE_SCHEMA
    assert ours["record"]["session"]["schema_version"] == fmt.SESSION_SCHEMA
    assert ours["record"]["active_memory_pack"]["schema_version"] == fmt.PACK_SCHEMA
    assert ours["versions"]["store"] == fmt.STORE_SCHEMA
    assert list(fmt.RELATION_KINDS) == ours["record"]["relations"]["canonical_order"]
    assert list(fmt.DOCTOR_CHECKS) == ours["validation"]["doctor_checks"]
    assert ours["paths"] == fmt.PATHS


@pytest.mark.parametrize("kind", sorted(fmt.contract()["record"]))
def test_accessors(kind: str, ours: dict[str, Any]) -> None:
    spec = ours["record"][kind]
    assert fmt.record_spec(kind) == spec
    assert fmt.canonical_order(kind) == tuple(spec["canonical_order"])
    assert fmt.required_fields(kind) == tuple(spec.get("required", ()))


def test_scope_vocabularies_are_consistent() -> None:
    # Every precedence level but the last ("global") is a scope key.
    assert fmt.SCOPE_PRECEDENCE[-1] == "global"
    assert set(fmt.SCOPE_PRECEDENCE[:-1]) <= set(fmt.SCOPE_KEYS)
    # The scope field type of a node names exactly the scope keys, in order.
    scope_type = fmt.record_spec("memory_node")["fields"]["scope"]
    assert scope_type == "{" + ",".join(fmt.SCOPE_KEYS) + "}"


def test_compiled_contract_is_up_to_date() -> None:
    """The JSON the package reads is exactly the TOML source compiled; fix with `python -m cclg.format`."""
    compiled = Path(fmt.CONTRACT_DIR) / fmt.COMPILED_FILE
    assert compiled.read_text(encoding="utf-8") == fmt.compiled_contract(), "run `python -m cclg.format`"
    assert fmt.contract() == fmt.contract_from_toml()


def test_compiled_contract_is_packaged() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    data = pyproject["tool"]["setuptools"]["package-data"]["cclg"]
    assert f"contract/{fmt.COMPILED_FILE}" in data or "contract/*.json" in data
