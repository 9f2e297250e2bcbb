"""``python -m cclg`` runs the command line."""

from cclg.cli import main

main()
