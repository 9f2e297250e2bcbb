"""cclg: a local-first, file-backed memory store for coding agents (cclg.format.v0.1)."""

__version__ = "0.1.0"
