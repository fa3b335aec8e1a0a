"""The SFT stage alone (``turnrl sft``): a run that warm-starts the model, saves it and
evaluates it."""

from __future__ import annotations

from pathlib import Path

from turnrl.config import Config
from turnrl.config.checks import validate
from turnrl.io import run_write
from turnrl.train.setup import Run, check_inputs, evaluate_run, open_run, warm_start


def run_header(run: Run, what: str = "train") -> str:
    """The first line of a run: where it writes and what it trains (printed in every output
    mode but quiet, so a redirected log names its run from the start)."""
    cfg = run.cfg
    env = cfg.agent.entry_point or cfg.env.id
    resumed = f", resumed from {run.resume_from.name}" if run.resume_from else ""
    rl = f", preset {cfg.algo.preset}, {cfg.train.steps} RL steps" if what == "train" else ""
    return (f"turnrl {what}: run {run.run_dir} (env {env}, model {cfg.model.path}{rl}, seed "
            f"{cfg.run.seed}, {run.device.type}{resumed})")


def run_sft(cfg: Config, *, out: Path | None = None) -> tuple[Run, Path, dict[str, float]]:
    """The SFT stage alone (``turnrl sft``): validate, open a run, warm start, save the
    model to ``out`` (default ``<run dir>/sft_model``) and evaluate it. Returns the run, the
    model dir and the evaluation."""
    checked = validate(cfg)
    conversations = check_inputs(cfg, resume=None)
    run = open_run(checked)
    run.progress.note(run_header(run, "sft"))
    warm_start(cfg, run.model, run.make_env, run.progress,
               lambda i, m: run.logger.log(i, m, phase="sft"), conversations)
    if run.players is not None:  # evaluated against the model as it is now (frozen)
        run.players.begin(run.model.policy)
    out = out or run.run_dir / "sft_model"
    with run_write("the SFT model", out):
        run.model.policy.save_pretrained(str(out))
        run.model.tokenizer.save_pretrained(str(out))
    summary = evaluate_run(run, 0, "after SFT")
    run.close()
    return run, out, summary
