"""The portable .cclg container: conformance with the reference fixtures, writing, loading, importing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cclg.container import ContainerError, load_container, write_container
from cclg.errors import UnknownPatchOperationError

CONFORMANCE = Path(__file__).parent / "conformance"
POSITIVE = sorted(p.stem for p in CONFORMANCE.glob("0[1-6]_*.cclg"))


def fixture(name: str) -> tuple[str, dict]:
    return (CONFORMANCE / f"{name}.cclg").read_text("utf-8"), json.loads(
        (CONFORMANCE / f"{name}.expected.json").read_text("utf-8")
    )


def test_all_eight_fixtures_are_here() -> None:
    assert len(POSITIVE) == 6
    assert len(list(CONFORMANCE.glob("0[1-8]_*.cclg"))) == 8


@pytest.mark.parametrize("name", POSITIVE)
def test_conformance_effective_view(name: str) -> None:
    text, expected = fixture(name)
    container = load_container(text)
    view = container.effective_view(expected["session_id"])
    assert [n.id for n in view] == sorted(expected["effective_view_node_ids"])


@pytest.mark.parametrize("name", POSITIVE)
def test_conformance_fixtures_are_written_back_byte_for_byte(name: str) -> None:
    """Our writer frames the reference's records exactly as the reference did."""
    text, _ = fixture(name)
    container = load_container(text)
    rewritten = write_container(
        container.nodes,
        container.patches,
        container.edges,
        container.sessions,
        generated_at=container.header["generated_at"],
    )
    assert rewritten == text


def test_conformance_07_unknown_operation() -> None:
    text, expected = fixture("07_unknown_patch_operation")
    assert expected["expect_error"] == "load_default_and_effective_view"
    with pytest.raises(ContainerError, match="archive"):
        load_container(text)
    unvalidated = load_container(text, validate=False)
    with pytest.raises(UnknownPatchOperationError, match="archive"):
        unvalidated.effective_view()


def test_conformance_08_forbidden_auth_field() -> None:
    text, expected = fixture("08_forbidden_auth_field")
    assert expected["expect_error"] == "load_always"
    for validate in (True, False):
        with pytest.raises(ContainerError, match="org_id"):
            load_container(text, validate=validate)
