"""docs/metrics.md promises every metric: each name the code logs is in it."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PREFIXES = ("rollout", "reward", "adv", "loss", "perf", "eval", "sft", "alarm")
# a quoted metric name, or the constant start of an f-string one ("perf/staleness_{lag}")
NAME = re.compile(r"""["'](?:f["'])?((?:""" + "|".join(PREFIXES) + r""")/[A-Za-z0-9_@.-]+)""")


def logged_names() -> set[str]:
    names = set()
    for path in (REPO / "src" / "turnrl").rglob("*.py"):
        names.update(NAME.findall(path.read_text(encoding="utf-8")))
    return names


def test_every_logged_metric_is_in_the_glossary():
    glossary = (REPO / "docs" / "metrics.md").read_text(encoding="utf-8")
    names = logged_names()
    assert len(names) > 60  # the scan finds them
    missing = sorted(n for n in names if n not in glossary
                     and not (n.startswith("alarm/") and f"`{n.removeprefix('alarm/')}`"
                              in glossary))
    assert missing == [], f"add these to docs/metrics.md: {missing}"
