"""The README's first lines are the two commands a new user runs; CI runs the second one."""

from __future__ import annotations

from tests.conftest import REPO


def readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = text.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def test_readme_opens_with_the_install_and_test_commands() -> None:
    install, test = readme_commands()
    assert "pip install ." in install and "--root demo-store pack" in install and "demo-store doctor" in install
    assert "'.[test]'" in test and "pytest" in test


def test_ci_runs_the_readme_test_command() -> None:
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert readme_commands()[1] in ci.splitlines()
