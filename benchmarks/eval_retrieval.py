"""Retrieval evaluation of `compile_pack`: recall, stale leaks, off-topic injections.

Run by hand (not part of the test suite):

    python benchmarks/eval_retrieval.py [--distractors 5000] [--cases benchmarks/eval_cases.json]
                                        [--min-coverage X --min-relative Y] [--sweep] [--verbose]

The cases (``eval_cases.json``, written for this benchmark) are facts about five
fictional projects in English, Korean and Japanese, corrections applied through
``supersede``/``refine`` patches (the old fact is retired, the new one current),
on-topic queries naming the fact(s) they must retrieve, and off-topic prompts
that must retrieve nothing. Each is marked ``tune`` or ``held_out``: gate
constants may be chosen on the tune half only; both halves are reported.

The evaluation runs on the plain store and again with ``--distractors`` synthetic
memories about other, made-up projects (``benchmarks/synth.py``; 10% of them
then retired with a ``forget`` patch) imported into the same store.

Metrics (``memory_nodes`` of the pack, default budget: ``max_nodes`` = 12):

- recall@12: share of expected facts that are in the pack; recall@3: share in
  its first three entries;
- stale leaks: retired memories in ``memory_nodes`` (over every prompt; must be 0);
- off-topic: memories injected for off-topic prompts, and how many of those
  prompts got a non-empty pack;
- nodes/pack: average number of memories in an on-topic pack; distractors/pack:
  how many of them come from the distractor set.

``--min-coverage``/``--min-relative`` override the gate constants of
``cclg.pack`` for this run; ``--sweep`` prints a grid of both on the tune half.
Stores live in temporary folders that are removed afterwards.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import synth

from cclg import api, pack
from cclg.ledger import apply_patch
from cclg.store import Store

HERE = Path(__file__).resolve().parent
SPLITS = ("tune", "held_out")


@dataclass
class World:
    """A built store and what the evaluation needs to know about it."""

    store: Store
    ids: dict[str, str]  # label -> node id
    retired: set[str]  # node ids retired by a patch
    distractors: set[str] = field(default_factory=set)


def jsonl(lines: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode("utf-8")


def build(root: Path, cases: dict[str, Any], distractors: int) -> World:
    store, _ = Store.init(root)
    lines = []
    for fact in cases["facts"]:
        line: dict[str, Any] = {
            "content": fact["content"],
            "source": "eval:cases",
            "type": fact.get("type", "memory"),
            "tags": fact.get("tags", []),
        }
        if fact.get("project"):
            line["scope"] = {"project": fact["project"]}
        if fact.get("key"):
            line["key"] = fact["key"]
        lines.append(line)
    result = api.import_jsonl(store, jsonl(lines), name="eval-facts")
    ids = {fact["label"]: node.id for fact, node in zip(cases["facts"], result.nodes, strict=True)}
    world = World(store=store, ids=ids, retired=set())

    if distractors:
        reserved = {f.get("project") for f in cases["facts"] if f.get("project")}
        reserved |= {"marlin", "pebble", "quarry", "hanbit", "sakura"}
        extra = api.import_jsonl(store, jsonl(list(synth.facts(distractors, seed=23, reserved=reserved))), name="d")
        world.distractors = {n.id for n in extra.nodes}
        gone = [n.id for n in extra.nodes[::10]]
        with store.batch():
            for first in range(0, len(gone), 500):
                apply_patch(store, "forget", gone[first : first + 500], reason="distractor retirement")
        world.retired.update(gone)

    for fix in cases["corrections"]:
        target = ids[fix["target"]]
        patched = apply_patch(
            store, fix["operation"], [target], reason="evaluation correction", contents=[fix["content"]]
        )
        ids[fix["label"]] = patched.new_nodes[0].id
        world.retired.add(target)
    return world


@dataclass
class Tally:
    expected: int = 0
    found: int = 0
    found_top3: int = 0
    on_topic: int = 0
    packed: int = 0
    distractors_packed: int = 0
    off_topic: int = 0
    off_topic_nonempty: int = 0
    off_topic_injected: int = 0
    stale_leaks: int = 0
    retired_listed: int = 0
    corrected_queries: int = 0
    misses: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def row(self) -> dict[str, float | int]:
        return {
            "recall@12": self.found / self.expected if self.expected else float("nan"),
            "recall@3": self.found_top3 / self.expected if self.expected else float("nan"),
            "stale": self.stale_leaks,
            "off_inj": self.off_topic_injected,
            "off_nonempty": self.off_topic_nonempty,
            "off_total": self.off_topic,
            "nodes_per_pack": self.packed / self.on_topic if self.on_topic else float("nan"),
            "distr_per_pack": self.distractors_packed / self.on_topic if self.on_topic else float("nan"),
        }


def evaluate(world: World, cases: dict[str, Any], splits: tuple[str, ...] = SPLITS) -> dict[str, Tally]:
    tallies = {split: Tally() for split in splits}
    labels = {node_id: label for label, node_id in world.ids.items()}
    predecessor = {fix["label"]: world.ids[fix["target"]] for fix in cases["corrections"]}
    for case in cases["queries"]:
        if case["split"] not in tallies:
            continue
        tally = tallies[case["split"]]
        result = pack.compile_pack(world.store, case["query"], generated_at="eval")
        got = [entry["id"] for entry in result["memory_nodes"]]
        tally.on_topic += 1
        tally.packed += len(got)
        tally.distractors_packed += sum(1 for i in got if i in world.distractors)
        tally.stale_leaks += sum(1 for i in got if i in world.retired)
        suppressed = {entry["id"] for entry in result["suppressed_nodes"]}
        for label in case["expect"]:
            tally.expected += 1
            want = world.ids[label]
            if want in got:
                tally.found += 1
                tally.found_top3 += want in got[:3]
                if want not in got[:3]:
                    tally.notes.append(f"{case['id']} {label} at rank {got.index(want) + 1}")
            else:
                tally.misses.append(
                    f"{case['id']} {case['query']!r}: {label} missing; got "
                    f"{[labels.get(i, 'distractor' if i in world.distractors else i) for i in got][:6]}"
                )
            if label in predecessor:
                tally.corrected_queries += 1
                tally.retired_listed += predecessor[label] in suppressed
    for case in cases["off_topic"]:
        if case["split"] not in tallies:
            continue
        tally = tallies[case["split"]]
        result = pack.compile_pack(world.store, case["query"], generated_at="eval")
        got = [entry["id"] for entry in result["memory_nodes"]]
        tally.off_topic += 1
        tally.off_topic_injected += len(got)
        tally.off_topic_nonempty += bool(got)
        tally.stale_leaks += sum(1 for i in got if i in world.retired)
        if got:
            tally.misses.append(
                f"{case['id']} {case['query']!r}: off-topic got {len(got)}: "
                f"{[labels.get(i, 'distractor' if i in world.distractors else i) for i in got][:4]}"
            )
    return tallies


def combined(tallies: dict[str, Tally]) -> Tally:
    total = Tally()
    for tally in tallies.values():
        for name in total.__dataclass_fields__:
            value = getattr(tally, name)
            setattr(total, name, getattr(total, name) + value)
    return total


HEADER = (
    f"{'store':<22} {'split':<9} {'recall@12':>9} {'recall@3':>8} {'stale':>5} "
    f"{'off-topic inj':>13} {'off non-empty':>13} {'nodes/pack':>10} {'distr/pack':>10} {'retired listed':>14}"
)


def print_rows(name: str, tallies: dict[str, Tally]) -> None:
    for split, tally in [*tallies.items(), ("all", combined(tallies))]:
        r = tally.row()
        nonempty = f"{r['off_nonempty']}/{r['off_total']}"
        listed = f"{tally.retired_listed}/{tally.corrected_queries}"
        print(
            f"{name:<22} {split:<9} {r['recall@12']:>9.3f} {r['recall@3']:>8.3f} {r['stale']:>5} "
            f"{r['off_inj']:>13} {nonempty:>13} {r['nodes_per_pack']:>10.2f} "
            f"{r['distr_per_pack']:>10.2f} {listed:>14}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cases", type=Path, default=HERE / "eval_cases.json")
    parser.add_argument("--distractors", type=int, default=5000, help="synthetic memories added for the second run")
    parser.add_argument("--min-coverage", type=float, help=f"override cclg.pack.MIN_COVERAGE ({pack.MIN_COVERAGE})")
    parser.add_argument("--min-relative", type=float, help=f"override cclg.pack.MIN_RELATIVE ({pack.MIN_RELATIVE})")
    parser.add_argument("--sweep", action="store_true", help="grid of both gate constants on the tune half")
    parser.add_argument("--verbose", action="store_true", help="list misses, off-topic injections and low ranks")
    args = parser.parse_args()
    cases = json.loads(args.cases.read_text(encoding="utf-8"))
    if args.min_coverage is not None:
        pack.MIN_COVERAGE = args.min_coverage
    if args.min_relative is not None:
        pack.MIN_RELATIVE = args.min_relative

    work = Path(tempfile.mkdtemp(prefix="cclg-eval-"))
    try:
        worlds = [("plain", build(work / "plain", cases, 0))]
        if args.distractors:
            worlds.append((f"+{args.distractors} distractors", build(work / "noisy", cases, args.distractors)))
        print(
            f"{len(cases['facts'])} facts, {len(cases['corrections'])} corrections, {len(cases['queries'])} queries, "
            f"{len(cases['off_topic'])} off-topic prompts; gate MIN_COVERAGE={pack.MIN_COVERAGE} "
            f"MIN_RELATIVE={pack.MIN_RELATIVE}"
        )
        if args.sweep:
            sweep(worlds, cases)
            return
        print(HEADER)
        print("-" * len(HEADER))
        for name, world in worlds:
            tallies = evaluate(world, cases)
            print_rows(name, tallies)
            if args.verbose:
                for split, tally in tallies.items():
                    for line in tally.misses + tally.notes:
                        print(f"    [{name} {split}] {line}", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def sweep(worlds: list[tuple[str, World]], cases: dict[str, Any]) -> None:
    """Recall@12 and off-topic injections on the tune half, for a grid of gate constants."""
    print(
        f"{'coverage':>8} {'relative':>8} "
        + " ".join(f"{name[:18]:>18}: recall inj stale n/pack" for name, _ in worlds)
    )
    for coverage, relative in itertools.product((0.15, 0.2, 0.25, 0.3, 0.35, 0.4), (0.3, 0.5, 0.7)):
        pack.MIN_COVERAGE, pack.MIN_RELATIVE = coverage, relative
        cells = []
        for _, world in worlds:
            tally = evaluate(world, cases, splits=("tune",))["tune"]
            r = tally.row()
            cells.append(f"{r['recall@12']:>26.3f} {r['off_inj']:>3} {r['stale']:>5} {r['nodes_per_pack']:>6.2f}")
        print(f"{coverage:>8} {relative:>8} " + " ".join(cells))


if __name__ == "__main__":
    main()
