"""Write ``configs/data/addition.jsonl``: every ``What is a + b?`` with a two-digit ``a`` and a
one-digit ``b`` (810 questions), shuffled with seed 0.

``configs/dataset.yaml`` trains ``dataset-v0`` on it. Every held-out question (``subset:
test``, a fifth of the rows) is one the model never saw, but each of its parts is: the ones
digit is ``(a mod 10 + b) mod 10`` and the tens digit is ``a``'s or one more (the carry), so
a model can generalise to it. Run ``python scripts/make_addition.py`` from anywhere to rewrite
it (``python scripts/make_addition.py OUT.jsonl`` writes elsewhere).
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "configs" / "data" / "addition.jsonl"


def write(out: Path = DATA) -> None:
    rows = [{"question": f"What is {a} + {b}?", "answer": str(a + b)}
            for a in range(10, 100) for b in range(1, 10)]
    random.Random(0).shuffle(rows)
    out.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    print(f"{out}: {len(rows)} questions")


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else DATA)
