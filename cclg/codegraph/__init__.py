"""The code graph: which files of a repository define, use and import what, and which to read first.

One job per module; imports point down this list:

- ``context``: what the hook adds to a prompt (the CodeGraphPack for the
  repository holding the agent's folder, and the background re-index);
- ``build``: indexing a repository (files, git churn, the parse cache) into the
  stored graph and its search index;
- ``history``: what the graph learns from git history (churn, files changed together);
- ``parse``: one source file -> definitions, references, import specs;
  ``resolve``: import specs -> repository files;
- ``languages``: one ``Language`` record per language, in one table, and the
  grammar and tag-query loading; the parts each record names: ``tags`` (tag
  queries), ``captures`` (capture specs and import readers), ``resolvers``
  (import resolvers);
- ``rank``: ranking files for a task, and rendering the CodeGraphPack;
  ``search_index``: the SQLite index the ranking reads (schema and writer);
  ``stored``: where graphs live in the store.

``context``, ``rank`` and ``stored`` are light (no gitpython, no tree-sitter):
the hook imports them. The tokenizers are ``cclg.core.text``'s code-search family.
"""
