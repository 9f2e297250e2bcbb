"""``cclg-mcp``: the MCP server (placeholder until the MCP issue lands)."""

from __future__ import annotations

import sys


def main() -> None:
    print("cclg-mcp: the MCP server is not implemented yet; use the cclg command line meanwhile", file=sys.stderr)
    sys.exit(1)
