"""Runs for tests: the arguments of a real tiny `turnrl train` (the ``tiny_run`` fixture)
and finished runs written by hand for `turnrl compare`."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from turnrl.config import TinyConfig

# The smallest shape that still has every part of the architecture (GQA: 2 query heads, 1 kv).
TINY = TinyConfig(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1,
                  intermediate_size=64)

# A real run of `turnrl train`, small enough for seconds: easy arithmetic (answers 0..2)
# after a short SFT, so groups have mixed rewards; its report, samples and meta are read by
# tests/smoke/test_report_run.py and the browser tests.
TINY_RUN = [
    "env.id=arithmetic-v0", "env.kwargs={min_value: 0, max_value: 1}",
    "rollout.max_new_tokens=4", "train.steps=4", "train.n_groups=2", "train.group_size=4",
    "train.mini_batch_size=8", "train.micro_batch_size=4", "train.eval_every=2",
    "train.save_samples=8", "sft.episodes=50", "sft.lr=3e-2", "sft.epochs=4",
    "sft.batch_size=16", "eval.episodes=8", "log.progress=false", "run.threads=1",
    "model.path=tiny-random", *(f"model.tiny.{key}={getattr(TINY, key)}" for key in (
        "hidden_size", "num_layers", "num_heads", "num_kv_heads", "intermediate_size")),
]



def write_scored_runs(root: Path, preset: str, scores: list[float],
                      env: str = "frozenlake-v0", curve: float = 0.0) -> list[Path]:
    """Finished runs of ``preset`` on ``env``, one per score (its held-out success), whose
    ``rollout/success`` climbs 0.1 a step from ``curve`` (turnrl compare's input)."""
    paths = []
    for seed, score in enumerate(scores):
        run = root / f"{preset}-{env}-s{seed}"
        run.mkdir(parents=True)
        (run / "config.yaml").write_text(yaml.safe_dump(
            {"env": {"id": env}, "algo": {"preset": preset}, "run": {"seed": seed}}))
        rows = [{"step": s, "phase": "train", "rollout/success": curve + 0.1 * s + 0.01 * seed}
                for s in range(1, 5)]
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (run / "eval.json").write_text(json.dumps({"after": {"success": score}}))
        paths.append(run)
    return paths
