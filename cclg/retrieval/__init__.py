"""Retrieval: finding the memories a task is about, and compiling the memory pack.

Imports point down this list:

- ``query``: the types every reader shares (``Where`` a query is asked, a ``Hit``, the ``View``);
- ``embed``: sentence embeddings from a bundled multilingual model, failing open;
- ``semantic``: the semantic helper (socket server, client, vectors), failing open;
- ``search``: bm25, grep, graph, temporal and as-of search, auto mode fusing words with meaning;
- ``relevance``: which memories a prompt is about, with the evidence;
- ``usage_prior``: how often each delivered memory was used, as a bounded multiplier;
- ``selection``: choosing a pack's memories for a ``PackRequest`` under its ``Budget``;
- ``rendering``: fitting a pack to a host's cap, and its renderings (``RENDERERS``).

A retrieval signal lives in ``selection`` (ordering, the budget) or ``relevance`` (whether a
memory is about the prompt), with a named query on ``cclg.ledger.index.Index`` if it needs one.
"""
