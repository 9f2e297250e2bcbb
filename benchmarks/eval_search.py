"""Search's recall over the retrieval evaluation's cases: ``bm25`` against ``auto`` (words fused with meaning).

    python benchmarks/eval_search.py --split tune --sizes 10,100 --semantic

The same cases, halves and stores as ``eval_retrieval.py`` (its ``Cases``, ``plan`` and
``load_or_build``): every on-topic query is searched in the store that holds its memories, scoped
to its project, and a needed memory counts as found at 5 (or 10) when it is among the first 5 (or
10) hits (the embeddings alone also at 1: which model ranks the needed memory first).
``--semantic`` loads the model in this process (``cclg.retrieval.semantic.IN_PROCESS``; ``--engine e5``
plugs in ``e5_engine.py`` with its tuned fusion);
without it semantic recall is off and ``auto`` is the lexical fusion alone. ``--set NAME=VALUE``
overrides a ``cclg.retrieval.search`` constant (``SEMANTIC_WEIGHT``, ``SEMANTIC_K``) or
``e5_engine.QUERY_TOKENS`` for tuning.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import e5_engine
import eval_retrieval as er

from cclg.retrieval import embed, semantic
from cclg.retrieval import search as search_module
from cclg.retrieval.query import Where

MODES = ("bm25", "auto", "semantic")  # semantic: the embedding ranks alone, for comparison


def recall_rows(size: int, cases: er.Cases, args: argparse.Namespace, reserved: list[str]) -> list[dict[str, Any]]:
    """Recall@5 and @10 of each mode at one size, per split and category (and ``all``)."""
    worlds = [er.load_or_build(spec, cases, args.cache, args.fresh, reserved) for spec in er.plan(size, cases)]
    home = {label: world for world in worlds for label in world.ids}
    cells: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # expected, @5, @10, @1
    signals: dict[str, int] = defaultdict(int)
    for case in er.selected(cases.queries, args):
        if not case["expect"]:
            continue
        world = home[(case["expect"] + case.get("gone", []))[0]]
        want = [world.ids[label] for label in case["expect"]]
        for mode in MODES:
            where = Where(project=case.get("project"))
            if mode == "semantic":
                got = [
                    node_id for node_id, _ in semantic.similar(world.store, case["text"], limit=10, where=where) or []
                ]
            else:
                found = search_module.search(world.store, case["text"], mode=mode, limit=10, where=where)
                if mode == "auto":
                    signals[found.semantic] += 1
                got = [hit.id for hit in found]
            for split in (case["split"], "all"):
                for category in (*case["category"], "all"):
                    cell = cells[(mode, split, category)]
                    cell[0] += len(want)
                    cell[1] += sum(1 for i in want if i in got[:5])
                    cell[2] += sum(1 for i in want if i in got[:10])
                    cell[3] += sum(1 for i in want if i in got[:1])
    print(f"size {size}: semantic {dict(signals)}", file=sys.stderr)
    return [
        {
            "size": size,
            "mode": mode,
            "split": split,
            "category": category,
            "expected": n,
            "r1": c / n,
            "r5": a / n,
            "r10": b / n,
        }
        for (mode, split, category), (n, a, b, c) in sorted(cells.items())
        if n
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cases", type=Path, default=er.HERE / "eval_cases.json")
    parser.add_argument("--sizes", default="10,100,10000")
    parser.add_argument("--split", choices=[*er.SPLITS, "all"], default="all")
    parser.add_argument("--category", choices=er.CATEGORIES)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "cclg-eval-stores")
    parser.add_argument("--fresh", action="store_true", help="rebuild the stores even when cached")
    parser.add_argument("--semantic", action="store_true", help="semantic recall with the model in this process")
    parser.add_argument(
        "--engine", choices=sorted(e5_engine.ENGINES), help="with --semantic: embed with this engine (default: USE)"
    )
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--json", type=Path, help="write the rows to this file")
    args = parser.parse_args()
    if args.engine:
        embed.ENGINES = (e5_engine.ENGINES[args.engine],)
    if args.engine == "e5":
        for name, number in e5_engine.SEARCH_TUNED.items():
            setattr(search_module, name, type(getattr(search_module, name))(number))
    if args.semantic:
        semantic.IN_PROCESS = True
    else:
        os.environ["CCLG_SEMANTIC"] = "off"
    for assignment in args.set:
        name, _, value = assignment.partition("=")
        module = search_module if hasattr(search_module, name) else e5_engine  # e5_engine: QUERY_TOKENS
        setattr(module, name, type(getattr(module, name))(float(value)))
    cases = er.Cases.load(args.cases)
    reserved = cases.reserved_terms()
    args.cache.mkdir(parents=True, exist_ok=True)
    rows = [row for size in (int(s) for s in args.sizes.split(",")) for row in recall_rows(size, cases, args, reserved)]
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    print(
        f"{'size':>6} {'split':<8} {'category':<12} {'n':>4}  {'bm25 R@5':>8} {'R@10':>5}  {'auto R@5':>8} {'R@10':>5}"
        f"  {'sem R@1':>7} {'R@5':>5} {'R@10':>5}"
    )
    by = {(r["size"], r["split"], r["category"], r["mode"]): r for r in rows}
    for size, split, category, mode in sorted(by):
        if mode != "bm25" or (size, split, category, "auto") not in by:
            continue
        b, a = by[(size, split, category, "bm25")], by[(size, split, category, "auto")]
        e = by.get((size, split, category, "semantic"), {"r1": 0.0, "r5": 0.0, "r10": 0.0})
        print(
            f"{size:>6} {split:<8} {category:<12} {b['expected']:>4}  {b['r5']:>8.3f} {b['r10']:>5.3f}"
            f"  {a['r5']:>8.3f} {a['r10']:>5.3f}  {e['r1']:>7.3f} {e['r5']:>5.3f} {e['r10']:>5.3f}"
        )


if __name__ == "__main__":
    main()
