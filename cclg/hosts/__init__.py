"""Hosts: connecting cclg to Claude Code and Codex, by editing their configuration.

- ``config_text``: editing a host's JSON and TOML as text, so every byte cclg did not add stays;
- ``codex_trust``: Codex's trust in the hooks ``install`` wrote, asked of Codex's app server;
- ``install``: ``cclg install`` / ``uninstall``: the hook templates (``templates/``, linked from
  the repository's ``hooks/``), the MCP server's entry, the store's code-graph setting.
"""
