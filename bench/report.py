"""How fast ``turnrl report`` builds the page of a long run, and how the page behaves.

A run of ``--steps`` RL steps (default 1,000) that kept ``--per-step`` episodes a step
(default 64: every episode of the default job's batch size) is written to a temp dir:
config, the tiny model's tokenizer, every metric of every step, evaluations every 100 steps,
and ``samples/step_<n>.jsonl`` for every step (8-turn frozenlake-v0 episodes tokenised by
the tiny tokenizer, with rewards, advantages, log-probs and entropies). Then:

- ``build_s``: the wall time of ``write_report`` on it (target: under 30 s), and the page's
  size;
- in headless Chromium, when one is installed: ``load_s`` (navigation until every figure is
  drawn), ``open_episode_s`` (a click on an episode until its tokens are drawn) and
  ``switch_mode_s`` (recolouring its tokens), median of 3.

``python bench/report.py`` writes ``bench/results/report.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from common import RESULTS, write_results

from turnrl.config import load_config, save_config
from turnrl.envs import make
from turnrl.models.chat import encode
from turnrl.models.policy import load_tokenizer
from turnrl.models.tiny import init_tiny_model
from turnrl.report.report import write_report

CHROMIUM = "/usr/bin/chromium"


def episode_templates(tokenizer, n: int = 16) -> list[dict]:
    """``n`` oracle episodes of frozenlake-v0 with their ledgers (ids, mask, turn index)."""
    templates = []
    for seed in range(n):
        env = make("frozenlake-v0")
        messages = list(env.reset(seed=seed)[0])
        turns = 0
        while turns < 8:
            action = env.oracle_action() or "down"
            messages.append({"role": "assistant", "content": action})
            result = env.step(action)
            messages.extend(result.observation)
            turns += 1
            if result.terminated or result.truncated:
                break
        ids, mask, turn_index = [], [], []
        for k, message in enumerate(messages):
            piece = encode(tokenizer, f"<|im_start|>{message['role']}\n"
                                      f"{message['content']}<|im_end|>\n")
            ids.extend(piece)
            sampled = message["role"] == "assistant"
            mask.extend([int(sampled)] * len(piece))
            turn = sum(1 for m in messages[:k] if m["role"] == "assistant")
            turn_index.extend([turn if sampled else -1] * len(piece))
        templates.append({"messages": messages, "token_ids": ids, "loss_mask": mask,
                          "turn_index": turn_index, "turns": turns})
    return templates


def write_run(root: Path, steps: int, per_step: int, seed: int = 0) -> Path:
    rng = random.Random(seed)
    run = root / "long-run"
    (run / "samples").mkdir(parents=True)
    cfg = load_config(None, [f"train.steps={steps}", f"train.save_samples={per_step}"])
    save_config(cfg, run / "config.yaml")
    init_tiny_model(run / "base_model")
    tokenizer = load_tokenizer(run / "base_model")
    templates = episode_templates(tokenizer)
    rows = [{"step": i, "phase": "sft", "time": i * 0.5, "sft/loss": 3.0 / (1 + i)}
            for i in range(120)]
    success = 0.15
    for step in range(steps + 1):
        if step % 100 == 0 or step == steps:
            rows.append({"step": step, "phase": "eval", "time": step * 6.0,
                         **{f"eval/{k}": v for k, v in (
                             ("success", success), ("success_lo", success - 0.05),
                             ("success_hi", success + 0.05), ("reward", success),
                             ("turns", 7.0), ("tokens", 36.0), ("episodes", 256.0))},
                         "perf/eval_s": 9.0})
        if step == steps:
            break
        success = min(0.9, success + 0.0007 + rng.gauss(0, 0.002))
        rows.append({"step": step + 1, "phase": "train", "time": step * 6.0,
                     "reward/mean": success + rng.gauss(0, 0.03), "rollout/success": success,
                     "rollout/turns": 7 + rng.random(), "rollout/sampled_tokens": 36.0,
                     "rollout/invalid_actions": 0.2 * rng.random(),
                     "loss/entropy": 0.3 * (1 - step / steps) + 0.02,
                     "loss/approx_kl": abs(rng.gauss(0.002, 0.001)),
                     "loss/grad_norm": abs(rng.gauss(0.2, 0.05)), "loss/clipfrac": 0.01,
                     "perf/rollout_s": 2.5, "perf/update_s": 3.5, "perf/step_s": 6.0,
                     "alarm/entropy_collapse": float(step % 250 == 249)})
        lines = []
        for i in range(per_step):
            t = templates[rng.randrange(len(templates))]
            n = len(t["token_ids"])
            won = rng.random() < success
            advantage = (1.0 if won else -0.5) + rng.gauss(0, 0.1)
            lines.append(json.dumps({
                "env_id": "frozenlake-v0", "seed": step * 1000 + i // 8, "group_id": i // 8,
                "messages": t["messages"], "token_ids": t["token_ids"],
                "loss_mask": t["loss_mask"], "turn_index": t["turn_index"],
                "logprobs": [round(-rng.random(), 4) if m else 0.0 for m in t["loss_mask"]],
                "learner_logprobs": [0.0] * n,
                "entropies": [round(rng.random(), 4) for _ in range(n)],
                "advantages": [round(advantage, 4) if m else 0.0 for m in t["loss_mask"]],
                "env_rewards": [0.0] * (t["turns"] - 1) + [float(won)],
                "turn_rewards": [0.0] * (t["turns"] - 1) + [float(won)],
                "terminated": True, "truncated": False, "success": won}))
        (run / "samples" / f"step_{step + 1}.jsonl").write_text("\n".join(lines) + "\n")
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "eval.json").write_text(json.dumps({"before": {"success": 0.15},
                                               "after": {"success": success},
                                               "wall_time_s": steps * 6.0}))
    return run


def browse(page_path: Path, repeats: int) -> dict[str, float] | None:
    """Load, open-episode and recolour times of the page in headless Chromium."""
    if not Path(CHROMIUM).exists():
        return None
    from playwright.sync_api import sync_playwright

    loads, opens, switches = [], [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        for _ in range(repeats):
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            start = time.perf_counter()
            page.goto(page_path.as_uri())
            page.wait_for_function("document.querySelectorAll('.plot .main-svg').length >= "
                                   "document.querySelectorAll('.plot').length")
            loads.append(time.perf_counter() - start)
            start = time.perf_counter()
            page.locator("#episode-list tbody tr").first.click()
            page.wait_for_selector("#episode .tokens .tok")
            opens.append(time.perf_counter() - start)
            start = time.perf_counter()
            page.locator("#episode .modes button[data-mode=entropy]").click()
            page.wait_for_selector("#episode .legend[data-mode=entropy]")
            switches.append(time.perf_counter() - start)
            page.close()
        browser.close()
    return {"load_s": statistics.median(loads), "open_episode_s": statistics.median(opens),
            "switch_mode_s": statistics.median(switches)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--per-step", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="turnrl-bench-report-"))
    try:
        start = time.perf_counter()
        run = write_run(root, args.steps, args.per_step)
        made = time.perf_counter() - start
        samples = sum(f.stat().st_size for f in (run / "samples").iterdir())
        builds = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            page = write_report([run], root / "report.html")
            builds.append(time.perf_counter() - start)
        browser = browse(page, args.repeats)
        result = {"steps": args.steps, "per_step": args.per_step,
                  "samples_mib": samples / 2**20, "synthetic_run_s": made,
                  "build_s": statistics.median(builds), "build_runs_s": builds,
                  "page_mib": page.stat().st_size / 2**20, "browser": browser}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    table = [f"| run | samples on disk | build (median of {args.repeats}) | page | "
             "load in Chromium | open an episode | recolour its tokens |",
             "|---|---|---|---|---|---|---|",
             f"| {args.steps} steps × {args.per_step} episodes | {result['samples_mib']:.0f} MiB"
             f" | {result['build_s']:.1f} s | {result['page_mib']:.1f} MiB | "
             + (" | ".join(f"{browser[k]:.2f} s" for k in ("load_s", "open_episode_s",
                                                          "switch_mode_s"))
                if browser else "no chromium | — | —") + " |"]
    write_results(args.out, "report", result, "\n".join(table) + "\n")


if __name__ == "__main__":
    main()
