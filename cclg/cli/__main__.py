"""``python -m cclg.cli`` runs the command line (as ``python -m cclg`` does)."""

from cclg.cli import main

main()
