"""Fixed-seed runs whose metrics ``test_golden_metrics.py`` compares with recorded ones.

The ``issue-*`` and ``signal-*`` cases were recorded from commit ``a4117c1`` (before the
driver's redesign, which they proved kept behaviour). The ``turn-*`` cases were re-recorded
on 2026-12-04 after their SFT learning rate went from 3e-2 to 3e-3: at 3e-2 the SFT diverged
(gradient norms of 50 and more), which turned a CPU's rounding into different runs on
different machines.

Re-record (only when a change of behaviour is intended, and say so in the commit):
``python tests/smoke/golden_cases.py tests/smoke/data/golden.json [CASE ...]``
(the named cases only, merged into the file; all of them by default).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

# the issue's command (frozenlake after a short SFT: no reward yet, but SFT, eval and rollouts)
ISSUE_RUN = ["run.seed=0", "train.steps=3", "sft.episodes=200", "sft.epochs=1",
             "eval.episodes=16", "train.n_groups=4", "train.group_size=4",
             "train.mini_batch_size=16", "run.threads=1", "log.progress=false",
             "log.tensorboard=false", "model.path=tiny-random"]  # recorded from the random init
TINY_MODEL = ["model.path=tiny-random", "model.tiny.hidden_size=32", "model.tiny.num_layers=1",
              "model.tiny.num_heads=2", "model.tiny.num_kv_heads=1",
              "model.tiny.intermediate_size=64"]
# easy arithmetic after a strong SFT: groups with mixed rewards, so every update moves weights
SIGNAL_RUN = ["run.seed=0", "train.steps=3", "train.n_groups=2", "train.group_size=4",
              "train.mini_batch_size=8", "train.micro_batch_size=4", "sft.episodes=50",
              "sft.lr=3e-2", "sft.epochs=10", "sft.batch_size=16", "eval.episodes=8",
              "log.progress=false", "log.tensorboard=false", "run.threads=1", *TINY_MODEL,
              "env.id=arithmetic-v0", "env.kwargs={min_value: 0, max_value: 1}",
              "rollout.max_new_tokens=4"]
# multi-turn frozenlake (state keys, privileged info) for the turn-level presets, on a
# slightly wider model so that its groups have reward spread
TURN_RUN = [*SIGNAL_RUN[:-3], "env.id=frozenlake-v0", "env.kwargs={max_size: 4, hole_prob: 0.1}",
            "rollout.max_new_tokens=6", "sft.episodes=300", "sft.epochs=4",
            "model.path=tiny-random", "model.tiny.hidden_size=64", "model.tiny.num_layers=2",
            "model.tiny.num_heads=4", "model.tiny.num_kv_heads=2",
            "model.tiny.intermediate_size=128", "sft.lr=3e-3"]

CASES: dict[str, list[str]] = {
    "issue-grpo": [*ISSUE_RUN, "algo.preset=grpo"],
    "issue-ppo": [*ISSUE_RUN, "algo.preset=ppo"],
    "issue-gigpo": [*ISSUE_RUN, "algo.preset=gigpo"],
    "signal-grpo": [*SIGNAL_RUN, "algo.preset=grpo"],
    "signal-ppo": [*SIGNAL_RUN, "algo.preset=ppo", "train.epochs=2"],
    "signal-dapo": [*SIGNAL_RUN, "algo.preset=dapo", "algo.mask_truncated=true"],
    "signal-kl-reward": [*SIGNAL_RUN, "algo.preset=rloo", "algo.kl_coef=0.05",
                         "algo.kl_mode=reward", "algo.kl_target=0.01"],
    "signal-kl-loss-tis": [*SIGNAL_RUN, "algo.preset=grpo", "algo.kl_coef=0.05",
                           "algo.is_correction=tis", "train.packing=true"],
    "turn-gigpo": [*TURN_RUN, "algo.preset=gigpo"],
    "turn-ppo-privileged": [*TURN_RUN, "algo.preset=turn_ppo", "critic.privileged=true",
                            "critic.warmup_steps=1"],
}


# metrics added after a4117c1 that report on a run without changing it
ADDED_SINCE = {"rollout/prefix_cache_hit_rate", "rollout/logprob_abs_diff",
               "rollout/logprob_abs_diff_max"}


def comparable(record: dict) -> dict:
    """A metrics line without its timings (wall clock differs between runs) and without the
    metrics added since the recording (``ADDED_SINCE``)."""
    return {k: v for k, v in record.items()
            if k != "time" and not k.startswith("perf/") and k not in ADDED_SINCE}


def run_case(name: str, out_dir: Path) -> list[dict]:
    from turnrl.config import load_config
    from turnrl.train.loop import train

    result = train(load_config(None, [*CASES[name], f"run.out_dir={out_dir}",
                                      f"run.name={name}"]))
    lines = (result.run_dir / "metrics.jsonl").read_text().splitlines()
    return [comparable(json.loads(line)) for line in lines]


if __name__ == "__main__":
    out = Path(sys.argv[1])
    recorded = json.loads(out.read_text()) if out.is_file() else {}
    with tempfile.TemporaryDirectory() as tmp:
        for case in sys.argv[2:] or CASES:
            recorded[case] = run_case(case, Path(tmp))
            print(case, "ok", flush=True)
    out.write_text(json.dumps(recorded, indent=1) + "\n")
