"""Intake: memories coming into a store from outside.

- ``new_memories``: ``cclg add`` and ``cclg import-jsonl`` (one memory or a stream of them),
  duplicates, and content a purge erased;
- ``container``: the portable ``.cclg`` file (written by ``cclg export``, checked when read);
- ``container_import``: ``cclg import-container``, bringing a container's records into a store
  (foreign records never change local memories);
- ``tables``: records as a table (JSON lines, Arrow IPC, Parquet; ``cclg export --format``), its
  columns defined once, read back and imported as memories (a view) or as a ledger.
- ``source_items``: what a source yields (``SourceItem``, ``Document``), Markdown blocks and front matter;
- ``source_kinds``: the kinds of source, one table (``SOURCE_KINDS``: a kind's reader and trust), and the
  plugins of the ``cclg.sources`` entry point group;
- ``source_sync``: the registry of sources and their sync, as patches (``cclg sources``, ``cclg import``).
"""
