"""``python -m turnrl.cli``: the ``turnrl`` command (as ``python -m turnrl``)."""

from turnrl.cli import main

raise SystemExit(main())
