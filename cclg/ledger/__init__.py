"""The ledger: memories that change only through recorded patches, and the projections of them.

Imports point down this list:

- ``lattice``: the legal status moves and the patch operations, as data (``OperationSpec``);
- ``view``: the read model (effective view, retired ids, the contract's precedence table);
- ``index``: the SQLite/FTS5 projection; the only module that writes SQL on its tables
  (named queries on ``Index``), told what changed through one change-sink (``IndexChanges``);
- ``staging``: all-or-nothing writes of many records, finished by the next command after a crash;
- ``writer``: the patch engine and the writer of new memories (checked and staged in chunks);
- ``undo``: rollback; ``lineage``: a memory's chain of versions; ``promotion``: keeping a
  session memory;
- ``sessions``: session records, their event logs and the raw payload an event keeps;
- ``redaction``: secrets already on disk, through the one rewrite of every file holding a text;
- ``purge``: erasing one memory's content for good (the tombstone, interrupted purges);
- ``adoption``: giving a folder name's memories to one repository (``cclg project adopt``).
"""
