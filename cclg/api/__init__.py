"""The library: every operation the command line, the MCP server and the hook offer, one module per area.

- ``memories``: opening a store, ids, reading, changing, erasing and auditing memories (the ledger);
- ``retrieval``: search, recall and the memory pack;
- ``learning``: sessions, the sensors, rules, the previous turn, distilling, usage;
- ``code``: the code graph;
- ``hosts``: installing cclg into Claude Code and Codex;
- ``container``: moving memory: the ``.cclg`` file, and tables (JSON lines, Arrow, Parquet);
- ``sources``: instruction files, other tools' memories and plugins, kept in step as patches;
- ``sync``: team memory over git (remotes, `cclg sync`, its status);
- ``surfaces``: what the surfaces share that is not an operation (showing outside text, the label
  vocabularies, ``--project``).
- ``lazy``: how an area module serves names from the modules below it on their first use.

Each area module declares its own ``__all__``; this package's ``__all__`` (also ``cclg.__all__``,
the public surface) is theirs together, and ``cclg.api.add_memory`` is ``cclg.api.memories.add_memory``.
Nothing here is imported up front: the hook imports one area module inside a handler
(``from cclg.api import learning``), which runs this file first, so it must cost nothing. The areas
are imported, all of them, on the first name asked of the package itself.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False
if TYPE_CHECKING:  # what type checkers see; at run time, __getattr__ below
    from cclg.api.code import *  # noqa: F403
    from cclg.api.container import *  # noqa: F403
    from cclg.api.hosts import *  # noqa: F403
    from cclg.api.learning import *  # noqa: F403
    from cclg.api.memories import *  # noqa: F403
    from cclg.api.retrieval import *  # noqa: F403
    from cclg.api.sources import *  # noqa: F403
    from cclg.api.sync import *  # noqa: F403

AREAS = ("memories", "retrieval", "learning", "code", "hosts", "container", "sources", "sync")
_owners: dict[str, str] = {}  # each public name -> its area, once ``_surface`` has read them


def _surface() -> dict[str, str]:
    """Each public name -> the area module that declares it (the areas imported on the first call)."""
    if _owners:
        return _owners
    owners: dict[str, str] = {}
    for area in AREAS:
        for name in importlib.import_module(f"{__name__}.{area}").__all__:
            if name in owners:
                raise ImportError(f"{name} is declared by both cclg.api.{owners[name]} and cclg.api.{area}")
            owners[name] = area
    globals()["__all__"] = sorted(owners)
    _owners.update(owners)
    return _owners


def __getattr__(name: str) -> object:
    if name in AREAS:  # ``from cclg.api import learning``: that module alone
        return importlib.import_module(f"{__name__}.{name}")
    owners = _surface()
    if name == "__all__":
        return globals()["__all__"]
    if name not in owners:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{owners[name]}"), name)
    globals()[name] = value  # found here from now on
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_surface()})
