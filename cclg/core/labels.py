"""Trust, sensitivity, retention: the vocabulary of a memory's labels, their defaults, the
cautious reading of a value outside the vocabulary, and the ceiling of what a writer may give.
"""

from __future__ import annotations

from cclg.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Kept in a node's metadata (where the format allows extra data), from most to least trusted /
# least to most sensitive / most to least kept.
TRUST = ("trusted", "untrusted", "quarantined")
SENSITIVITY = ("public", "internal", "confidential", "restricted")
RETENTION = ("required", "preferred", "optional")
# A memory nobody vouched for is untrusted: only the user (the CLI) says "trusted".
DEFAULT_TRUST = "untrusted"
DEFAULT_SENSITIVITY = "internal"
DEFAULT_RETENTION = "optional"


def labels_of(metadata: dict[str, Any]) -> tuple[str, str, str]:
    """(trust, sensitivity, retention) of a node's metadata, defaults filled in. A value outside
    the vocabulary (a hand edit) is read the cautious way: quarantined, restricted."""
    trust = metadata.get("trust", DEFAULT_TRUST)
    sensitivity = metadata.get("sensitivity", DEFAULT_SENSITIVITY)
    retention = metadata.get("retention", DEFAULT_RETENTION)
    return (
        trust if trust in TRUST else "quarantined",
        sensitivity if sensitivity in SENSITIVITY else "restricted",
        retention if retention in RETENTION else DEFAULT_RETENTION,
    )


def least_trusted(*levels: str) -> str:
    return max(levels, key=TRUST.index)


# A writer's ceiling is the most trust it may give (``max_trust``): trusted for the user (the CLI),
# untrusted for an MCP caller, a container, an import, the hook and a distilled proposal. Any writer
# but the user also never pins: retention required (in every pack) becomes preferred.
UNPINNED_RETENTION = "preferred"


def capped_labels(chosen: dict[str, str], max_trust: str) -> dict[str, str]:
    """``chosen`` (trust, sensitivity, retention, all in their vocabularies) within the ceiling of a
    writer trusted at most ``max_trust``; what a new memory of that writer may carry."""
    capped = {**chosen, "trust": least_trusted(chosen["trust"], max_trust)}
    if max_trust != "trusted" and capped["retention"] == "required":
        capped["retention"] = UNPINNED_RETENTION
    return capped


def lowered_labels(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """What ``after`` changed of ``before`` (``"trust trusted -> untrusted"``), label by label."""
    return [f"{name} {value} -> {after[name]}" for name, value in before.items() if after.get(name, value) != value]


def check_labels(trust: str | None = None, sensitivity: str | None = None, retention: str | None = None) -> None:
    """``UsageError`` for a value outside its vocabulary."""
    for name, value, allowed in (
        ("trust", trust, TRUST),
        ("sensitivity", sensitivity, SENSITIVITY),
        ("retention", retention, RETENTION),
    ):
        if value is not None and value not in allowed:
            raise UsageError(f"unknown {name} {value!r}; use one of {', '.join(allowed)}")
