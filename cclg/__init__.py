"""cclg: a local-first, file-backed memory store for coding agents (cclg.format.v0.1).

``__all__`` is the library's public surface: ``cclg.api.__all__``, which the library's area modules
declare (``cclg/api/``). Every name in it lives in ``cclg.api`` and is loaded from there on first
use, so ``import cclg`` (which every entry point runs first, the hook included) costs nothing::

    import cclg

    store = cclg.open_store("~/.cclg")
    cclg.add_memory(store, "Tests run with pytest -q", source="user")
    print(cclg.render(cclg.compile_pack(store, cclg.PackRequest("how do I run the tests")), "markdown"))
"""

__version__ = "0.1.0"

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cclg.api import *  # noqa: F403  (what type checkers see; at run time, __getattr__ below)


def _is_module(name: str) -> bool:
    """Whether ``name`` is one of the package's own modules: ``from cclg import ledger`` asks this
    package for the attribute before it imports the module, and the answer must not cost the library."""
    import os  # loaded at interpreter start-up already

    here = os.path.dirname(__file__)
    return os.path.isfile(os.path.join(here, f"{name}.py")) or os.path.isdir(os.path.join(here, name))


def __getattr__(name: str) -> object:
    if (name.startswith("__") and name != "__all__") or _is_module(name):
        raise AttributeError(f"module 'cclg' has no attribute {name!r}")
    import importlib  # not ``from cclg import api``, which would ask this function for "api"

    api = importlib.import_module("cclg.api")
    if name != "__all__" and name not in api.__all__:
        raise AttributeError(f"module 'cclg' has no attribute {name!r}")
    return getattr(api, name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__getattr__("__all__")})  # type: ignore[misc]
