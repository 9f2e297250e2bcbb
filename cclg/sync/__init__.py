"""Team memory over git: ``cclg sync`` shares a store's project memories through any git remote.

Modules, from the bottom up:

- ``git``: the git command line, with a timeout and the settings that keep a sync's writes the same
  on every machine (no hooks, no signing, no line-ending conversion), and the author of a sync commit;
- ``remotes``: the store's remotes (``sync/remotes.json``: name, URL, branch, the trust what it brings
  may have at most, whether raw evidence travels) and the store's own id among the stores that sync;
- ``outgoing``: what may leave (shared scopes only; never a session's memories, confidential or
  restricted ones, anything the secret detector finds, raw evidence unless asked), in the form it
  was born with, checked again right before it is written into the clone;
- ``incoming``: records arriving, read strictly, trust capped at the remote's, provenance kept, written
  as a patch is written, then settled from the whole set of patches (``cclg.ledger.view.Ledger``);
- ``engine``: one sync (fetch, merge, take in, write out, push, retried when another store pushed
  first) through a clone under the store, the dry run, and the status ``doctor`` and MCP read.
"""
