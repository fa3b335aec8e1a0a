"""What the examples share: writing their task and SFT files, and the command that does it."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"

Rows = Callable[[], Sequence[Any]] | Sequence[Any]


def write_jsonl_files(out: Path, files: dict[str, Rows], *, force: bool) -> list[Path]:
    """Write each ``name: rows`` as ``out/name`` (one JSON value a line), only if missing
    unless ``force`` (``rows`` may be a function, called only then); the files written."""
    written = []
    out.mkdir(parents=True, exist_ok=True)
    for name, rows in files.items():
        path = out / name
        if force or not path.exists():
            values = rows() if callable(rows) else rows
            path.write_text("".join(json.dumps(row) + "\n" for row in values))
            written.append(path)
    return written


def data_main(description: str, write_data: Callable[..., list[Path]],
              argv: Sequence[str]) -> None:
    """``python <example>.py [--out DIR] [--force]``: write the example's data files."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", type=Path, default=DATA)
    parser.add_argument("--force", action="store_true", help="overwrite existing files")
    args = parser.parse_args(argv)
    for path in write_data(args.out, force=args.force):
        print(f"wrote {path}")
