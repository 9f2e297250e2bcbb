"""Names an area module serves from the modules below it, imported on the first use of one.

``cclg add`` must not load the pack compiler, nor the hook the doctor: an area module imports up
front only what its common operations need and names the rest in a table, module -> names.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing costs the hook start-up time; annotations are strings anyway
if TYPE_CHECKING:
    from collections.abc import Callable, MutableMapping


def served_on_first_use(namespace: MutableMapping[str, object], table: dict[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``namespace`` (a module's ``globals()``): a name of ``table``
    (module -> space-separated names) is imported from its module when first asked for, and kept in
    the namespace, so it is found there from then on."""

    def __getattr__(name: str) -> object:
        module = next((module for module, names in table.items() if name in names.split()), None)
        if module is None:
            raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__
