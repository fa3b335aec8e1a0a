"""The SFT stage: the warm start of a run's model (and of each separate policy of
``multi.policies``) on demonstrations, and ``turnrl sft``, a run that warm-starts the model,
saves it and evaluates it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from turnrl import envs
from turnrl.config import Config
from turnrl.config.checks import validate
from turnrl.envs.protocol import Env
from turnrl.io import run_write
from turnrl.rollout.guard import EnvCalls
from turnrl.train import multi, sft
from turnrl.train.checkpoint import POLICIES
from turnrl.train.progress import Progress
from turnrl.train.setup import (
    SFT_SEED_OFFSET,
    Model,
    Run,
    check_inputs,
    evaluate_run,
    open_run,
)

Warm = Callable[..., None]


def run_header(run: Run, what: str = "train") -> str:
    """The first line of a run: where it writes and what it trains (printed in every output
    mode but quiet, so a redirected log names its run from the start)."""
    cfg = run.cfg
    env = cfg.agent.entry_point or cfg.env.id
    resumed = f", resumed from {run.resume_from.name}" if run.resume_from else ""
    rl = f", preset {cfg.algo.preset}, {cfg.train.steps} RL steps" if what == "train" else ""
    return (f"turnrl {what}: run {run.run_dir} (env {env}, model {cfg.model.path}{rl}, seed "
            f"{cfg.run.seed}, {run.device.type}{resumed})")


def warm_start(cfg: Config, model: Model, make_env: Callable[[], Env], progress: Progress,
               log_metrics: Callable[[int, dict[str, float]], None],
               conversations: list | None = None, *, player: str = multi.MAIN) -> None:
    """SFT on oracle demonstrations (imperfect by ``random_action_prob``) or a JSONL file;
    in a multi-agent env, the demonstrations of the agents ``player`` plays (``main``, or a
    separate policy of ``multi.policies``).

    Demonstrations call the env as rollouts do (``env.step_timeout_s``, validated results,
    ``env.on_error``); failed ones are counted (``sft/env_errors``, logged when any)."""
    c = cfg.sft
    calls = EnvCalls(step_timeout_s=cfg.env.step_timeout_s)
    if c.source == "jsonl":
        assert c.path is not None
        conversations = conversations or sft.load_conversations(c.path)
    elif envs.spec(cfg.env.id).agents:  # the roles the player plays, from oracle games
        start = cfg.env.train_seed_start + SFT_SEED_OFFSET
        conversations = multi.demonstrations(
            make_env, range(start, start + c.episodes),
            multi.seats(cfg, envs.spec(cfg.env.id).agents),
            random_action_prob=c.random_action_prob,
            train_random_actions=c.train_random_actions, seed=cfg.run.seed, player=player)
    else:
        start = cfg.env.train_seed_start + SFT_SEED_OFFSET
        demos = sft.play_demonstrations(
            make_env, range(start, start + c.episodes), random_action_prob=c.random_action_prob,
            train_random_actions=c.train_random_actions, seed=cfg.run.seed, calls=calls,
            keep_failed=cfg.env.on_error == "score")
        conversations = demos.conversations
        if demos.failures:
            log_metrics(0, demos.metrics)
    tools = sft.env_tools(make_env, calls) if cfg.agent.entry_point is None else None
    trajectories = sft.conversations_to_trajectories(model.tokenizer, conversations, tools=tools)
    usable = sum(1 for t in trajectories if any(t.loss_mask))  # sft_steps drops the others
    total = c.epochs * -(-usable // c.batch_size)
    losses: list[float] = []
    with progress.task("SFT" if player == multi.MAIN else f"SFT ({player})", total) as advance:
        for i, metrics in enumerate(sft.sft_steps(
                model.policy, trajectories, pad_token_id=model.tokenizer.pad_token_id,
                epochs=c.epochs, batch_size=c.batch_size, lr=c.lr,
                max_grad_norm=c.max_grad_norm, seed=cfg.run.seed, stop_loss=c.stop_loss)):
            log_metrics(i, metrics)
            losses.append(metrics["sft/loss"])
            advance(f"loss {metrics['sft/loss']:.3f}")
    if len(losses) < total:
        recent = losses[-sft.STOP_WINDOW:]
        progress.note(f"SFT stopped after step {len(losses)} of {total}: the mean loss of the "
                      f"last {len(recent)} steps is {sum(recent) / len(recent):.4f} <= "
                      f"sft.stop_loss {c.stop_loss:g}")


def warm_start_all(run: Run, conversations: list | None, warm: Warm = warm_start) -> None:
    """``warm`` (:func:`warm_start`) for the run's model, then for each separate policy on
    the demonstrations of its own agents (logged as ``policy/<name>/sft/*``); each engine
    takes its model's new weights."""
    cfg = run.cfg
    warm(cfg, run.model, run.make_env, run.progress,
         lambda i, m: run.logger.log(i, m, phase="sft"), conversations)
    run.model.engine.load_weights(run.model.policy)  # an engine of its own copies them
    for name, model in run.policies.items():
        def log(i: int, m: dict[str, float], name: str = name) -> None:
            run.logger.log(i, {f"policy/{name}/{k}": v for k, v in m.items()}, phase="sft")

        warm(cfg, model, run.make_env, run.progress, log, conversations, player=name)
        model.engine.load_weights(model.policy)


def run_sft(cfg: Config, *, out: Path | None = None) -> tuple[Run, Path, dict[str, float]]:
    """The SFT stage alone (``turnrl sft``): validate, open a run, warm start, save the
    model to ``out`` (default ``<run dir>/sft_model``) and evaluate it. Returns the run, the
    model dir (separate policies in its ``policies/<name>``) and the evaluation."""
    checked = validate(cfg)
    conversations = check_inputs(cfg, resume=None)
    run = open_run(checked)
    run.progress.note(run_header(run, "sft"))
    warm_start_all(run, conversations)
    if run.players is not None:  # evaluated against the model as it is now (frozen)
        run.players.begin(run.model.policy)
    out = out or run.run_dir / "sft_model"
    with run_write("the SFT model", out):
        run.model.policy.save_pretrained(str(out))
        run.model.tokenizer.save_pretrained(str(out))
        for name, model in run.policies.items():  # each separate policy under policies/
            model.policy.save_pretrained(str(out / POLICIES / name))
            model.tokenizer.save_pretrained(str(out / POLICIES / name))
    summary = evaluate_run(run, 0, "after SFT")
    run.close()
    return run, out, summary
