"""What every benchmark script shares: where results go and how they are written."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


def write_results(results_dir: str | Path, stem: str, result: dict, table: str) -> None:
    """``<results_dir>/<stem>.json`` (the numbers) and ``<stem>.md`` (the table), atomically,
    and the table on stdout."""
    from turnrl.io import atomic_write_text

    out = Path(results_dir)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / f"{stem}.json", json.dumps(result, indent=2) + "\n")
    atomic_write_text(out / f"{stem}.md", table)
    print(table)
