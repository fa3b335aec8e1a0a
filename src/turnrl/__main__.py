"""``python -m turnrl``: the ``turnrl`` command (the sweep starts its runs this way)."""

from turnrl.cli import main

raise SystemExit(main())
