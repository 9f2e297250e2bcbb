"""The store's ``config.json`` is read in one place (``cclg.core.config``): a value of the wrong type or
shape is named by doctor and falls back to its default, and no config a user can write makes a
surface crash."""

from __future__ import annotations

import contextlib
import json
import subprocess
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cclg import api, mcp_tools
from cclg import format as fmt
from cclg.cli import cli
from cclg.core.config import SECTIONS, Settings
from cclg.core.store import Store
from cclg.errors import CclgError, UsageError
from cclg.hook import handle, hook_settings, respond
from cclg.learning import sensors
from cclg.maintenance import doctor
from tests.test_hook import claude_prompt


def write_config(store: Store, **sections: Any) -> None:
    path = store.root / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **sections}))


def cclg(store: Store, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["cclg", "--root", str(store.root), *args], capture_output=True, text=True, timeout=60)


def test_a_pack_section_that_is_not_an_object_is_named_by_doctor_and_pack_still_answers(store: Store) -> None:
    write_config(store, pack=True)
    packed = cclg(store, "pack", "--query", "anything")
    assert packed.returncode == 0, packed.stderr
    assert "Traceback" not in packed.stderr
    doctor = cclg(store, "doctor")
    assert doctor.returncode == 1, doctor.stdout
    assert 'config.json "pack": true is not an object' in doctor.stdout


def test_written_says_whether_the_file_speaks_of_a_key_usable_or_not() -> None:
    """What cclg would set for the user (``cclg install``'s code-graph setting) it sets only where the
    file says nothing: a value it cannot use, or a section that is no object, is still the user's."""
    assert not Settings({}).written("hook", "include_codegraph")
    assert not Settings({"hook": {"max_chars": 6000}}).written("hook", "include_codegraph")
    assert Settings({"hook": {"include_codegraph": False}}).written("hook", "include_codegraph")
    assert Settings({"hook": {"include_codegraph": "yes"}}).written("hook", "include_codegraph")
    assert Settings({"hook": True}).written("hook", "include_codegraph")
    assert not Settings({"pack": {"include_confidential": True}}).written("hook", "include_codegraph")


def test_a_sensors_section_that_is_not_an_object_is_named_by_doctor(store: Store) -> None:
    write_config(store, sensors=True)
    doctor = cclg(store, "doctor")
    assert doctor.returncode == 1, doctor.stdout
    assert 'config.json "sensors": true is not an object' in doctor.stdout
    assert "ok: no findings" not in doctor.stdout


def test_a_bad_value_names_its_key_its_value_and_what_is_expected_and_keeps_the_default(store: Store) -> None:
    write_config(store, sensors={"clock_steps": "fifty", "loop_repeats": 2, "pain_repat": 4}, hook={"max_chars": 0})
    opened = Store.open(store.root)
    assert sensors.settings(opened) == {**sensors.DEFAULTS, "loop_repeats": 2}
    assert hook_settings(opened) == {"include_codegraph": False}, "no cap of the store's: the host's"
    assert opened.settings.ignored == [
        'config.json "hook.max_chars": 0 is not a positive integer; using the host\'s cap',
        'config.json "sensors.clock_steps": "fifty" is not a positive integer; using 50',
        'config.json "sensors.pain_repat" is not a setting cclg knows (context_window_tokens, burn_calls, '
        "clock_steps, clock_minutes, pain_repeats, loop_repeats, reach_dependants); ignored",
    ]


def test_a_purge_allowed_by_anything_but_true_stays_off_and_doctor_says_why(store: Store) -> None:
    write_config(store, mcp={"allow_purge": "yes"}, pack={"include_confidential": 1})
    opened = Store.open(store.root)
    with pytest.raises(UsageError, match="purging through MCP is off"):
        mcp_tools.memory_purge(opened, "mem_" + "0" * 26, "asked", "mem_" + "0" * 26)
    assert opened.settings.get("pack", "include_confidential") is False, "confidential memories stay out"
    report = doctor.diagnose(opened)
    assert [f.message for f in report.findings if f.check == doctor.CONFIG] == [
        'config.json "mcp.allow_purge": "yes" is not true or false; using false',
        'config.json "pack.include_confidential": 1 is not true or false; using false',
    ]


def test_doctor_repair_lists_a_bad_value_and_leaves_the_users_config_as_it_is(store: Store) -> None:
    write_config(store, limits={"memory_chars": -5})
    before = (store.root / "config.json").read_bytes()
    result = CliRunner().invoke(cli, ["--root", str(store.root), "doctor", "--repair", "--json"])
    assert result.exit_code == 1, result.output
    messages = [f["message"] for f in json.loads(result.output)["findings"]]
    assert messages == ['config.json "limits.memory_chars": -5 is not a positive integer; using 100000']
    assert (store.root / "config.json").read_bytes() == before


def test_an_mcp_server_sees_the_users_edit_of_config_json_at_its_next_call(store: Store) -> None:
    opened = Store.open(store.root)
    assert opened.settings.get("mcp", "allow_purge") is False
    write_config(store, mcp={"allow_purge": True}, padding="the file's size changes with its content")
    assert opened.settings.get("mcp", "allow_purge") is True
    (store.root / "config.json").write_text("{not json")
    assert opened.settings.get("mcp", "allow_purge") is True, "a file that no longer parses keeps what it had"


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 2**70) | st.floats() | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=5,
)


def _section(keys: list[str]) -> st.SearchStrategy[Any]:
    values = JSON_VALUES | st.integers(1, 100) | st.lists(st.just("."), max_size=2)
    return JSON_VALUES | st.dictionaries(st.sampled_from([*keys, "typo"]), values, max_size=4)


CONFIGS = st.fixed_dictionaries(
    {}, optional={name: _section(list(keys)) for name, keys in {**SECTIONS, "unknown": {}}.items()}
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sections=CONFIGS)
def test_no_config_a_user_can_write_makes_a_surface_crash(store: Store, sections: dict[str, Any]) -> None:
    """Property: whatever JSON stands at each known key (and at unknown ones), pack answers (0), doctor
    lists each ignored value as a finding (1, else 0), the hook answers without a failure, and MCP
    calls that read the config answer or refuse with cclg's own error."""
    base = {"schema_version": fmt.STORE_SCHEMA, "format": fmt.FORMAT_ID}
    (store.root / "config.json").write_text(json.dumps({**base, **sections}))
    root = ["--root", str(store.root)]
    packed = CliRunner().invoke(cli, [*root, "pack", "--query", "tests"])
    assert packed.exit_code == 0 and packed.exception is None, packed.output
    checked = CliRunner().invoke(cli, [*root, "doctor", "--json"])
    ignored = Settings(json.loads((store.root / "config.json").read_text())).ignored
    assert checked.exit_code == (1 if ignored else 0), checked.output
    assert [f["message"] for f in json.loads(checked.output)["findings"]] == ignored
    answer = respond("user-prompt", handle("user-prompt", claude_prompt("tests"), "claude", str(store.root), False))
    json.dumps(answer)
    assert not store.hook_failures_path.exists()
    opened = Store.open(store.root)
    for call in (
        lambda: mcp_tools.memory_purge(opened, "mem_" + "0" * 26, "asked", "mem_" + "0" * 26),
        lambda: api.allowed_repository(opened, str(store.root)),
    ):
        with contextlib.suppress(CclgError):
            call()


NASTY = {"pack": True, "sensors": [1], "hook": {"max_chars": "x", "max_tokens": 1.5}, "limits": "big", "mcp": 0}


@pytest.mark.parametrize("text", [b"{not json", b"\xff\xfe\x00", b"[]", json.dumps(NASTY).encode()])
def test_a_config_that_is_no_object_or_holds_bad_values_gets_exit_codes_never_a_traceback(
    store: Store, text: bytes
) -> None:
    config = {"schema_version": fmt.STORE_SCHEMA, **NASTY} if text.startswith(b'{"') else None
    (store.root / "config.json").write_bytes(json.dumps(config).encode() if config else text)
    readable = config is not None
    root = ["--root", str(store.root)]
    packed = CliRunner().invoke(cli, [*root, "pack", "--query", "tests"])
    checked = CliRunner().invoke(cli, [*root, "doctor"])
    assert (packed.exit_code, checked.exit_code) == ((0, 1) if readable else (3, 3)), packed.output + checked.output
    assert not isinstance(packed.exception, Exception) or isinstance(packed.exception, SystemExit)
    hooked = subprocess.run(
        ["cclg-hook", "user-prompt", "--root", str(store.root)],
        input=json.dumps(claude_prompt("tests")),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert hooked.returncode == 0 and isinstance(json.loads(hooked.stdout), dict), hooked.stderr
    assert "Traceback" not in hooked.stderr
    assert not store.hook_failures_path.exists(), "bad values are no failure; a store that cannot open has no log"
    assert readable or "config.json is not readable as a store config" in checked.output
