"""Foundations: what every part of cclg stands on, and the store's folder itself.

No module here knows memories' meaning, only their shapes; imports point down this list:

- ``text``: every tokenizer (prose, CJK, code identifiers), the token estimate, Markdown fencing;
- ``hook_events``: the name of each hook event inside cclg (the host's names are the hook's);
- ``runtime``: where a store's helper listens (the store a hook event belongs to, the runtime folder,
  the socket, who is at its other end) and its code's fingerprint, with the standard library only;
- ``ids``: ids, times and content hashes;
- ``fields``: strict field reading and the records' JSON text;
- ``records``: the record classes (MemoryNode, MemoryPatch, MemoryEdge, Session...);
- ``secrets``: finding and redacting secrets; ``labels``: the trust, sensitivity and retention
  vocabulary; ``fencing``: marking outside text for a model (``quote_outside``) and a terminal
  (``terminal_text``);
- ``files``: atomic writes, private folders and JSON-lines logs;
- ``media``: what kind of bytes a raw file holds (its MIME type; text or binary) and how binary
  evidence is named (never shown);
- ``repository``: the project a folder belongs to (its repository's identity);
- ``config``: the store's settings, ``config.json``'s sections typed, with defaults;
- ``store``: where a store lives, every path in it, locked writes, raw evidence, recovery.

``text``, ``ids``, ``fields``, ``hook_events`` and ``runtime`` are light: the hook imports them at start-up
(``hook_events`` and ``runtime`` before it hands its event to the store's helper).
"""
