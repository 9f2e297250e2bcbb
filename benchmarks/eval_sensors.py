"""Evaluation of the sensors and rules (issue 18).

Run by hand (not part of the test suite):

    python benchmarks/eval_sensors.py [--split all|tune|held-out] [--json FILE]

The sessions come from ``sensor_sessions.jsonl.gz`` (its header's ``about`` says how they were made):
synthetic transcripts in both hosts' payload shapes
(Claude Code 2.1 and Codex 0.171, as observed from the real CLIs), nominal work and work with one
planted problem each (the same failure again and again, an edit of a file many others import, a
loop of identical reads, a runaway of huge outputs, a long stretch without the user). Its
repository is written to a temporary folder, committed to git and indexed (``build_graph``), so
reach reads a real code graph. Each session runs on its own copy of one store holding that graph,
every event through ``cclg.hook.handle`` (what ``cclg-hook`` runs), and what the sensors said is
read back from the session's log.

Reported, per split (tune / held-out) and host:
- planted problems: detected by the right sensor at the right step (exact), early, late or missed;
- nominal sessions: how many got no sensor output at all (target: 49 of 50);
- escalation: pain sessions whose levels run 0, 1, 2 at the 3rd, 4th and 5th failure exactly;
- reinforcement: 100 simulated sessions through the hook with an agent that, given the rule,
  avoids the failure 9 times in 10; how often the rule opened a session, whether it was ever
  dropped, and for contrast the same stream under a time-decayed confidence (a simulation here,
  not cclg code): how many times it dropped the rule and how many failures came back.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cclg.codegraph.build import build_graph
from cclg.core.store import Store
from cclg.hook import handle

GIT_ENV = {"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@x", "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@x"}
SESSIONS_FILE = Path(__file__).resolve().parent / "sensor_sessions.jsonl.gz"  # 23 MB as text: the runaway outputs


@dataclass
class Session:
    """One hook transcript: ``events`` are [hook event, payload] pairs; ``expect_step`` is the index of
    the tool event at which the planted problem first becomes true (None for nominal sessions; the
    data file's header defines it per kind)."""

    name: str
    host: str
    split: str
    kind: str
    events: list[list[Any]]
    expect_step: int | None


def load_sessions(path: Path = SESSIONS_FILE) -> tuple[dict[str, Any], list[Session]]:
    """The data file's header (``about``, ``repo_placeholder``, ``repo_files``...) and its sessions, one a line."""
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        header = json.loads(next(lines))
        return header, [Session(**json.loads(line)) for line in lines]


def make_repo(folder: Path, files: dict[str, str]) -> Path:
    for path, text in files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text, encoding="utf-8")
    for command in (["init", "-q"], ["add", "."], ["commit", "-qm", "start"]):
        subprocess.run(["git", *command], cwd=folder, check=True, env={**os.environ, **GIT_ENV})
    return folder


def placed(value: Any, placeholder: str, repo: str) -> Any:
    """``value`` with the repository placeholder replaced by the real folder."""
    if isinstance(value, str):
        return value.replace(placeholder, repo)
    if isinstance(value, dict):
        return {k: placed(v, placeholder, repo) for k, v in value.items()}
    if isinstance(value, list):
        return [placed(v, placeholder, repo) for v in value]
    return value


def run_session(
    session: Session, template: Path, work: Path, placeholder: str, repo: str
) -> dict[int, list[dict[str, Any]]]:
    """{event index: the signals post-tool recorded for it} for one session on a fresh copy of the store."""
    root = work / "store"
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(template, root)
    store = Store.open(root)
    signals: dict[int, list[dict[str, Any]]] = {}
    for index, (event, payload) in enumerate(session.events):
        handle(event, placed(payload, placeholder, repo), session.host, str(root))
        if event.startswith("post-tool"):
            path = store.session_events_path(str(payload["session_id"]))
            last = json.loads(path.read_bytes().splitlines()[-1])
            step = (last.get("summary") or {}).get("step") or {}
            if step.get("signals"):
                signals[index] = step["signals"]
    return signals


def judge(session: Session, signals: dict[int, list[dict[str, Any]]]) -> dict[str, Any]:
    fired = sorted((i, s["sensor"], s["level"]) for i, found in signals.items() for s in found)
    verdict: dict[str, Any] = {"name": session.name, "kind": session.kind, "host": session.host, "split": session.split}
    verdict["fired"] = fired
    if session.kind == "nominal":
        verdict["silent"] = not fired
        return verdict
    own = [i for i, sensor, _ in fired if sensor == session.kind]
    first = own[0] if own else None
    expect = session.expect_step
    verdict["outcome"] = (
        "missed" if first is None else "exact" if first == expect else "early" if first < (expect or 0) else "late"
    )
    verdict["others_before"] = sorted({s for i, s, _ in fired if s != session.kind and (first is None or i < first)})
    if session.kind == "pain":
        verdict["levels"] = [level for _, sensor, level in fired if sensor == "pain"][:3]
    return verdict


def report(verdicts: list[dict[str, Any]]) -> dict[str, Any]:
    table: dict[str, Any] = {}
    for split in ("tune", "held-out"):
        rows = [v for v in verdicts if v["split"] == split]
        nominal = [v for v in rows if v["kind"] == "nominal"]
        entry: dict[str, Any] = {"nominal_silent": f"{sum(v['silent'] for v in nominal)} of {len(nominal)}"}
        for kind in ("pain", "reach", "loop", "burn", "clock"):
            planted = [v for v in rows if v["kind"] == kind]
            entry[kind] = dict(Counter(v["outcome"] for v in planted)) | {"of": len(planted)}
        pains = [v for v in rows if v["kind"] == "pain"]
        entry["escalation_exact"] = f"{sum(v['levels'] == [0, 1, 2] for v in pains)} of {len(pains)}"
        planted = [v for v in rows if v["kind"] != "nominal"]
        entry["another_sensor_first"] = sum(bool(v["others_before"]) for v in planted)
        for host in ("claude", "codex"):
            mine = [v for v in planted if v["host"] == host]
            quiet = [v for v in nominal if v["host"] == host]
            entry[host] = (
                f"{sum(v['outcome'] == 'exact' for v in mine)} of {len(mine)} planted exact, "
                f"{sum(v['silent'] for v in quiet)} of {len(quiet)} nominal silent"
            )
        table[split] = entry
    return table


# ---------------------------------------------------------------- reinforcement


def reinforcement(template: Path, work: Path, sessions: int = 100) -> dict[str, Any]:
    """100 sessions through the hook: an agent given the rule avoids the failure 9 times in 10."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from test_rules import call, edit, passes, struggle  # the same session shapes as the test

    root = work / "reinforce"
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(template, root)
    store = Store.open(root)
    rng = random.Random(18)
    opened, failures = [], []
    for number in range(sessions):
        session = f"sim-{number}"
        knows = "- rule mem_" in (call(store, session, "session-start", source="startup") or "")
        opened.append(knows)
        edit(store, session, "shop/views.py")
        if knows and rng.random() < 0.9:
            passes(store, session)
        else:
            failures.append(number)
            struggle(store, session)
        call(store, session, "session-end", reason="exit")
    first = opened.index(True) if True in opened else sessions
    return {
        "sessions": sessions,
        "rule_opened_sessions": sum(opened),
        "first_opened": first,
        "dropped_after_first": sum(1 for o in opened[first:] if not o),
        "failure_sessions": len(failures),
        "failure_sessions_after_first": sum(1 for n in failures if n > first),
        "decay_contrast": decay_model(sessions),
    }


def decay_model(sessions: int, half_life: float = 5.0, keep_above: float = 0.5) -> dict[str, Any]:
    """The same agent under a time-decayed rule (a simulation for contrast, not cclg): confidence
    halves every ``half_life`` sessions without a detection, a detection adds 1, the rule is dropped
    below ``keep_above`` and learned again on the next failure."""
    rng = random.Random(18)
    confidence, present = 0.0, False
    drops = failures = 0
    for _ in range(sessions):
        if present and rng.random() < 0.9:
            confidence *= 0.5 ** (1 / half_life)  # prevented: no detection, so it decays
            if confidence < keep_above:
                present, drops = False, drops + 1
        else:
            failures += 1
            confidence, present = confidence + 1, True
    return {"drops": drops, "failure_sessions": failures}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=["all", "tune", "held-out"], default="all")
    parser.add_argument("--json", type=Path, help="save every verdict and the report to this file")
    args = parser.parse_args()
    os.environ.setdefault("CCLG_SEMANTIC", "off")
    work = Path(tempfile.mkdtemp(prefix="cclg-eval-sensors-"))
    try:
        header, sessions = load_sessions()
        repo = make_repo(work / "repo", header["repo_files"])
        template = work / "template"
        store, _ = Store.init(template)
        build_graph(store, repo)
        chosen = [s for s in sessions if args.split in ("all", s.split)]
        placeholder = header["repo_placeholder"]
        verdicts = [judge(s, run_session(s, template, work, placeholder, str(repo))) for s in chosen]
        result = {"report": report(verdicts), "reinforcement": reinforcement(template, work)}
        by_kind: dict[str, list[str]] = defaultdict(list)
        for v in verdicts:
            if v.get("outcome", "exact") != "exact" or v.get("silent") is False:
                by_kind[v["kind"]].append(f"{v['name']}: {v.get('outcome', 'spoke')} {v['fired'][:4]}")
        print(json.dumps(result, indent=2))
        for kind, misses in sorted(by_kind.items()):
            print(f"\n{kind}: {len(misses)} not exact or not silent")
            for miss in misses[:12]:
                print(f"  {miss}")
        if args.json:
            args.json.write_text(json.dumps({**result, "verdicts": verdicts}, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
