"""The records of cclg.format.v0.1: MemoryNode, MemoryPatch, MemoryEdge, Session.

Records are plain classes (see ``Record``). ``to_dict()`` emits fields in the contract's
canonical order (read from ``cclg.format``); ``from_dict(data, where=...)`` parses
strictly: an unknown schema version, a missing required field, a wrong type, an
unknown field or an id with the wrong prefix is a ``ValidationError`` that names
the file (``where``) and the field, and lists every problem at once.

Ids, times and content hashes come from ``cclg.core.ids``; strict field reading from
``cclg.core.fields``.
"""

from __future__ import annotations

import re

from cclg import format as fmt
from cclg.core.fields import FieldReader, indented_json, ordered
from cclg.core.ids import content_hash, is_valid_id, is_valid_session_id, new_id, normalize_text, now_iso, parse_time
from cclg.errors import UsageError, ValidationError

TYPE_CHECKING = False  # typing costs the hook ~4 ms of start-up; annotations are strings anyway
if TYPE_CHECKING:
    from typing import Any

# ---------------------------------------------------------------- record classes


class Record:
    """Base of cclg's record classes: equality and repr over the instance's fields.

    The classes are written out by hand rather than with ``dataclasses``: importing
    dataclasses (which imports ``inspect``) and generating each class costs about
    35 ms of start-up, which the hook would pay on every prompt.
    """

    __hash__ = None  # type: ignore[assignment]  # mutable, so not hashable

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={value!r}" for name, value in vars(self).items())
        return f"{type(self).__name__}({fields})"


class Scope(Record):
    """Who and where a memory applies to. ``level`` drives scope precedence."""

    def __init__(
        self,
        user: str | None = "user_local",
        org: str | None = None,
        workspace: str | None = None,
        project: str | None = None,
        agent: str | None = "global",
        session: str | None = None,
    ) -> None:
        self.user = user
        self.org = org
        self.workspace = workspace
        self.project = project
        self.agent = agent
        self.session = session

    @property
    def level(self) -> str:
        """``session``, ``project``, ``workspace`` or ``global``: the narrowest one set."""
        for level in fmt.SCOPE_PRECEDENCE[:-1]:
            if getattr(self, level):
                return level
        return fmt.SCOPE_PRECEDENCE[-1]

    def to_dict(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in fmt.SCOPE_KEYS}

    @classmethod
    def read(cls, r: FieldReader, name: str, value: Any) -> Scope:
        data = r.get(name, "dict", value)
        for key in data:
            if key not in fmt.SCOPE_KEYS:
                r.problem(f"{name}.{key}", f"is not a scope key ({', '.join(fmt.SCOPE_KEYS)})")
        values = {}
        for key in fmt.SCOPE_KEYS:
            if key not in data:
                r.problem(f"{name}.{key}", "is required but missing")
            values[key] = r.get(f"{name}.{key}", "str?", data.get(key))
        return cls(**values)


class Source(Record):
    """Where a memory came from: a label and pointers into raw evidence."""

    def __init__(
        self,
        label: str | None = None,
        session_ids: list[str] | None = None,
        turn_ids: list[str] | None = None,
        raw_spans: list[dict[str, Any]] | None = None,
        tool_result_ids: list[str] | None = None,
        artifact_ids: list[str] | None = None,
        quote: str | None = None,
    ) -> None:
        self.label = label
        self.session_ids = [] if session_ids is None else session_ids
        self.turn_ids = [] if turn_ids is None else turn_ids
        self.raw_spans = [] if raw_spans is None else raw_spans
        self.tool_result_ids = [] if tool_result_ids is None else tool_result_ids
        self.artifact_ids = [] if artifact_ids is None else artifact_ids
        self.quote = quote

    def to_dict(self) -> dict[str, Any]:
        return ordered("source", self.__dict__, optional=("quote",))

    @classmethod
    def read(cls, r: FieldReader, name: str, value: Any) -> Source:
        data = r.get(name, "dict", value)
        known = fmt.canonical_order("source")
        for key in fmt.required_fields("source"):
            if key not in data:
                r.problem(f"{name}.{key}", "is required but missing")
        for key in data:
            if key not in known:
                r.problem(f"{name}.{key}", "is not a field of source")
        spans = r.get(f"{name}.raw_spans", "list[dict]", data.get("raw_spans", []))
        for i, span in enumerate(spans):
            where = f"{name}.raw_spans[{i}]"
            r.get(f"{where}.source_id", "str", span.get("source_id"))
            r.get(f"{where}.turn_id", "str?", span.get("turn_id"))
            start = r.get(f"{where}.char_start", "int", span.get("char_start"))
            end = r.get(f"{where}.char_end", "int", span.get("char_end"))
            if not 0 <= start <= end:
                r.problem(where, f"must have 0 <= char_start <= char_end, got {start}..{end}")
        result = cls(
            label=r.get(f"{name}.label", "str?", data.get("label")),
            session_ids=r.get(f"{name}.session_ids", "list[str]", data.get("session_ids", [])),
            turn_ids=r.get(f"{name}.turn_ids", "list[str]", data.get("turn_ids", [])),
            raw_spans=list(spans),
            tool_result_ids=r.get(f"{name}.tool_result_ids", "list[str]", data.get("tool_result_ids", [])),
            artifact_ids=r.get(f"{name}.artifact_ids", "list[str]", data.get("artifact_ids", [])),
            quote=r.get(f"{name}.quote", "str?", data.get("quote")),
        )
        return result


def empty_relations() -> dict[str, list[str]]:
    return {kind: [] for kind in fmt.RELATION_KINDS}


def _read_relations(r: FieldReader, name: str, value: Any) -> dict[str, list[str]]:
    data = r.get(name, "dict", value)
    relations = empty_relations()
    for kind, ids in data.items():
        if kind not in relations:
            r.problem(f"{name}.{kind}", f"is not a relation kind ({', '.join(fmt.RELATION_KINDS)})")
            continue
        relations[kind] = r.id_list(f"{name}.{kind}", "mem", ids)
    return relations


class Retrieval(Record):
    """Precomputed lookup keys of a node."""

    def __init__(
        self,
        sparse_keys: list[str] | None = None,
        dense_text: str = "",
        entity_keys: list[str] | None = None,
        temporal_keys: list[str] | None = None,
    ) -> None:
        self.sparse_keys = [] if sparse_keys is None else sparse_keys
        self.dense_text = dense_text
        self.entity_keys = [] if entity_keys is None else entity_keys
        self.temporal_keys = [] if temporal_keys is None else temporal_keys

    def to_dict(self) -> dict[str, Any]:
        return ordered("retrieval", self.__dict__)

    @classmethod
    def read(cls, r: FieldReader, name: str, value: Any) -> Retrieval:
        data = r.get(name, "dict", value)
        for key in fmt.required_fields("retrieval"):
            if key not in data:
                r.problem(f"{name}.{key}", "is required but missing")
        for key in data:
            if key not in fmt.canonical_order("retrieval"):
                r.problem(f"{name}.{key}", "is not a field of retrieval")
        return cls(
            sparse_keys=r.get(f"{name}.sparse_keys", "list[str]", data.get("sparse_keys", [])),
            dense_text=r.get(f"{name}.dense_text", "str", data.get("dense_text", "")),
            entity_keys=r.get(f"{name}.entity_keys", "list[str]", data.get("entity_keys", [])),
            temporal_keys=r.get(f"{name}.temporal_keys", "list[str]", data.get("temporal_keys", [])),
        )


_WORD_RE = re.compile(r"[^\s,.;:!?()\[\]{}\"'`<>]+")


def retrieval_for(content: str, max_keys: int = 64) -> Retrieval:
    """Sparse keys (lower-cased words of three or more characters, sorted) and dense text."""
    words = {w.strip("-_/").lower() for w in _WORD_RE.findall(normalize_text(content))}
    keys = sorted(w for w in words if len(w) >= 3)[:max_keys]
    return Retrieval(sparse_keys=keys, dense_text=content)


# ---------------------------------------------------------------- MemoryNode


class MemoryNode(Record):
    def __init__(
        self,
        id: str,
        type: str,
        scope: Scope,
        key: str | None,
        content: str,
        status: str,
        confidence: float,
        priority: str,
        created_at: str,
        updated_at: str,
        effective_from: str,
        effective_until: str | None,
        source: Source,
        relations: dict[str, list[str]],
        retrieval: Retrieval,
        metadata: dict[str, Any],
        tags: list[str] | None = None,
        schema_version: str = fmt.NODE_SCHEMA,
    ) -> None:
        self.id = id
        self.type = type
        self.scope = scope
        self.key = key
        self.content = content
        self.status = status
        self.confidence = confidence
        self.priority = priority
        self.created_at = created_at
        self.updated_at = updated_at
        self.effective_from = effective_from
        self.effective_until = effective_until
        self.source = source
        self.relations = relations
        self.retrieval = retrieval
        self.metadata = metadata
        self.tags = [] if tags is None else tags
        self.schema_version = schema_version

    def to_dict(self) -> dict[str, Any]:
        values = dict(self.__dict__)
        values["scope"] = self.scope.to_dict()
        values["source"] = self.source.to_dict()
        values["relations"] = {kind: list(self.relations.get(kind, [])) for kind in fmt.RELATION_KINDS}
        values["retrieval"] = self.retrieval.to_dict()
        return ordered("memory_node", values)

    @classmethod
    def from_dict(cls, data: Any, where: str = "<node>") -> MemoryNode:
        r = FieldReader(data, where, "memory_node")
        r.check_fields("memory_node")
        r.const("schema_version", fmt.NODE_SCHEMA)
        node = cls(
            id=r.ident("id", "mem"),
            type=r.enum("type", fmt.NODE_TYPES),
            scope=Scope.read(r, "scope", r.data.get("scope", {})),
            key=r.field("key", "str?"),
            content=r.field("content", "str", ""),
            status=r.enum("status", fmt.NODE_STATUSES),
            confidence=r.confidence("confidence"),
            priority=r.field("priority", "str", "normal"),
            created_at=r.time("created_at"),
            updated_at=r.time("updated_at"),
            effective_from=r.time("effective_from"),
            effective_until=r.time("effective_until", nullable=True),
            source=Source.read(r, "source", r.data.get("source", {})),
            relations=_read_relations(r, "relations", r.data.get("relations", {})),
            retrieval=Retrieval.read(r, "retrieval", r.data.get("retrieval", {})),
            metadata=r.field("metadata", "dict", {}),
            tags=r.field("tags", "list[str]", []),
        )
        if isinstance(r.data.get("content"), str) and not node.content.strip():
            r.problem("content", "must not be empty")
        r.finish()
        return node

    @property
    def stored_hash(self) -> str | None:
        value = self.metadata.get("content_hash")
        return value if isinstance(value, str) else None


# The questions a memory answers, in the words a user would ask with (``metadata.questions``: the
# CCLG format's metadata is a free map, so the reference implementation reads the node as before).
# Search and relevance read them like content; they are never rendered as the memory and are no
# evidence of its truth.
QUESTIONS = "questions"
MAX_QUESTIONS = 5
QUESTION_CHARS = 200


def node_questions(node: MemoryNode) -> list[str]:
    """The questions ``node`` answers (``metadata.questions``): its strings, at most ``MAX_QUESTIONS``
    of at most ``QUESTION_CHARS`` each, also in a record another program wrote."""
    value = node.metadata.get(QUESTIONS)
    found = [q[:QUESTION_CHARS] for q in value if isinstance(q, str)] if isinstance(value, list) else []
    return found[:MAX_QUESTIONS]


def checked_questions(questions: list[str]) -> list[str]:
    """``questions`` stripped, or a ``UsageError`` saying what is wrong: more than ``MAX_QUESTIONS``,
    an empty one, one on several lines, one longer than ``QUESTION_CHARS``."""
    if len(questions) > MAX_QUESTIONS:
        raise UsageError(f"a memory carries at most {MAX_QUESTIONS} questions, got {len(questions)}")
    checked = []
    for question in questions:
        text = question.strip()
        if not text:
            raise UsageError("a question must not be empty")
        if "\n" in text or "\r" in text:
            raise UsageError(f"a question is one line: {text[:60]!r}")
        if len(text) > QUESTION_CHARS:
            raise UsageError(f"a question is at most {QUESTION_CHARS} characters, got {len(text)}: {text[:60]!r}...")
        checked.append(text)
    return list(dict.fromkeys(checked))


def set_questions(node: MemoryNode, questions: list[str]) -> None:
    """Give ``node`` the ``questions`` it answers (checked); none takes them away."""
    checked = checked_questions(questions)
    if checked:
        node.metadata[QUESTIONS] = checked
    else:
        node.metadata.pop(QUESTIONS, None)


def new_node(
    content: str,
    *,
    type: str = "memory",
    scope: Scope | None = None,
    key: str | None = None,
    status: str | None = None,
    source: Source | None = None,
    confidence: float = 1.0,
    priority: str = "normal",
    tags: list[str] | None = None,
    metadata: dict[str, Any] | None = None,
    effective_from: str | None = None,
    effective_until: str | None = None,
    created_at: str | None = None,
    node_id: str | None = None,
) -> MemoryNode:
    """A new node with defaults filled in and its content hash in metadata.

    The status defaults to ``active_session`` for a node scoped to a session and
    ``active`` otherwise. Values a caller chooses (type, status, confidence,
    content) are checked; a bad one is a ``ValidationError``.
    """
    scope = scope or Scope()
    stamp = created_at or now_iso()
    meta = {"created_by": "manual", "review_status": "auto_applied", "privacy": "local_default"}
    meta.update(metadata or {})
    meta["content_hash"] = content_hash(content)
    node = MemoryNode(
        id=node_id or new_id("mem"),
        type=type,
        scope=scope,
        key=key,
        content=content,
        status=status or ("active_session" if scope.session else "active"),
        confidence=confidence,
        priority=priority,
        created_at=stamp,
        updated_at=stamp,
        effective_from=effective_from or stamp,
        effective_until=effective_until,
        source=source or Source(label="manual"),
        relations=empty_relations(),
        retrieval=retrieval_for(content),
        metadata=meta,
        tags=sorted(set(tags or [])),
    )
    problems = []
    if not content.strip():
        problems.append("new node: field 'content' must not be empty")
    if type not in fmt.NODE_TYPES:
        problems.append(f"new node: field 'type' must be one of {', '.join(fmt.NODE_TYPES)}; got {type!r}")
    if node.status not in fmt.NODE_STATUSES:
        problems.append(f"new node: field 'status' must be a node status; got {node.status!r}")
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0.0 <= confidence <= 1.0:
        problems.append(f"new node: field 'confidence' must be a number from 0 to 1, got {confidence!r}")
    else:
        node.confidence = float(confidence)
    for name in ("created_at", "effective_from", "effective_until"):
        value = getattr(node, name)
        try:
            if value is not None:
                parse_time(value)
        except (TypeError, ValueError):
            problems.append(f"new node: field '{name}' must be an ISO 8601 timestamp with a timezone, got {value!r}")
    if node.scope.session is not None and not is_valid_session_id(node.scope.session):
        problems.append(f"new node: field 'scope.session' must be a session id, got {node.scope.session!r}")
    if not is_valid_id(node.id, "mem"):
        problems.append(f"new node: field 'id' must be an id starting with 'mem_', got {node.id!r}")
    if problems:
        raise ValidationError(problems[0], problems)
    return node


# ---------------------------------------------------------------- MemoryPatch


def default_resolution_policy() -> dict[str, Any]:
    return {"rule": "manual", "auto_applied": True, "requires_review": False}


class MemoryPatch(Record):
    def __init__(
        self,
        id: str,
        operation: str,
        target_ids: list[str],
        new_node_ids: list[str],
        reason: str,
        new_content: str | None,
        source: Source,
        confidence: float,
        resolution_policy: dict[str, Any],
        created_at: str,
        applied_at: str | None,
        prior_states: dict[str, str] | None = None,
        rollback_of: str | None = None,
        schema_version: str = fmt.PATCH_SCHEMA,
    ) -> None:
        self.id = id
        self.operation = operation
        self.target_ids = target_ids
        self.new_node_ids = new_node_ids
        self.reason = reason
        self.new_content = new_content
        self.source = source
        self.confidence = confidence
        self.resolution_policy = resolution_policy
        self.created_at = created_at
        self.applied_at = applied_at
        self.prior_states = {} if prior_states is None else prior_states
        self.rollback_of = rollback_of
        self.schema_version = schema_version

    def to_dict(self) -> dict[str, Any]:
        values = dict(self.__dict__)
        values["source"] = self.source.to_dict()
        return ordered("memory_patch", values, optional=("rollback_of",))

    @classmethod
    def from_dict(cls, data: Any, where: str = "<patch>", *, check_operation: bool = True) -> MemoryPatch:
        """``check_operation=False`` reads an operation outside the closed set as it is (a container
        loaded without validation); computing an effective view over it then raises."""
        r = FieldReader(data, where, "memory_patch")
        r.check_fields("memory_patch")
        r.const("schema_version", fmt.PATCH_SCHEMA)
        # The operation is checked against the closed set: an unknown one is an
        # error, never read as a harmless no-op (see cclg.ledger.lattice).
        operation = r.data.get("operation")
        if not isinstance(operation, str) or (check_operation and operation not in fmt.PATCH_OPERATIONS):
            r.problem("operation", f"must be one of {', '.join(fmt.PATCH_OPERATIONS)}; got {operation!r}")
        prior = r.field("prior_states", "dict", {})
        for node_id, status in prior.items():
            if not is_valid_id(node_id, "mem"):
                r.problem("prior_states", f"keys must be node ids, got {node_id!r}")
            if status not in fmt.NODE_STATUSES:
                r.problem(f"prior_states.{node_id}", f"must be a node status, got {status!r}")
        policy = r.field("resolution_policy", "dict", default_resolution_policy())
        patch = cls(
            id=r.ident("id", "patch"),
            operation=str(operation),
            target_ids=r.id_list("target_ids", "mem", r.data.get("target_ids", [])),
            new_node_ids=r.id_list("new_node_ids", "mem", r.data.get("new_node_ids", [])),
            reason=r.field("reason", "str", ""),
            new_content=r.field("new_content", "str?"),
            source=Source.read(r, "source", r.data.get("source", {})),
            confidence=r.confidence("confidence"),
            resolution_policy=policy,
            prior_states=dict(prior),
            rollback_of=r.ident("rollback_of", "patch", nullable=True),
            created_at=r.time("created_at"),
            applied_at=r.time("applied_at", nullable=True),
        )
        if patch.operation != "create" and "target_ids" in r.data and not patch.target_ids:
            r.problem("target_ids", f"must not be empty for a {patch.operation} patch")
        if patch.operation in NEEDS_CONTENT and not patch.new_content:
            r.problem("new_content", f"is required for a {patch.operation} patch")
        r.finish()
        return patch


# Operations whose patch must carry new content (the contract's required_non_null_for).
NEEDS_CONTENT = frozenset(
    ("create", "update", "supersede", "refine", "expand", "narrow", "merge", "split", "resolve_conflict")
)


# ---------------------------------------------------------------- MemoryEdge


class MemoryEdge(Record):
    def __init__(
        self,
        id: str,
        from_id: str,
        to_id: str,
        type: str,
        created_at: str,
        source_patch_id: str | None,
        schema_version: str = fmt.EDGE_SCHEMA,
    ) -> None:
        self.id = id
        self.from_id = from_id
        self.to_id = to_id
        self.type = type
        self.created_at = created_at
        self.source_patch_id = source_patch_id
        self.schema_version = schema_version

    def to_dict(self) -> dict[str, Any]:
        values = dict(self.__dict__)
        values["from"] = self.from_id
        values["to"] = self.to_id
        return ordered("memory_edge", values)

    @classmethod
    def from_dict(cls, data: Any, where: str = "<edge>") -> MemoryEdge:
        r = FieldReader(data, where, "memory_edge")
        r.check_fields("memory_edge")
        r.const("schema_version", fmt.EDGE_SCHEMA)
        edge = cls(
            id=r.ident("id", "edge"),
            from_id=r.ident("from", "mem"),
            to_id=r.ident("to", "mem"),
            type=r.enum("type", fmt.EDGE_KINDS),
            created_at=r.time("created_at"),
            source_patch_id=r.ident("source_patch_id", "patch", nullable=True),
        )
        r.finish()
        return edge


# ---------------------------------------------------------------- Session


class Session(Record):
    def __init__(
        self,
        id: str,
        agent: str,
        workspace: str | None,
        project: str | None,
        started_at: str,
        ended_at: str | None,
        status: str,
        created_at: str,
        updated_at: str,
        parent_session_id: str | None = None,
        branch_name: str | None = None,
        loaded_memory_ids: list[str] | None = None,
        session_overlay_ids: list[str] | None = None,
        pending_patch_ids: list[str] | None = None,
        active_task: dict[str, Any] | None = None,
        policy: dict[str, Any] | None = None,
        events: list[dict[str, Any]] | None = None,
        schema_version: str = fmt.SESSION_SCHEMA,
    ) -> None:
        self.id = id
        self.agent = agent
        self.workspace = workspace
        self.project = project
        self.started_at = started_at
        self.ended_at = ended_at
        self.status = status
        self.created_at = created_at
        self.updated_at = updated_at
        self.parent_session_id = parent_session_id
        self.branch_name = branch_name
        self.loaded_memory_ids = [] if loaded_memory_ids is None else loaded_memory_ids
        self.session_overlay_ids = [] if session_overlay_ids is None else session_overlay_ids
        self.pending_patch_ids = [] if pending_patch_ids is None else pending_patch_ids
        if active_task is None:
            active_task = {"goal": "", "open_questions": [], "active_files": []}
        self.active_task = active_task
        if policy is None:
            policy = {"promotion": "default", "sync": "disabled", "retention": "keep_raw_local"}
        self.policy = policy
        # Events embedded in the session file (as other implementations write them);
        # cclg appends its own events to sessions/<id>.events.jsonl instead.
        self.events = [] if events is None else events
        self.schema_version = schema_version

    def to_dict(self) -> dict[str, Any]:
        return ordered("session", self.__dict__)

    @classmethod
    def from_dict(cls, data: Any, where: str = "<session>") -> Session:
        r = FieldReader(data, where, "session")
        r.check_fields("session")
        r.const("schema_version", fmt.SESSION_SCHEMA)
        session_id = r.data.get("id")
        if not is_valid_session_id(session_id):
            r.problem("id", f"must be a session id (letters, digits, '.', '_', '-'), got {session_id!r}")
        session = cls(
            id=str(session_id),
            agent=r.field("agent", "str", ""),
            workspace=r.field("workspace", "str?"),
            project=r.field("project", "str?"),
            started_at=r.time("started_at"),
            ended_at=r.time("ended_at", nullable=True),
            status=r.field("status", "str", "active"),
            parent_session_id=r.field("parent_session_id", "str?"),
            branch_name=r.field("branch_name", "str?"),
            loaded_memory_ids=r.id_list("loaded_memory_ids", "mem", r.data.get("loaded_memory_ids", [])),
            session_overlay_ids=r.id_list("session_overlay_ids", "mem", r.data.get("session_overlay_ids", [])),
            pending_patch_ids=r.id_list("pending_patch_ids", "patch", r.data.get("pending_patch_ids", [])),
            active_task=r.field("active_task", "dict", {}),
            policy=r.field("policy", "dict", {}),
            events=r.field("events", "list[dict]", []),
            created_at=r.time("created_at"),
            updated_at=r.time("updated_at"),
        )
        r.finish()
        return session


# ---------------------------------------------------------------- JSON form


def dumps(record: dict[str, Any]) -> bytes:
    """The on-disk form of a record: two-space indented UTF-8 JSON and a final newline. Text that is no
    Unicode (a lone surrogate, from a JSON escape such as \\ud800) is a ``ValidationError``."""
    try:
        return (indented_json(record) + "\n").encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(f"a record holds text that is not valid Unicode (a lone surrogate): {exc}") from None
