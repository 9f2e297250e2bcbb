"""cclg: a local-first, file-backed memory store for coding agents (cclg.format.v0.1).

``__all__`` below is the library's public surface, the same list as
``cclg.api.__all__`` (a test keeps them equal). Every name in it lives in
``cclg.api`` and is loaded from there on first use, so ``import cclg`` (which
every entry point runs first, the hook included) costs nothing::

    import cclg

    store = cclg.open_store("~/.cclg")
    cclg.add_memory(store, "Tests run with pytest -q", source="user")
    print(cclg.render(cclg.compile_pack(store, "how do I run the tests"), "markdown"))
"""

__version__ = "0.1.0"

__all__ = [  # noqa: F405 (names served by __getattr__)
    "DEFAULT_MAX_CHARS",
    "DEFAULT_MAX_NODES",
    "FORMATS",
    "MODES",
    "AddResult",
    "Adoption",
    "CclgError",
    "ConcurrencyError",
    "Container",
    "ContainerError",
    "ContainerImportReport",
    "DiskError",
    "Finding",
    "GrepMatch",
    "Hit",
    "IllegalPatchError",
    "ImportResult",
    "NotFoundError",
    "PatchResult",
    "Report",
    "SearchIndexDamage",
    "SecretError",
    "Store",
    "StoreNotFoundError",
    "UnknownPatchOperationError",
    "UsageError",
    "ValidationError",
    "Where",
    "add_memory",
    "adopt_project",
    "audit_log",
    "build_demo_store",
    "build_node",
    "cite",
    "code_index",
    "code_search",
    "compile_pack",
    "conflicts",
    "diagnose",
    "explain_pack",
    "export_store",
    "export_to",
    "forget",
    "grep",
    "history",
    "import_container",
    "import_jsonl",
    "init_store",
    "install_host",
    "keep_raw",
    "label",
    "load_container",
    "named_memory_id",
    "open_store",
    "parse_moment",
    "parse_scope",
    "patch",
    "patch_diff",
    "read_text",
    "recall",
    "redact_store",
    "reindex",
    "render",
    "repair",
    "resolve",
    "resolve_memory_id",
    "resolve_patch_id",
    "rollback",
    "scan_secrets",
    "scope_for",
    "search_memories",
    "show",
    "status",
    "to_toml",
    "uninstall_host",
    "validate_paths",
]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cclg.api import *  # noqa: F403  (what type checkers see; at run time, __getattr__ below)


def __getattr__(name: str) -> object:
    if name not in __all__:
        raise AttributeError(f"module 'cclg' has no attribute {name!r}")
    import importlib  # not ``from cclg import api``, which would ask this function for "api"

    return getattr(importlib.import_module("cclg.api"), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
