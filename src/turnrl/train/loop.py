"""The training loop: SFT warm start → evaluate → RL steps → evaluate.

One RL step reads top to bottom as in docs/design.md, each stage building a new value
from the last: collect scored episodes → (:func:`~turnrl.train.stages.prepare`) lay out
their tokens → the forward passes that score them (critic, reference) → the KL to the
reference → all reward shaping → advantages → the learner's batch → update → push the
weights; a run with separate policies (``multi.policies``) splits the episodes by policy
and prepares and updates each policy on its own. Setup (:mod:`turnrl.train.setup`) built
every piece before; what happens after a step (logs, alarms, rollback, evaluation,
checkpoints, signals) is in :mod:`turnrl.train.hooks`.
"""

from __future__ import annotations

import functools
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from turnrl.config import Config, dump_config
from turnrl.config.checks import validate
from turnrl.io import DiskFullError, RunWriteError, atomic_write_text, run_write
from turnrl.train import scaleout
from turnrl.train.collect import RolloutError
from turnrl.train.hooks import AlarmStop, Interrupted, LoopState, StepHooks, stop_signals
from turnrl.train.learner import Learner
from turnrl.train.policies import split_policies
from turnrl.train.preflight import reply_budget_warning
from turnrl.train.samples import sample_rows, sample_stats, save_samples
from turnrl.train.setup import (
    Run,
    build_collector,
    build_learner,
    check_inputs,
    critic_prefixes,
    evaluate_run,
    frozen_reference,
    kl_controller,
    load_model,
    local_play,
    open_run,
    shaping,
    stamp_version,
)
from turnrl.train.sft_stage import run_header, warm_start, warm_start_all
from turnrl.train.stages import prepare

__all__ = ["AlarmStop", "Interrupted", "RolloutError", "RunResult", "train"]


@dataclass
class RunResult:
    """What a finished run reports (also written to ``eval.json``)."""

    run_dir: Path
    before: dict[str, float] | None
    after: dict[str, float] | None
    history: list[dict[str, float]] = field(default_factory=list)
    wall_time_s: float = 0.0
    report: Path | None = None  # RUN/report.html (log.report)


def warm_start_and_evaluate(run: Run, conversations: list | None) -> dict[str, float] | None:
    """SFT (``sft.enabled``), then the evaluation before RL (``eval.before_training``); first
    a warning if the env's oracle replies do not fit ``rollout.max_new_tokens``."""
    cfg = run.cfg
    budget = reply_budget_warning(cfg, run.model.tokenizer)
    if budget is not None:
        run.progress.warn(budget)
    if cfg.sft.enabled:  # the run's model, then each separate policy (multi.policies)
        warm_start_all(run, conversations, warm_start)
    if run.players is not None:  # a multi-agent run's frozen start and first pool member
        run.players.begin(run.model.policy)
    return evaluate_run(run, 0, "before RL") if cfg.eval.before_training else None


def train(cfg: Config, *, resume: Path | None = None,
          resume_from: str | None = None) -> RunResult:
    """Run a whole training job: SFT, evaluation, ``train.steps`` RL steps, evaluation
    (``resume``: go on with that run dir, from checkpoint ``resume_from`` or its newest)."""
    start = time.perf_counter()
    checked = validate(cfg)  # every check before any run dir exists
    conversations = check_inputs(cfg, resume=resume)
    run = open_run(checked, resume=resume, resume_from=resume_from)
    run.progress.note(run_header(run))
    state, algo, t = LoopState(), run.algo, cfg.train
    out: scaleout.ScaleOut | None = None
    try:
        if run.resume_from is None:  # a fresh start: SFT warm start, then the evaluation before RL
            state.before = warm_start_and_evaluate(run, conversations)
        learner = build_learner(run, source=run.resume_from, reference=frozen_reference(run))
        learners = {name: build_learner(run, source=run.resume_from, policy=name,
                                        reference=frozen_reference(run, name))
                    for name in run.policies}  # multi.policies: a learner each
        collector = build_collector(run, local_play(run, lambda: state.step))
        controller = kl_controller(algo)

        def push_weights() -> None:
            run.model.engine.load_weights(hooks.learner.policy)
            state.policy_version += 1
            run.model.engine.version = state.policy_version
            if out is not None:
                out.push_weights(hooks.learner, state.policy_version, wait=t.mode == "sync")

        def rebuild(checkpoint: Path) -> Learner:  # a rollback: model and learner from disk
            run.model = load_model(cfg, checkpoint, run.device, fresh_lora=False,
                                   engine=run.model.engine, agent=run.model.agent)
            return build_learner(run, source=checkpoint, reference=hooks.learner.reference)

        hooks = StepHooks(run, state, learner, collector, controller=controller,
                          evaluate=functools.partial(evaluate_run, run),
                          rebuild=rebuild, push_weights=push_weights,
                          gather_states=lambda lr: out.gather_states(lr) if out else None,
                          policies=learners)
        if run.resume_from is not None:
            hooks.resume(run.resume_from)
        state.policy_version = state.step
        stamp_version(run, state.step)
        out = scaleout.start(run, version=state.policy_version, cursor=collector.cursor)
        if out is not None:
            collector = hooks.collector = build_collector(
                run, out.play(), source=out.source, cursor=collector.cursor)
        hooks.start()
        shape = shaping(cfg, algo)
        rl_steps = run.progress.task("RL", t.steps, completed=state.step, every_step=True)
        with rl_steps as advance, stop_signals(state):
            for step in state.steps(t.steps):
                t0 = time.perf_counter()
                collected = collector.collect(state.policy_version)
                if not collected:  # every episode failed: nothing to learn from this step
                    hooks.end_step(collected.metrics, advance)
                    continue
                t1 = time.perf_counter()
                collected, separate = split_policies(collected, cfg.multi.policies)
                learner, episodes = hooks.learner, collected.trajectories
                p = prepare(learner, episodes, collected.scores, collected.outcomes, algo,
                            pad_token_id=run.model.tokenizer.pad_token_id, shape=shape,
                            kl_coef=hooks.kl_coef, controller=controller,
                            measure_mismatch=cfg.rollout.engine != "hf",
                            critic_prefixes=critic_prefixes(run, learner, episodes))
                kept = sample_rows(episodes, p.scored.turn_rewards, t.save_samples,
                                   t.sample_which, seed=cfg.run.seed * 1_000_003 + step)
                stats = sample_stats(learner, p.tokens, kept)  # before the update
                warming_up = step < cfg.critic.warmup_steps  # train the critic alone
                engine_metrics = run.model.engine.step_metrics()
                run.model.engine.sleep()  # a colocated engine frees the GPU for the update
                update = (out.update(learner, p.batch, train_policy=not warming_up) if out
                          else learner.update(p.batch, train_policy=not warming_up))
                push_weights()
                separate_metrics = hooks.update_policies(  # multi.policies, each on its own
                    separate, shape, train_policy=not warming_up)
                hooks.after_update(step + 1)  # a multi-agent run's opponent pool
                t2 = time.perf_counter()
                save_samples(run.run_dir, step + 1, episodes, collected.scores, p.scored,
                             p.batch, kept, stats)
                hooks.end_step({
                    **collected.metrics, **p.kl.metrics, **p.scored.metrics,
                    **p.batch_metrics, **update, "loss/critic_warmup": float(warming_up),
                    **p.advantage.metrics, **separate_metrics,
                    **engine_metrics, **hooks.player_metrics(),
                    **(out.worker_metrics(state.policy_version) if out else {}),
                    **({"rollout/turn_cap": float(cap)} if (cap := cfg.rollout.turn_cap(step))
                       is not None else {}),
                    "perf/rollout_s": t1 - t0, "perf/update_s": t2 - t1, "perf/step_s": t2 - t0,
                    "perf/tokens_per_s": float(p.tokens.attention_mask.sum()) / max(t2 - t0, 1e-9),
                }, advance)
        every = t.checkpoint_every
        if not (every and t.steps and t.steps % every == 0):
            hooks.checkpoint(t.steps)  # the final state, unless just saved
        after = evaluate_run(run, t.steps, "after RL")
        result = RunResult(run.run_dir, state.before, after, state.history,  # resumed: + before
                           time.perf_counter() - start + run.logger.resumed_s)
        with run_write("eval.json", run.run_dir / "eval.json"):
            atomic_write_text(run.run_dir / "eval.json", json.dumps(
                {"before": state.before, "after": after, "wall_time_s": result.wall_time_s,
                 "config": dump_config(cfg)}, indent=2) + "\n")
        result.report = hooks.final_report()
    except RunWriteError as error:  # its checkpoints are whole: the run stays resumable
        fix = "free space (or move run.out_dir)" if isinstance(error, DiskFullError) \
            else "make the path writable"
        raise type(error)(f"{error}; {fix} and resume with "
                          f"`turnrl train --resume {run.run_dir}`") from None
    finally:
        if out is not None:
            out.close()
        run.close()  # the metrics file, and the run dir's lock
    return result
