"""``python -m keyshared``: the command line."""

from keyshared.cli import main

raise SystemExit(main())
