"""The store's ``config.json`` is read in one place (``cclg.config``): a value of the wrong type or
shape is named by doctor and falls back to its default, and no config a user can write makes a
surface crash."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from cclg.store import Store


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


def test_a_sensors_section_that_is_not_an_object_is_named_by_doctor(store: Store) -> None:
    write_config(store, sensors=True)
    doctor = cclg(store, "doctor")
    assert doctor.returncode == 1, doctor.stdout
    assert 'config.json "sensors": true is not an object' in doctor.stdout
    assert "ok: no findings" not in doctor.stdout
