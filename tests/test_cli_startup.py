"""Start-up of the command line: a command loads only the modules it needs (issue 17).

``cclg add`` runs in a process of its own, which then lists what it imported: the container,
doctor, the demo, the installers (and ``subprocess`` with them), the code graph and the other
commands' modules must not be among them. (``cclg.retrieval.rendering`` is, for now: it holds ``to_toml``,
which prints the result.) No timings here.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from cclg.cli import COMMAND_MODULES, cli
from cclg.core.store import Store

# Runs the command line with the arguments given, then prints every imported module on stderr.
RUN_AND_LIST_MODULES = (
    "import atexit, sys\n"
    "atexit.register(lambda: print(*sorted(sys.modules), sep='\\n', file=sys.stderr))\n"
    "from cclg.cli import main\n"
    "main()\n"
)
NOT_FOR_ADD = {
    "cclg.intake.container",
    "cclg.intake.container_import",
    "cclg.maintenance.doctor",
    "cclg.maintenance.demo",
    "cclg.ledger.redaction",
    "cclg.ledger.undo",
    "cclg.hosts.install",
    "cclg.hosts.codex_trust",
    "cclg.hook",
    "cclg.mcp_server",
    "cclg.cli.inspect",
    "cclg.cli.retrieval",
    "cclg.cli.containers",
    "cclg.cli.code",
    "cclg.cli.hosts",
    "subprocess",
}


def run_listing_modules(*args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """``cclg ARGS`` in a process of its own, and the modules it imported (its stderr lines)."""
    result = subprocess.run(
        [sys.executable, "-c", RUN_AND_LIST_MODULES, *args], capture_output=True, text=True, check=False
    )
    return result, set(result.stderr.splitlines())


def test_add_loads_only_what_adding_needs(store: Store) -> None:
    result, loaded = run_listing_modules("--root", str(store.root), "add", "--content", "Run pytest", "--source", "u")
    assert result.returncode == 0, result.stderr
    assert {"cclg.cli.memory", "cclg.intake.new_memories"} <= loaded  # it did add
    unneeded = sorted(NOT_FOR_ADD & loaded) + sorted(m for m in loaded if m.startswith("cclg.codegraph"))
    assert not unneeded, f"cclg add imported {unneeded}"


def test_help_lists_every_command_of_every_module() -> None:
    defined = {}
    for module, names in COMMAND_MODULES.items():
        commands = importlib.import_module(f"cclg.cli.{module}").COMMANDS
        assert [command.name for command in commands] == names, f"COMMAND_MODULES[{module!r}]"
        defined.update((command.name, command) for command in commands)
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    listed = [line.split()[0] for line in result.output.split("Commands:\n", 1)[1].splitlines() if line.strip()]
    assert listed == sorted(defined)
    assert all(cli.commands[name] is command for name, command in defined.items())


def test_a_mistyped_command_is_suggested_without_loading_any_command(tmp_path: Path) -> None:
    result, loaded = run_listing_modules("--root", str(tmp_path), "ad")
    assert result.returncode == 2 and "No such command 'ad'. Did you mean 'add'?" in result.stderr
    assert not {m for m in loaded if m.startswith("cclg.cli.")}
