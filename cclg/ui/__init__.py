"""``cclg ui``: a local web view to see what the store remembers and correct it, over the library only.

- ``html``: HTML where stored text is always data (every value escaped, links from checked ids only),
  the page's frame and the lineage graph drawn as inline SVG;
- ``pages``: the pages (overview, memories and search with the pack's explanation, one memory with its
  provenance, lineage and usage, sessions' timelines, rules and sensors, code), each reading ``cclg.api``;
- ``app``: the Starlette application, its guard (the Host header, the printed token, the CSRF token),
  the corrections (each one library call, a patch with its reason) and the server on 127.0.0.1.

It is a surface, like the command line: it imports only ``cclg.api`` and what surfaces may.
"""
