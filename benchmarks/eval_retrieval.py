"""Retrieval evaluation of ``compile_pack``: does the memory a prompt needs reach the agent, and nothing else?

Run by hand (not part of the test suite):

    python benchmarks/eval_retrieval.py                      # sizes 10, 100, 10000
    python benchmarks/eval_retrieval.py --sizes 10,100,10000,100000 --json out.json
    python benchmarks/eval_retrieval.py --split tune --category long --verbose
    python benchmarks/eval_retrieval.py --check              # validate the cases only, build nothing
    python benchmarks/eval_retrieval.py --questions          # each fact with the questions it answers

**The cases** (``eval_cases.json``) were written for this evaluation, from the
kinds of prompts people type into coding agents rather than from what cclg
already matches. Facts about seven fictional projects and the whole team (project
decisions, commands, conventions, architecture notes, runbooks, warnings,
owners) in English, Korean and Japanese; corrections that retire facts through
every retiring patch operation (update, supersede, refine, expand, narrow,
merge, split, resolve_conflict, expire, deprecate, forget) and through chains of
two to three of them; on-topic queries that name the fact labels they need; and
off-topic prompts that must get nothing. When this was written: 121 facts, 45
corrections, 239 on-topic queries and 38 off-topic prompts (``--check`` prints
the current counts by category, split, language and project). Every query names
its categories (one to three, e.g. ``long+cjk`` or ``task+cjk+correction``; a
query counts in each):

- ``shared_words``: a plain question sharing words with the memory;
- ``task``: an instruction as an agent receives it ("add a migration for the
  users table", multi-step requests) where a memory changes how to do it;
- ``long``: 500 to 5,000 characters, mostly a pasted traceback, CI log, test
  output or diff with the question at the end;
- ``paraphrase``: shares at most one content word with the memory it needs
  (checked: see below);
- ``cjk``: Korean, Japanese, or either mixed with English;
- ``correction``: needs the live end of a corrected fact, or (``expect`` empty,
  ``gone`` naming the retired labels) asks about a fact retired with no
  successor, where nothing current exists;
- ``switch``: a short, complete question that changes the subject after the session's
  previous prompt (``previous``) in the same project; ``avoid`` names the facts of that
  previous subject, which the pack must not carry over (column ``carried``: how many of
  them the packs held, of the switches);
- ``off_topic``: small talk, other projects' questions, generic programming and
  general questions the store says nothing about, and bad inputs (emoji only,
  stop words only, binary junk, a 1 MB prompt generated here).

Each case is marked ``tune`` or ``held_out``, about half each, balanced so both
halves hold every category and every project: constants may be chosen on the
tune half only; both halves are reported. A query may say ``project`` (the user
is inside that repository; the pack gets ``project=``); most do not, so the
default path is measured.

**The paraphrase check.** Content words are the lower-cased words of a text
without stop words (cclg's list plus a few more), with a light English stem and,
for Korean and Japanese runs, their character pairs (grammatical pairs such as
``니다`` or ``ます`` left out). A paraphrase sharing more than one with the live
memory it needs is reported by every run (and fails ``--check``).

**Stores.** For each size a store is built once and cached under
``$TMPDIR/cclg-eval-stores/<size>-<store>-<hash of the store's facts and
corrections, the distractor grammar and BUILD_VERSION>`` (``--fresh`` rebuilds,
which is needed after a change to cclg's write path; ``--cache DIR`` moves it;
a build removes the store's older builds):

- 10 and 100 (a new user's small store): one store per project (the team's
  notes count as a project) holding that project's case facts padded with
  distractors to the size; at 10 a project is split into several stores of at
  most 7 case memories each, keeping every correction chain and every query's
  facts together. A query runs on the store that holds its facts; an off-topic
  prompt runs on the stores of the project it brushes against (``near``), else
  on one store in turn, and counts once.
- 10,000 and 100,000: one store with every case fact plus distractors.

The size counts every memory, retired ones included. Distractors come from
``benchmarks/distractors.py`` (a grammar of sixteen note kinds in varied
styles, English, Korean and Japanese, many made-up projects, about 10% retired
by supersede, forget, deprecate or expire), never naming a case project or any
identifier, command, path or person of a case fact. Case facts and distractors
are imported with ``cclg.api.import_jsonl`` (distractors in batches of 5,000),
then corrections and retirements go through ``cclg.ledger.writer.apply_patch``; the
index follows every write, as in normal use, and is checked once at the end.
On the two-core development machine the 100,000 store took 2.5 to 5 minutes
to build (the import about 2.5, the distractor retirements 0.5 to 2, with the
disk); 10,000 takes 15 s, the small ones about a second. A run of all four
sizes that finds the stores cached takes about a minute, half of it the 1 MB
prompt on the 100,000 store.

**Metrics**, per split x size x category, from the pack's ``memory_nodes``
(``compile_pack(store, query, generated_at="eval")``, default budget):

- ``R@12``: share of expected facts (the live end of a chain) in the pack (tier 1);
  ``R@3``: share in its first three entries; ``R1+2``: share in the pack or among its
  ``possibly_related`` lines (tiers 1 and 2 together);
- ``stale``: retired memories in ``memory_nodes`` or ``possibly_related`` (must be 0), over
  every prompt;
- ``empty!``: prompts that must get nothing (off-topic prompts; queries about a
  fact retired without successor) that got at least one memory, of how many;
- ``t2 ln``, ``t2 ch``: possibly related lines per prompt and their characters as the
  Markdown shows them (``cclg.retrieval.rendering.related_line``); on the off-topic row, what
  prompts about nothing the store knows are offered;
- ``nodes``, ``distr``: memories per pack and how many of them are
  distractors, over on-topic packs with something to find;
- ``old listed`` (informational): for queries that need a corrected fact, how
  many of the memories it replaced the pack lists in ``suppressed_nodes``;
- timing per size: ``compile_pack`` median and p95 over every prompt (in-process,
  each store's index warm; the 1 MB prompt included), the slowest prompt, and
  how long the stores took to build (by step in ``--json``).

``--json FILE`` (or ``-`` for stdout) writes the rows, the timing, the case
counts and every prompt's outcome (what was packed, with scores).

``--questions [FILE]`` gives each case fact the questions it answers
(``eval_questions.json``: one or two a fact, written from the fact alone, as the
agent writing the memory would, without reading the queries), to compare a store
whose memories carry questions with one whose memories do not.

``--inside`` asks every prompt inside a project's repository, as the hook does (it serves the
project of the folder it works in): the project of the facts the prompt needs, or the one an
off-topic prompt brushes against, else the first; the team's notes (no project) are in every
project's view. Without it most prompts name no project and search the whole store, which is
harder than any one repository's view at 10,000 and 100,000 memories.

``--follow-ups`` runs only the follow-ups (cases that carry ``previous``, the session's prompt before
them); ``--no-previous`` judges them alone, as before the pack read the previous prompt, so the two
runs compare one rule's gain.

``--verbose`` lists every miss: the query, the expected label with its BM25
rank and the relevance decision's evidence for it, and what was packed (label or
distractor, with score). ``--set NAME=VALUE`` overrides a constant of
``cclg.retrieval.relevance`` for the run (``--set LEAD=2 --set RELATIVE=0.5``);
``--sweep NAME=V1,V2,...`` prints recall and off-topic injections on the tune
half for each value of one constant.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import distractors
import e5_engine

from cclg import api
from cclg.core.store import Store
from cclg.core.text import STOPWORDS
from cclg.ledger.writer import apply_patch
from cclg.retrieval import embed, relevance, rendering, selection, semantic

HERE = Path(__file__).resolve().parent
SPLITS = ("tune", "held_out")
CATEGORIES = ("shared_words", "task", "long", "paraphrase", "cjk", "correction", "switch", "off_topic")
DEFAULT_SIZES = (10, 100, 10_000)
SMALL_SHARD = 7  # case memories per store at size 10 (the rest are distractors)
IMPORT_BATCH = 5_000
BUILD_VERSION = "1"  # change when the build procedure changes, so cached stores are rebuilt
LONG_MIN, LONG_MAX = 500, 5_000
BIG_PROMPT_BYTES = 1_000_000
# File names every project of a stack has: a distractor may mention them.
GENERIC_NAMES = frozenset({"manage.py", "setup.py", "pyproject.toml", "local.py", "production.py", "package.json"})

# ---------------------------------------------------------------- content words (the paraphrase check)

_EXTRA_STOPWORDS = frozenset(
    "i'm im it's whats what's there's here's isn't can't cannot won't again still now also just really "
    "actually anything something someone somebody thing stuff kind ok okay please thanks hey hi".split()
)
# Grammatical character pairs of Korean and Japanese (particles, endings, copulas).
_CJK_GRAMMAR = frozenset(
    "니다 합니 습니 해요 어요 아요 세요 해야 하는 하고 하면 해서 있다 있어 있는 없는 한다 된다 되는 에서 으로 "
    "이고 이다 에게 한테 까지 부터 처럼 보다 같은 인데 는데 지만 려면 어떻 떻게 뭐야 알려 려줘 "
    "です ます ました ませ して した する され れて ている てい いる ある あり って った ので から まで など "
    "ください くだ ださ さい には では とは のは ての への こと もの よう ため どう うや やっ".split()
)
_WORD_RE = re.compile(r"[A-Za-z0-9]+|[\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7a3]+")


def _stem(word: str) -> str:
    for suffix in ("ies", "ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)] + ("y" if suffix == "ies" else "")
            break
    return word.rstrip("e") if len(word) > 4 else word


def content_words(text: str) -> set[str]:
    """Lower-cased words without stop words, lightly stemmed; Korean and Japanese runs as character pairs."""
    words: set[str] = set()
    for raw in _WORD_RE.findall(text.lower()):
        if raw.isascii():
            if len(raw) > 1 and raw not in STOPWORDS and raw not in _EXTRA_STOPWORDS:
                words.add(_stem(raw))
            continue
        pairs = [raw[i : i + 2] for i in range(len(raw) - 1)] or [raw]
        words.update(p for p in pairs if p not in _CJK_GRAMMAR)
    return words


# ---------------------------------------------------------------- cases


def query_text(value: str | list[str]) -> str:
    """A query is a string, or a list of lines (long pastes read better that way in the JSON)."""
    return value if isinstance(value, str) else "\n".join(value)


def big_prompt(size: int = BIG_PROMPT_BYTES) -> str:
    """A pasted 1 MB dump of sensor readings (deterministic) with a question at the end."""
    rng = random.Random(1)
    lines, total = [], 0
    while total < size - 80:
        line = json.dumps(
            {"ts": 1_717_000_000 + total, "probe": f"p-{rng.randrange(65536):04x}", "c": round(rng.uniform(-5, 40), 2)}
        )
        lines.append(line)
        total += len(line) + 1
    lines.append("can you plot these?")
    return "\n".join(lines)


def has_cjk(text: str) -> bool:
    return bool(re.search(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7a3]", text))


def group_of(label: str) -> str:
    return label.split(".", 1)[0]


@dataclass
class Cases:
    """The cases file, read and checked."""

    path: Path
    raw: dict[str, Any]
    facts: dict[str, dict[str, Any]] = field(default_factory=dict)  # label -> fact (imported ones)
    contents: dict[str, str] = field(default_factory=dict)  # every label (facts and corrections) -> content
    retired: set[str] = field(default_factory=set)  # labels retired by some correction
    queries: list[dict[str, Any]] = field(default_factory=list)
    off_topic: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    paraphrase_report: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path, questions: Path | None = None) -> Cases:
        """The cases of ``path``; with ``questions`` (``eval_questions.json``), each fact carries the
        questions that file gives it, which the stores then hold (and their cache key covers)."""
        raw = json.loads(path.read_text(encoding="utf-8"))
        if questions is not None:
            asked = json.loads(questions.read_text(encoding="utf-8"))["questions"]
            raw["facts"] = [{**fact, "questions": asked.get(fact["label"], [])} for fact in raw["facts"]]
        cases = cls(path=path, raw=raw)
        cases._read()
        return cases

    def _read(self) -> None:
        for fact in self.raw["facts"]:
            self.facts[fact["label"]] = fact
            self.contents[fact["label"]] = fact["content"]
        for fix in self.raw["corrections"]:
            for target in fix["targets"]:
                if target not in self.contents:
                    self.problems.append(f"correction of unknown label {target}")
                if target in self.retired:
                    self.problems.append(f"{target} is retired twice")
                self.retired.add(target)
            if len(fix["new"]) != len(fix.get("contents", [])):
                self.problems.append(f"correction {fix['operation']} {fix['targets']}: new labels and contents differ")
            for label, content in zip(fix["new"], fix.get("contents", []), strict=False):
                self.contents[label] = content
        for case in self.raw["queries"]:
            self.queries.append({**case, "text": query_text(case["query"])})
        for case in self.raw["off_topic"]:
            text = big_prompt() if case.get("generate") == "1mb" else query_text(case["query"])
            self.off_topic.append({**case, "text": text, "category": ["off_topic"], "expect": []})
        self._check()

    def _check(self) -> None:
        ids = [c["id"] for c in self.queries + self.off_topic]
        for repeated in sorted({i for i in ids if ids.count(i) > 1}):
            self.problems.append(f"id {repeated} repeats")
        for case in self.queries:
            where = f"{case['id']}:"
            cats = case["category"]
            if not cats or any(c not in CATEGORIES or c == "off_topic" for c in cats):
                self.problems.append(f"{where} bad category {cats}")
            if case["split"] not in SPLITS:
                self.problems.append(f"{where} bad split {case['split']}")
            labels = case["expect"] + case.get("gone", [])
            if not labels:
                self.problems.append(f"{where} expects nothing and names nothing gone")
            for label in case["expect"]:
                if label not in self.contents:
                    self.problems.append(f"{where} unknown label {label}")
                elif label in self.retired:
                    self.problems.append(f"{where} expects retired {label}; expect the live end of its chain")
            for label in case.get("avoid", []):
                if label not in self.contents or label in self.retired:
                    self.problems.append(f"{where} avoids {label}, which is no current fact")
            if ("switch" in cats) != bool(case.get("avoid")) or ("switch" in cats and not case.get("previous")):
                self.problems.append(f"{where} a switch has a previous prompt and facts to avoid, and only a switch")
            for label in case.get("gone", []):
                if label not in self.retired:
                    self.problems.append(f"{where} names {label} as gone, but it is current")
            if len({group_of(label) for label in labels + case.get("avoid", [])}) > 1:
                self.problems.append(f"{where} needs facts of several projects {labels}")
            text = case["text"]
            if ("cjk" in cats) != has_cjk(text):
                self.problems.append(f"{where} category cjk {'set' if 'cjk' in cats else 'missing'} for {text[:40]!r}")
            if ("long" in cats) != (LONG_MIN <= len(text) <= LONG_MAX):
                self.problems.append(f"{where} {len(text)} characters, category long {'cjk' in cats}")
            touched = any(label in self.retired or self._is_successor(label) for label in labels)
            if ("correction" in cats) != touched:
                self.problems.append(f"{where} category correction does not match its labels {labels}")
            if "paraphrase" in cats:
                for label in case["expect"]:
                    shared = sorted(content_words(text) & content_words(self.contents.get(label, "")))
                    if len(shared) > 1:
                        self.paraphrase_report.append(f"{case['id']} shares {len(shared)} with {label}: {shared}")
        for case in self.off_topic:
            if case["split"] not in SPLITS:
                self.problems.append(f"{case['id']}: bad split {case['split']}")
        self._check_balance()

    def _is_successor(self, label: str) -> bool:
        return any(label in fix["new"] for fix in self.raw["corrections"])

    def _check_balance(self) -> None:
        cells: dict[tuple[str, str], set[str]] = defaultdict(set)
        for case in self.queries:
            group = group_of((case["expect"] + case.get("gone", []))[0])
            for cat in case["category"]:
                cells[(cat, "")].add(case["split"])
            cells[("", group)].add(case["split"])
        for case in self.off_topic:
            cells[("off_topic", "")].add(case["split"])
        for (cat, group), splits in sorted(cells.items()):
            if len(splits) < 2:
                self.problems.append(f"only {splits} holds {cat or 'project'} {group}".rstrip())

    def group_labels(self) -> dict[str, list[str]]:
        """Every label (facts, then corrections' new labels) by project group, in file order."""
        groups: dict[str, list[str]] = defaultdict(list)
        for label in self.contents:
            groups[group_of(label)].append(label)
        return dict(groups)

    def reserved_terms(self) -> list[str]:
        """What no distractor may contain: project names, the identifiers, commands, paths and people of facts."""
        groups = {group for group in self.group_labels() if group != "team"}
        terms = {t.lower() for t in self.raw.get("reserved_terms", [])} | groups
        for content in self.contents.values():
            # commands of three words or more (`cargo test` alone states nothing)
            terms |= {c.lower() for c in re.findall(r"`([^`]+)`", content) if len(c.split()) >= 3}
            # identifiers and paths: snake_case, dotted, slashed
            terms |= {
                t.lower()
                for t in re.findall(r"[A-Za-z][A-Za-z0-9]*(?:[_./:][A-Za-z0-9]+)+", content)
                if len(t) >= 5 and t.lower() not in GENERIC_NAMES
            }
            # hyphenated names only with a digit or a project name in them (not "end-to-end")
            terms |= {
                t.lower()
                for t in re.findall(r"[A-Za-z0-9]+(?:-[A-Za-z0-9]+)+", content)
                if re.search(r"\d", t) or set(t.lower().split("-")) & groups
            }
        return sorted(terms)

    def counts(self) -> dict[str, Any]:
        """How many cases of each kind, by split, and their languages."""
        by: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        langs: dict[str, int] = defaultdict(int)
        for case in self.queries:
            for cat in case["category"]:
                by[cat][case["split"]] += 1
            by["on-topic"][case["split"]] += 1
            langs[language(case["text"])] += 1
        for case in self.off_topic:
            by["off_topic"][case["split"]] += 1
            langs["off-topic " + language(case["text"])] += 1
        groups: dict[str, int] = defaultdict(int)
        for case in self.queries:
            groups[group_of((case["expect"] + case.get("gone", []))[0])] += 1
        operations: dict[str, int] = defaultdict(int)
        for fix in self.raw["corrections"]:
            operations[fix["operation"]] += 1
        return {
            "facts": len(self.facts),
            "corrections": len(self.raw["corrections"]),
            "operations": dict(sorted(operations.items())),
            "categories": {k: dict(v) for k, v in by.items()},
            "languages": dict(sorted(langs.items())),
            "projects": dict(sorted(groups.items())),
            "with_project": sum(1 for c in self.queries if c.get("project")),
        }


def language(text: str) -> str:
    korean = bool(re.search(r"[\uac00-\ud7a3]", text))
    japanese = bool(re.search(r"[\u3040-\u30ff]", text)) or (not korean and bool(re.search(r"[\u4e00-\u9fff]", text)))
    latin = len(re.findall(r"[A-Za-z]{3,}", text))
    if not (korean or japanese):
        return "en" if latin else "other"
    name = "ko" if korean else "ja"
    return f"{name}+en" if latin >= 2 else name


# ---------------------------------------------------------------- store plans and builds


@dataclass
class Spec:
    """One store to build: which case labels it holds and how many distractors pad it."""

    size: int
    name: str
    labels: list[str]  # facts and corrections' new labels
    groups: list[str]


def plan(size: int, cases: Cases) -> list[Spec]:
    groups = cases.group_labels()
    if size >= 1000:
        labels = [label for members in groups.values() for label in members]
        return [Spec(size, "all", labels, sorted(groups))]
    if size >= 50:
        return [Spec(size, group, labels, [group]) for group, labels in groups.items()]
    specs = []
    for group, labels in groups.items():
        for number, shard in enumerate(_shards(cases, labels, size)):
            specs.append(Spec(size, f"{group}-{number}", shard, [group]))
    return specs


def _shards(cases: Cases, labels: list[str], size: int) -> list[list[str]]:
    """The labels of one project cut into stores of at most SMALL_SHARD (and below ``size``) memories,
    keeping correction chains and each query's labels together."""
    parent = {label: label for label in labels}

    def find(label: str) -> str:
        while parent[label] != label:
            parent[label] = parent[parent[label]]
            label = parent[label]
        return label

    def join(group: list[str]) -> None:
        inside = [label for label in group if label in parent]
        for other in inside[1:]:
            parent[find(other)] = find(inside[0])

    for fix in cases.raw["corrections"]:
        join(fix["targets"] + fix["new"])
    for case in cases.queries:  # a switch's previous subject with it, so the pack could carry it over
        join(case["expect"] + case.get("gone", []) + case.get("avoid", []))
    units: dict[str, list[str]] = defaultdict(list)
    for label in labels:
        units[find(label)].append(label)
    capacity = min(SMALL_SHARD, size)
    shards: list[list[str]] = []
    for unit in sorted(units.values(), key=len, reverse=True):
        for shard in shards:
            if len(shard) + len(unit) <= capacity:
                shard.extend(unit)
                break
        else:
            shards.append(list(unit))
    return shards


@dataclass
class World:
    """A built store and what the evaluation needs to know about it."""

    spec: Spec
    store: Store
    ids: dict[str, str]  # case label -> node id
    retired: set[str]  # node ids retired by a patch (case and distractor)
    distractors: dict[str, str]  # distractor node id -> its project (or "-")
    nodes: int
    build_seconds: float
    cached: bool
    phases: dict[str, float] = field(default_factory=dict)  # build time by step

    @property
    def labels(self) -> dict[str, str]:
        return {node_id: label for label, node_id in self.ids.items()}

    def name_of(self, node_id: str) -> str:
        if node_id in self.distractors:
            return f"distractor:{self.distractors[node_id]}"
        return self.labels.get(node_id, node_id)


def jsonl(lines: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode("utf-8")


def _spec_hash(spec: Spec, cases: Cases, reserved: list[str]) -> str:
    digest = hashlib.sha256()
    digest.update(BUILD_VERSION.encode())
    digest.update(json.dumps([spec.size, spec.name, spec.labels, reserved], ensure_ascii=False).encode())
    wanted = set(spec.labels)
    digest.update(json.dumps([f for f in cases.raw["facts"] if f["label"] in wanted], ensure_ascii=False).encode())
    fixes = [fix for fix in cases.raw["corrections"] if set(fix["targets"]) <= wanted]
    digest.update(json.dumps(fixes, ensure_ascii=False).encode())
    digest.update((HERE / "distractors.py").read_bytes())
    return digest.hexdigest()[:12]


def load_or_build(spec: Spec, cases: Cases, cache: Path, fresh: bool, reserved: list[str]) -> World:
    root = cache / f"{spec.size}-{spec.name}-{_spec_hash(spec, cases, reserved)}"
    manifest = root / "eval-manifest.json"
    if manifest.exists() and not fresh:
        saved = json.loads(manifest.read_text(encoding="utf-8"))
        return World(
            spec=spec,
            store=Store.open(root / "store"),
            ids=saved["ids"],
            retired=set(saved["retired"]),
            distractors=saved["distractors"],
            nodes=saved["nodes"],
            build_seconds=saved["build_seconds"],
            cached=True,
            phases=saved.get("phases", {}),
        )
    for old in cache.glob(f"{spec.size}-{spec.name}-*"):  # this store, built from older inputs or half built
        shutil.rmtree(old, ignore_errors=True)
    root.mkdir(parents=True)
    start = time.perf_counter()
    world = build(root / "store", spec, cases, reserved)
    world.build_seconds = time.perf_counter() - start
    saved = {
        "ids": world.ids,
        "retired": sorted(world.retired),
        "distractors": world.distractors,
        "nodes": world.nodes,
        "build_seconds": round(world.build_seconds, 2),
        "phases": world.phases,
    }
    manifest.write_text(json.dumps(saved), encoding="utf-8")
    return world


def build(root: Path, spec: Spec, cases: Cases, reserved: list[str]) -> World:
    phases: dict[str, float] = {}
    clock = time.perf_counter()

    def phase(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        phases[name] = round(now - clock, 2)
        clock = now

    store, _ = Store.init(root)
    wanted = set(spec.labels)
    facts = [fact for fact in cases.raw["facts"] if fact["label"] in wanted]
    fixes = [fix for fix in cases.raw["corrections"] if set(fix["targets"]) <= wanted]
    lines = []
    for fact in facts:
        line: dict[str, Any] = {
            "content": fact["content"],
            "source": "eval:cases",
            "type": fact["type"],
            "tags": [],
        }
        if fact.get("project"):
            line["scope"] = {"project": fact["project"]}
        if fact.get("key"):
            line["key"] = fact["key"]
        if fact.get("questions"):
            line["questions"] = fact["questions"]
        lines.append(line)
    result = api.import_jsonl(store, jsonl(lines), name="eval-facts")
    if len(result.memory_ids) != len(facts):
        raise SystemExit(f"{spec.name}: {len(facts) - len(result.memory_ids)} case facts were skipped as duplicates")
    ids = {fact["label"]: node_id for fact, node_id in zip(facts, result.memory_ids, strict=True)}
    retired: set[str] = set()
    for fix in fixes:
        targets = [ids[label] for label in fix["targets"]]
        patched = apply_patch(
            store,
            fix["operation"],
            targets,
            reason=fix.get("reason") or "evaluation correction",
            contents=fix.get("contents") or None,
        )
        for label, node in zip(fix["new"], patched.new_nodes, strict=True):
            ids[label] = node.id
        retired.update(targets)
    phase("case facts")

    pad = max(0, spec.size - len(ids))
    notes = distractors.notes(pad, seed=int(hashlib.sha256(spec.name.encode()).hexdigest()[:8], 16), reserved=reserved)
    used = 0  # keep the first notes whose memories (their successors included) fill the size exactly
    for keep, note in enumerate(notes):
        used += 2 if note.retire and note.retire[0] == "supersede" else 1
        if used > pad:
            notes = notes[:keep]
            break
    phase("distractors generated")
    owners: dict[str, str] = {}
    imported: list[tuple[distractors.Note, str]] = []
    for first in range(0, len(notes), IMPORT_BATCH):
        batch = notes[first : first + IMPORT_BATCH]
        extra = api.import_jsonl(store, jsonl([n.line for n in batch]), name=f"distractors-{first}")
        if len(extra.memory_ids) != len(batch):
            raise SystemExit(f"{spec.name}: distractors were skipped as duplicates")
        for note, node_id in zip(batch, extra.memory_ids, strict=True):
            owners[node_id] = note.line.get("scope", {}).get("project", "-")
            imported.append((note, node_id))
    phase("distractors imported")
    with store.batch():
        by_operation: dict[str, list[str]] = defaultdict(list)
        for note, node_id in imported:
            if note.retire is None:
                continue
            operation, content = note.retire
            retired.add(node_id)
            if operation == "supersede":
                patched = apply_patch(store, "supersede", [node_id], reason="distractor correction", contents=[content])
                owners[patched.new_nodes[0].id] = owners[node_id]
            else:
                by_operation[operation].append(node_id)
        for operation, node_ids in by_operation.items():
            for first in range(0, len(node_ids), 500):
                apply_patch(store, operation, node_ids[first : first + 500], reason="distractor retirement")
    phase("distractors retired")
    with contextlib.closing(_open_index(store)):
        pass  # the index follows every write; this checks it is in step with the files before any pack is timed
    phase("index check")
    world = World(spec, store, ids, retired, owners, nodes=len(ids) + len(owners), build_seconds=0.0, cached=False)
    world.phases = phases
    return world


def _open_index(store: Store) -> Any:
    from cclg.ledger.index import open_index

    return open_index(store)


# ---------------------------------------------------------------- running the prompts


@dataclass
class Outcome:
    """What one prompt got on one store."""

    case: dict[str, Any]
    size: int
    store: str
    expected: list[str]  # labels
    found: list[str]
    found_top3: list[str]
    found_related: list[str]  # labels offered as possibly related (the second tier), not packed
    related_lines: int  # possibly related lines, and their characters as the Markdown shows them
    related_chars: int
    packed: list[tuple[str, float | None]]  # (name, score)
    offered: list[tuple[str, str]]  # the possibly related lines: (name, why it was offered)
    distractors: int
    stale: list[str]
    predecessor_listed: int
    predecessors: int
    seconds: float
    carried: int = 0  # a switch's previous subject (``avoid``) packed
    diagnosis: dict[str, str] = field(default_factory=dict)

    @property
    def wants_nothing(self) -> bool:
        return not self.expected


def run_prompt(world: World, case: dict[str, Any], cases: Cases) -> Outcome:
    project = case.get("project")
    start = time.perf_counter()
    result = selection.compile_pack(
        world.store,
        selection.PackRequest(
            case["text"],
            where=selection.Where(project=project),
            generated_at="eval",
            previous=case.get("previous", ""),  # the session's prompt before a follow-up
        ),
    )
    seconds = time.perf_counter() - start
    got = [entry["id"] for entry in result["memory_nodes"]]
    related = [entry["id"] for entry in result["possibly_related"]]
    expected = case["expect"]
    want = {label: world.ids[label] for label in expected}
    suppressed = {entry["id"] for entry in result.get("suppressed_nodes", [])}
    predecessors = [
        world.ids[target]
        for fix in cases.raw["corrections"]
        if set(fix["new"]) & set(expected)
        for target in fix["targets"]
    ]
    return Outcome(
        case=case,
        size=world.spec.size,
        store=world.spec.name,
        expected=list(expected),
        found=[label for label, node_id in want.items() if node_id in got],
        found_top3=[label for label, node_id in want.items() if node_id in got[:3]],
        found_related=[label for label, node_id in want.items() if node_id in related],
        related_lines=len(related),
        related_chars=sum(len(rendering.related_line(e)) + 1 for e in result["possibly_related"]),
        packed=[(world.name_of(e["id"]), e.get("score")) for e in result["memory_nodes"]],
        offered=[(world.name_of(e["id"]), e["why"]) for e in result["possibly_related"]],
        distractors=sum(1 for node_id in got if node_id in world.distractors),
        stale=[world.name_of(node_id) for node_id in [*got, *related] if node_id in world.retired],
        predecessor_listed=sum(1 for node_id in predecessors if node_id in suppressed),
        predecessors=len(predecessors),
        seconds=seconds,
        carried=sum(1 for label in case.get("avoid", []) if world.ids.get(label) in got),
    )


def diagnose(world: World, text: str, project: str | None, label: str) -> str:
    """Where the expected memory stands in plain BM25, and the relevance decision's evidence for it."""
    try:
        from cclg.ledger.index import open_index
        from cclg.retrieval import relevance
        from cclg.retrieval.query import Where
        from cclg.retrieval.search import bm25

        index = open_index(world.store)
        try:
            where = Where(project=project)
            hits = bm25(index, text, where, limit=300)
            rank = next((i for i, hit in enumerate(hits, 1) if hit.id == world.ids[label]), None)
            if rank is None:
                return "not in BM25 top 300"
            pool = max(rank, 36)  # every candidate's evidence, not only the first runner-up's
            kept, _, out = relevance.relevant(index, text, where, limit=pool, runners_up=pool)
            hit = next((h for h in kept if h.id == world.ids[label]), None)
            if hit is None:
                hit = next((h for h, _ in out if h.id == world.ids[label]), None)
            evidence = hit.evidence.to_dict() if hit is not None and hit.evidence is not None else "not judged"
            return f"BM25 rank {rank}, evidence {evidence}"
        finally:
            index.close()
    except Exception as exc:  # diagnostics only: the library's internals may change
        return f"(no diagnosis: {type(exc).__name__})"


def evaluate_size(
    size: int, cases: Cases, args: argparse.Namespace, reserved: list[str], log: Any
) -> tuple[list[Outcome], dict[str, Any]]:
    specs = plan(size, cases)
    start = time.perf_counter()
    worlds = []
    for spec in specs:
        worlds.append(load_or_build(spec, cases, args.cache, args.fresh, reserved))
    built = [w for w in worlds if not w.cached]
    print(
        f"size {size}: {len(worlds)} store(s), {sum(w.nodes for w in worlds)} memories; "
        f"{len(built)} built in {time.perf_counter() - start:.1f} s"
        + (f" (building took {sum(w.build_seconds for w in worlds):.1f} s when first built)" if not built else ""),
        file=log,
    )
    home = {label: world for world in worlds for label in world.ids}
    for world in worlds:  # warm every index and cache before timing
        selection.compile_pack(world.store, selection.PackRequest("warm up the index", generated_at="eval"))
    outcomes = []
    for case in selected(cases.queries, args):
        labels = case["expect"] + case.get("gone", [])
        outcomes.append(run_prompt(home[labels[0]], case, cases))
    for number, case in enumerate(selected(cases.off_topic, args)):
        targets = [w for w in worlds if case.get("near") in w.spec.groups] or [worlds[number % len(worlds)]]
        runs = [run_prompt(world, case, cases) for world in targets]
        outcome = max(runs, key=lambda o: len(o.packed))
        outcome.seconds = statistics.median(o.seconds for o in runs)
        outcomes.append(outcome)
    if args.verbose:
        for outcome in outcomes:
            if set(outcome.found) != set(outcome.expected) or (outcome.wants_nothing and outcome.packed):
                world = next(w for w in worlds if w.spec.name == outcome.store)
                for label in set(outcome.expected) - set(outcome.found):
                    outcome.diagnosis[label] = diagnose(world, outcome.case["text"], outcome.case.get("project"), label)
    times = sorted(o.seconds for o in outcomes)
    slowest = max(outcomes, key=lambda o: o.seconds) if outcomes else None
    timing = {
        "size": size,
        "stores": len(worlds),
        "memories": sum(w.nodes for w in worlds),
        "packs": len(times),
        "median_ms": round(1000 * statistics.median(times), 2) if times else None,
        "p95_ms": round(1000 * times[min(len(times) - 1, round(0.95 * (len(times) - 1)))], 2) if times else None,
        "max_ms": round(1000 * slowest.seconds, 1) if slowest else None,
        "slowest": slowest.case["id"] if slowest else None,
        "slowest_chars": len(slowest.case["text"]) if slowest else None,
        "build_s": round(sum(w.build_seconds for w in worlds), 1),
        "build_phases_s": {
            name: round(sum(w.phases.get(name, 0.0) for w in worlds), 1)
            for name in dict.fromkeys(name for w in worlds for name in w.phases)
        },
        "built_now": len(built),
    }
    return outcomes, timing


def ask_inside(cases: Cases) -> None:
    """``--inside``: every prompt that names no ``project`` is asked inside one, as the hook asks it (the
    project of the repository it works in): the project of the facts it needs, or the one its vocabulary
    brushes against (``near``); a question about the team's notes, and a prompt near no project, inside
    the first project's repository."""
    projects = list(dict.fromkeys(fact["project"] for fact in cases.raw["facts"] if fact.get("project")))
    for case in cases.queries + cases.off_topic:  # the team's notes have no project: asked in the first
        labels = case["expect"] + case.get("gone", [])
        group = group_of(labels[0]) if labels else case.get("near")
        case.setdefault("project", group if group in projects else projects[0])


def selected(cases: list[dict[str, Any]], args: argparse.Namespace) -> list[dict[str, Any]]:
    return [
        case
        for case in cases
        if (args.split == "all" or case["split"] == args.split)
        and (args.category is None or args.category in case["category"])
        and (not getattr(args, "follow_ups", False) or "previous" in case)
    ]


# ---------------------------------------------------------------- tallies and the table


@dataclass
class Tally:
    prompts: int = 0
    expected: int = 0
    found: int = 0
    found_top3: int = 0
    found_either: int = 0  # in the pack or among its possibly related
    related_lines: int = 0
    related_chars: int = 0
    stale: int = 0
    nothing_wanted: int = 0
    nothing_got_some: int = 0
    packs: int = 0
    nodes: int = 0
    distractors: int = 0
    predecessors: int = 0
    predecessor_listed: int = 0
    switches: int = 0
    carried: int = 0

    def add(self, outcome: Outcome) -> None:
        self.prompts += 1
        self.stale += len(outcome.stale)
        self.related_lines += outcome.related_lines
        self.related_chars += outcome.related_chars
        if outcome.wants_nothing:
            self.nothing_wanted += 1
            self.nothing_got_some += bool(outcome.packed)
            return
        self.expected += len(outcome.expected)
        self.found += len(outcome.found)
        self.found_top3 += len(outcome.found_top3)
        self.found_either += len(set(outcome.found) | set(outcome.found_related))
        self.packs += 1
        self.nodes += len(outcome.packed)
        self.distractors += outcome.distractors
        self.predecessors += outcome.predecessors
        self.predecessor_listed += outcome.predecessor_listed
        self.switches += bool(outcome.case.get("avoid"))
        self.carried += outcome.carried

    def row(self) -> dict[str, Any]:
        def share(a: int, b: int) -> float | None:
            return round(a / b, 3) if b else None

        return {
            "prompts": self.prompts,
            "recall@12": share(self.found, self.expected),
            "recall@3": share(self.found_top3, self.expected),
            "recall_tiers_1_2": share(self.found_either, self.expected),
            "related_lines_per_prompt": share(self.related_lines, self.prompts),
            "related_chars_per_prompt": share(self.related_chars, self.prompts),
            "expected": self.expected,
            "stale_leaks": self.stale,
            "nothing_expected": self.nothing_wanted,
            "nothing_expected_got_memory": self.nothing_got_some,
            "nodes_per_pack": share(self.nodes, self.packs),
            "distractors_per_pack": share(self.distractors, self.packs),
            "predecessor_listed": self.predecessor_listed,
            "predecessors": self.predecessors,
            "switches": self.switches,
            "carried_over": self.carried,
        }


def tally(outcomes: list[Outcome]) -> list[dict[str, Any]]:
    cells: dict[tuple[int, str, str], Tally] = defaultdict(Tally)
    for outcome in outcomes:
        for split in (outcome.case["split"], "all"):
            for category in [*outcome.case["category"], "all"]:
                if category == "all" and "off_topic" in outcome.case["category"]:
                    continue  # "all" is the on-topic summary; off-topic has its own row
                cells[(outcome.size, split, category)].add(outcome)
    order = {name: i for i, name in enumerate(["all", *CATEGORIES])}
    split_order = {"tune": 0, "held_out": 1, "all": 2}
    rows = []
    for (size, split, category), cell in sorted(
        cells.items(), key=lambda item: (item[0][0], split_order[item[0][1]], order[item[0][2]])
    ):
        rows.append({"size": size, "split": split, "category": category, **cell.row()})
    return rows


def _fmt(value: float | None, width: int) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}.3f}"


def print_table(rows: list[dict[str, Any]], timing: list[dict[str, Any]]) -> None:
    header = (
        f"{'size':>6} {'split':<8} {'category':<12} {'n':>4} {'R@12':>6} {'R@3':>6} {'R1+2':>6} {'stale':>5} "
        f"{'empty!':>7} {'nodes':>6} {'distr':>6} {'old listed':>10} {'t2 ln':>6} {'t2 ch':>6} {'carried':>7}"
    )
    print(header)
    print("-" * len(header))
    last = None
    for row in rows:
        if last is not None and (row["size"], row["split"]) != last:
            print()
        last = (row["size"], row["split"])
        empty = f"{row['nothing_expected_got_memory']}/{row['nothing_expected']}" if row["nothing_expected"] else "-"
        listed = f"{row['predecessor_listed']}/{row['predecessors']}" if row["predecessors"] else "-"
        carried = f"{row['carried_over']}/{row['switches']}" if row["switches"] else "-"
        print(
            f"{row['size']:>6} {row['split']:<8} {row['category']:<12} {row['prompts']:>4} "
            f"{_fmt(row['recall@12'], 6)} {_fmt(row['recall@3'], 6)} {_fmt(row['recall_tiers_1_2'], 6)} "
            f"{row['stale_leaks']:>5} {empty:>7} "
            f"{_fmt(row['nodes_per_pack'], 6)[:6]} {_fmt(row['distractors_per_pack'], 6)[:6]} {listed:>10} "
            f"{_fmt(row['related_lines_per_prompt'], 6)[:6]} {row['related_chars_per_prompt'] or 0:>6.0f} {carried:>7}"
        )
    print()
    print(
        f"{'size':>6} {'stores':>6} {'memories':>9} {'packs':>5} {'median ms':>9} {'p95 ms':>8} "
        f"{'slowest ms':>10} {'slowest prompt':<24} {'build s':>8}"
    )
    for t in timing:
        slowest = f"{t['slowest']} ({t['slowest_chars']} ch)"
        print(
            f"{t['size']:>6} {t['stores']:>6} {t['memories']:>9} {t['packs']:>5} {t['median_ms']:>9} {t['p95_ms']:>8} "
            f"{t['max_ms']:>10} {slowest:<24} {t['build_s']:>8}" + ("" if t["built_now"] else " (cached)")
        )


def print_misses(outcomes: list[Outcome]) -> None:
    for outcome in outcomes:
        missed = [label for label in outcome.expected if label not in outcome.found]
        leaked = outcome.wants_nothing and outcome.packed
        if not (missed or leaked or outcome.stale):
            continue
        case = outcome.case
        text = " ".join(case["text"].split())
        text = text if len(text) <= 110 else f"{text[:70]} ... {text[-35:]}"
        print(
            f"\n[{outcome.size} {case['split']} {'+'.join(case['category'])}] {case['id']} "
            f"({len(case['text'])} ch{', project=' + case['project'] if case.get('project') else ''}): {text!r}",
            file=sys.stderr,
        )
        for label in missed:
            tier = " (offered in tier 2)" if label in outcome.found_related else ""
            print(f"    missing {label}{tier}: {outcome.diagnosis.get(label, '')}", file=sys.stderr)
        if outcome.stale:
            print(f"    STALE: {outcome.stale}", file=sys.stderr)
        packed = ", ".join(f"{name} {score if score is not None else 'pinned'}" for name, score in outcome.packed[:8])
        print(f"    packed {len(outcome.packed)}: {packed}{' ...' if len(outcome.packed) > 8 else ''}", file=sys.stderr)
        if outcome.offered:
            offered = "; ".join(f"{name} ({reason})" for name, reason in outcome.offered)
            print(f"    possibly related {len(outcome.offered)}: {offered}", file=sys.stderr)


# ---------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cases", type=Path, default=HERE / "eval_cases.json")
    parser.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)), help="store sizes (100000 is opt-in)")
    parser.add_argument(
        "--questions",
        nargs="?",
        type=Path,
        const=HERE / "eval_questions.json",
        help="give each case fact the questions it answers (default file: eval_questions.json)",
    )
    parser.add_argument("--split", choices=[*SPLITS, "all"], default="all")
    parser.add_argument("--category", choices=CATEGORIES)
    parser.add_argument(
        "--follow-ups", action="store_true", help="only the follow-ups (cases with the session's previous prompt)"
    )
    parser.add_argument(
        "--no-previous", action="store_true", help="judge every follow-up alone, without its previous prompt"
    )
    parser.add_argument(
        "--inside",
        action="store_true",
        help="every prompt asked inside a project's repository, as the hook asks it (see the module's docstring)",
    )
    parser.add_argument("--verbose", action="store_true", help="list every miss with its diagnosis and the pack")
    parser.add_argument("--json", type=Path, help="write every row, timing and outcome to this file ('-' for stdout)")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "cclg-eval-stores")
    parser.add_argument("--fresh", action="store_true", help="rebuild the stores even when cached")
    parser.add_argument("--check", action="store_true", help="check the cases and print their counts; build nothing")
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="override a cclg.retrieval.relevance constant"
    )
    parser.add_argument(
        "--sweep", metavar="NAME=V1,V2,...", help="one cclg.retrieval.relevance constant's values on the tune half"
    )
    parser.add_argument(
        "--semantic",
        action="store_true",
        help="semantic recall with the model loaded in this process (cclg.retrieval.semantic)",
    )
    parser.add_argument(
        "--engine",
        choices=sorted(e5_engine.ENGINES),
        help="with --semantic: embed with this engine (default: cclg's, USE); e5 comes with its tuned thresholds",
    )
    args = parser.parse_args()
    if args.engine:
        embed.ENGINES = (e5_engine.ENGINES[args.engine],)
    if args.engine == "e5":  # its cosines' scale: the thresholds chosen for it on the tune half, then --set
        for name, number in e5_engine.TUNED.items():
            _override(name, number)
    if args.semantic:
        semantic.IN_PROCESS = True
    else:  # lexical only: no helper process may answer (or be started for each of the eval's stores)
        os.environ["CCLG_SEMANTIC"] = "off"

    cases = Cases.load(args.cases, args.questions)
    if args.no_previous:  # the follow-ups as the pack judged them before it read the session's previous prompt
        for case in cases.queries + cases.off_topic:
            if "previous" in case:
                case["previous"] = ""
    if args.inside:
        ask_inside(cases)
    log = sys.stderr
    for problem in cases.problems:
        print(f"case problem: {problem}", file=log)
    for line in cases.paraphrase_report:
        print(f"paraphrase shares more than one content word: {line}", file=log)
    counts = cases.counts()
    if args.check:
        print(json.dumps(counts, ensure_ascii=False, indent=1))
        raise SystemExit(1 if cases.problems or cases.paraphrase_report else 0)
    if cases.problems:
        raise SystemExit(2)
    for assignment in args.set:
        name, _, value = assignment.partition("=")
        _override(name, float(value))
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    reserved = cases.reserved_terms()
    args.cache.mkdir(parents=True, exist_ok=True)
    if args.sweep:
        sweep(sizes, cases, args, reserved)
        return

    gate = {name: value for name, value in vars(relevance).items() if name.isupper() and isinstance(value, float | int)}
    print(
        f"{counts['facts']} facts, {counts['corrections']} corrections, {len(cases.queries)} on-topic queries, "
        f"{len(cases.off_topic)} off-topic prompts; split={args.split} category={args.category or 'all'}; gate {gate}",
        file=log,
    )
    outcomes: list[Outcome] = []
    timing = []
    for size in sizes:
        size_outcomes, size_timing = evaluate_size(size, cases, args, reserved, log)
        outcomes += size_outcomes
        timing.append(size_timing)
    rows = tally(outcomes)
    answering = embed.engine() if args.semantic else None
    print(f"semantic engine: {answering.model_id if answering else 'none'}", file=log)
    if args.json is not None:
        data = {
            "gate": gate,
            "engine": answering.model_id if answering else None,
            "counts": counts,
            "rows": rows,
            "timing": timing,
            "outcomes": [
                {
                    "size": o.size,
                    "id": o.case["id"],
                    "split": o.case["split"],
                    "category": o.case["category"],
                    "store": o.store,
                    "expected": o.expected,
                    "found": o.found,
                    "found_related": o.found_related,
                    "packed": o.packed,
                    "offered": o.offered,
                    "stale": o.stale,
                    "ms": round(o.seconds * 1000, 2),
                    **({"diagnosis": o.diagnosis} if o.diagnosis else {}),
                }
                for o in outcomes
            ],
        }
        text = json.dumps(data, ensure_ascii=False, indent=1)
        if str(args.json) == "-":
            print(text)
            return
        args.json.write_text(text, encoding="utf-8")
    print_table(rows, timing)
    if args.verbose:
        print_misses(outcomes)


def _override(name: str, value: float) -> None:
    """Set a constant of the relevance decision, of the pack's choice of possibly related memories, or of
    the e5 engine (``QUERY_TOKENS``)."""
    modules = (relevance, selection, e5_engine)
    module = next((m for m in modules if isinstance(getattr(m, name, None), float | int)), None)
    if module is None:
        raise SystemExit(f"{', '.join(m.__name__ for m in modules)} have no constant {name}")
    setattr(module, name, type(getattr(module, name))(value))


def sweep(sizes: list[int], cases: Cases, args: argparse.Namespace, reserved: list[str]) -> None:
    """Recall@12, off-topic prompts with memory, and nodes per pack on the tune half, for each value of one
    constant of the relevance decision."""
    name, _, values = args.sweep.partition("=")
    args.split, args.verbose = "tune", False
    print(f"{name:>20} " + " ".join(f"{f'{s}: R@12 off n/pack':>24}" for s in sizes))
    for value in (float(v) for v in values.split(",")):
        _override(name, value)
        cells = []
        for size in sizes:
            outcomes, _ = evaluate_size(size, cases, args, reserved, log=open_null())
            row = next(r for r in tally(outcomes) if r["split"] == "all" and r["category"] == "all")
            off = next((r for r in tally(outcomes) if r["split"] == "all" and r["category"] == "off_topic"), None)
            off_text = f"{off['nothing_expected_got_memory']}/{off['nothing_expected']}" if off else "-"
            cells.append(f"{_fmt(row['recall@12'], 10)} {off_text:>6} {_fmt(row['nodes_per_pack'], 6)}")
        print(f"{value:>20} " + " ".join(f"{c:>24}" for c in cells))


def open_null() -> Any:
    import io

    return io.StringIO()


if __name__ == "__main__":
    main()
