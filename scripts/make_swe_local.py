"""Write ``tests/data/swe_local/``: four generated SWE instances (one per tier) in
``swe-local-v0``'s form, ``instances.jsonl`` and a checkout of each buggy repository under
``repos/<instance_id>/`` (:func:`turnrl.envs.swe.local.write_local_instances`).

``tests/unit/test_swe_local.py`` plays them with the oracle and checks that they are what
this script writes. Run ``python scripts/make_swe_local.py`` from anywhere to rewrite them
(``python scripts/make_swe_local.py FOLDER`` writes elsewhere).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from turnrl.envs.swe import TIERS
from turnrl.envs.swe.local import write_local_instances

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "swe_local"
CHOICES = [(0, TIERS["tiny"]), (1, TIERS["small"]), (2, TIERS["medium"]), (3, TIERS["hard"])]


def write(out: Path = DATA) -> Path:
    """Rewrite ``out`` from scratch; returns the JSONL file."""
    if (out / "repos").exists():
        shutil.rmtree(out / "repos")
    out.mkdir(parents=True, exist_ok=True)
    path = write_local_instances(out, CHOICES)
    print(f"{path}: {len(CHOICES)} instances")
    return path


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else DATA)
