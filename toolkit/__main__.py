"""``python -m toolkit``: the command line (same as ``toolkit``)."""

from toolkit.cli import main

main()
