"""Resolve import specs (from ``cclg.codegraph.parse``) to files of the repository.

``resolve_imports`` runs the language's resolver (its ``Language`` record names
it; the resolvers are in ``cclg.codegraph.resolvers``) over each spec of one file.
Paths are repo-relative POSIX paths. Only what can be known from the file list is
resolved; a spec a resolver cannot place, or one it fails on, is left out.
"""

from __future__ import annotations

from cclg.codegraph.languages import LANGUAGES
from cclg.codegraph.resolvers import file_index


def resolve_imports(
    importer: str,
    language: str,
    specs: list[str],
    files: frozenset[str],
    *,
    go_module: str | None = None,
) -> list[str]:
    """Repository files (sorted, unique, never the importer) that the import specs of ``importer`` refer to.

    ``specs`` are the ``imports`` of ``parse_source``; ``files`` every file of
    the repository (repo-relative POSIX paths); ``go_module`` the module path
    from go.mod, needed to resolve Go imports. A language the table does not
    know resolves nothing.
    """
    known = LANGUAGES.get(language)
    if known is None or not specs:
        return []
    index = file_index(files)
    found: set[str] = set()
    for spec in specs:
        try:
            found.update(known.resolver(importer, spec, index, go_module))
        except Exception:  # pragma: no cover - a spec we did not foresee is just unresolved
            continue
    found.discard(importer)
    return sorted(path for path in found if path in files)
