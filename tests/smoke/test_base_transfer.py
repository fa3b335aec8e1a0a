"""The pretrained base learns an env it has never seen (keypad-v0, in no part of the corpus)
faster than the random init: the same short SFT leaves it with a lower loss on the replies
(recipes/results/transfer_keypad has the whole comparison, with RL, over 5 seeds)."""

from __future__ import annotations

import json
from pathlib import Path

from turnrl.cli import main


def sft_losses(run: Path) -> list[float]:
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [r["sft/loss"] for r in records if r.get("phase") == "sft" and "sft/loss" in r]


def test_the_base_learns_a_new_env_faster_than_the_random_init(tmp_path: Path) -> None:
    runs = {}
    for model in ("tiny", "tiny-random"):
        argv = ["sft", "configs/keypad.yaml", f"model.path={model}", "sft.episodes=160",
                "sft.epochs=1", "eval.episodes=4", "run.threads=1", "log.progress=false",
                "log.tensorboard=false", "log.report=false", f"run.out_dir={tmp_path / model}"]
        assert main(argv) == 0
        runs[model] = sft_losses(tmp_path / model / "keypad")
    base, random_init = runs["tiny"], runs["tiny-random"]
    assert len(base) == len(random_init) == 5
    assert sum(base[-2:]) / 2 < 0.7 * sum(random_init[-2:]) / 2, (base, random_init)
