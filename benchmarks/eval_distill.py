"""Evaluation of the correction and decision detector (``cclg.learning.distill.detect``, issue 19).

Run by hand:

    python benchmarks/eval_distill.py [--split tune|held-out|all] [--misses]

The cases are ``benchmarks/distill_cases.json``: 213 prompts in English, Korean, Japanese and mixed,
labelled correction, decision or none, half of them near-misses, written without the detector's
code. For each split: precision and recall of each kind (a correction detected as a decision
counts as a miss for both), of "worth remembering" (either kind), and by language and near-miss.
``--misses`` lists what went wrong (read the tune half's to design; the held-out half's only to
report).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cclg.learning.distill import detect

CASES = Path(__file__).resolve().parent / "distill_cases.json"


def scores(pairs: list[tuple[str, str]]) -> dict[str, str]:
    """Precision and recall of each kind and of either, from (label, predicted) pairs."""
    out = {}
    for kind in ("correction", "decision", "either"):

        def hit(label: str, kind: str = kind) -> bool:
            return label != "none" if kind == "either" else label == kind

        predicted = [(label, guess) for label, guess in pairs if hit(guess)]
        actual = [(label, guess) for label, guess in pairs if hit(label)]
        right = [p for p in predicted if (hit(p[0]) if kind == "either" else p[0] == p[1])]
        precision = len(right) / len(predicted) if predicted else 1.0
        recall = len(right) / len(actual) if actual else 1.0
        out[kind] = f"P {precision:.2f} ({len(right)}/{len(predicted)})  R {recall:.2f} ({len(right)}/{len(actual)})"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=["all", "tune", "held-out"], default="all")
    parser.add_argument("--misses", action="store_true")
    args = parser.parse_args()
    cases = json.loads(CASES.read_text("utf-8"))["cases"]
    for split in ("tune", "held-out"):
        if args.split not in ("all", split):
            continue
        chosen = [c for c in cases if c["split"] == split]
        guesses = {c["id"]: (detect(c["text"]) or {"kind": "none"})["kind"] for c in chosen}
        print(f"== {split}: {len(chosen)} prompts")
        for kind, line in scores([(c["label"], guesses[c["id"]]) for c in chosen]).items():
            print(f"  {kind:<10} {line}")
        groups: dict[str, list[tuple[str, str]]] = defaultdict(list)
        for c in chosen:
            groups[f"lang {c['lang']}"].append((c["label"], guesses[c["id"]]))
            groups["near-miss" if c["near_miss"] else "plain"].append((c["label"], guesses[c["id"]]))
        for name, pairs in sorted(groups.items()):
            exact = sum(a == b for a, b in pairs)
            print(f"  {name:<12} either: {scores(pairs)['either']}; exact label {exact}/{len(pairs)}")
        if args.misses:
            for c in chosen:
                if guesses[c["id"]] != c["label"]:
                    text = c["text"].replace("\n", " / ")[:140]
                    print(f"    {c['id']}: {c['label']} -> {guesses[c['id']]}: {text}")


if __name__ == "__main__":
    main()
