"""What happens around the RL steps: the loop state and the hooks at the end of each step.

:class:`LoopState` is all the loop itself keeps: the step, the evaluation before RL, the
rollbacks so far, a pending stop signal and the policy version. :class:`StepHooks` runs
after each step, in order: log the metrics, check the collapse alarms (warn, stop, or roll
back to an earlier checkpoint with smaller learning rates), evaluate every
``train.eval_every`` steps, checkpoint every ``train.checkpoint_every`` steps, rewrite the
report every ``log.report_every`` steps, and stop
cleanly (after a checkpoint) when SIGINT or SIGTERM arrived. It also saves and restores the
training state of a checkpoint (optimizers, generators, alarms, the task cursor, the KL
coefficient).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch

from turnrl.algos.correction import AdaptiveKLController
from turnrl.report.report import write_run_report
from turnrl.train.alarms import ACTIONABLE, AlarmMonitor, default_rules
from turnrl.train.checkpoint import (
    checkpoint_step,
    checkpoints,
    drop_checkpoints_after,
    load_training_state,
    prune_checkpoints,
    save_checkpoint,
)
from turnrl.train.collect import Collected, Collector
from turnrl.train.learner import Learner
from turnrl.train.scoring import Shaping
from turnrl.train.setup import Run, critic_prefixes
from turnrl.train.stages import prepare

log = logging.getLogger("turnrl")
CUT_REPLIES = 0.5  # warn once when more than this fraction of a step's replies was cut


class Interrupted(RuntimeError):
    """SIGINT or SIGTERM stopped the RL loop after a step; a checkpoint was saved."""

    def __init__(self, signum: int, message: str) -> None:
        super().__init__(message)
        self.signum = signum


class AlarmStop(RuntimeError):
    """A collapse alarm stopped the run (``alarms.on_alarm=stop``, or too many rollbacks)."""


@dataclass
class LoopState:
    """What the RL loop keeps between steps."""

    step: int = 0  # RL steps done
    before: dict[str, float] | None = None  # the evaluation before RL
    rollbacks: int = 0
    stop_signal: int | None = None  # SIGINT/SIGTERM received during RL
    policy_version: int = 0  # learner updates so far (stamped on sampled tokens)
    history: list[dict[str, float]] = field(default_factory=list)

    def steps(self, total: int) -> Iterator[int]:
        """The steps still to run (a rollback moves ``step`` back)."""
        while self.step < total:
            yield self.step


def build_monitor(run: Run) -> AlarmMonitor:
    a = run.cfg.alarms
    return AlarmMonitor(default_rules(
        min_entropy=a.min_entropy, max_zero_std_groups=a.max_zero_std_groups,
        max_kl=a.max_kl, grad_spike=a.grad_spike, min_length_ratio=a.min_length_ratio,
        max_repeated=a.max_repeated, max_grad_norm=run.cfg.train.max_grad_norm,
        max_context_overflow=a.max_context_overflow),
        patience=a.patience)


def alarm_details(fired: list[str], metrics: dict[str, float]) -> str:
    """``alarm/entropy_collapse (loss/entropy 0.0031)``, ... for the alarms that fired, with
    the fix where the rule knows one."""
    rules = {f"alarm/{rule.name}": rule for rule in default_rules()}

    def detail(name: str) -> str:
        rule = rules[name]
        value = metrics.get(rule.metric, rule.absent)
        return f"{name} ({rule.metric} {value:.4g}{f'; {rule.hint}' if rule.hint else ''})"

    return ", ".join(detail(name) for name in fired)


@contextlib.contextmanager
def stop_signals(state: LoopState) -> Iterator[None]:
    """While the RL loop runs, SIGINT and SIGTERM ask it to stop after the current step
    (``state.stop_signal``) instead of killing it mid-update; a second one stops at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def request(signum: int, _frame: object) -> None:
        if state.stop_signal is not None:  # asked twice: the user means it
            raise KeyboardInterrupt
        state.stop_signal = signum
        log.warning("%s: stopping after this step (a checkpoint will be saved)",
                    signal.Signals(signum).name)

    previous = {s: signal.signal(s, request) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)


class StepHooks:
    """The end-of-step hooks of one run (see the module docstring).

    Args:
        run: the run's pieces; ``learner`` is rebuilt by ``rebuild`` on a rollback.
        state: the loop state.
        collector: its task cursor is saved in checkpoints.
        controller: the adaptive KL coefficient (None: fixed).
        evaluate: ``evaluate(step, label)`` runs and logs a held-out evaluation.
        rebuild: ``rebuild(checkpoint)`` reloads the model and learner from a checkpoint.
        push_weights: the learner's weights to the engine (and rollout workers).
        gather_states: before a checkpoint, gathers sharded optimizer states (FSDP).
        policies: the learner of each separate policy (``multi.policies``), by name.
    """

    def __init__(self, run: Run, state: LoopState, learner: Learner, collector: Collector, *,
                 controller: AdaptiveKLController | None,
                 evaluate: Callable[[int, str], dict[str, float]],
                 rebuild: Callable[[Path], Learner], push_weights: Callable[[], None],
                 gather_states: Callable[[Learner], None] | None = None,
                 policies: dict[str, Learner] | None = None) -> None:
        self.run, self.state, self.learner, self.collector = run, state, learner, collector
        self.policies = policies or {}
        self.controller = controller
        self.evaluate, self.rebuild, self.push_weights = evaluate, rebuild, push_weights
        self.gather_states = gather_states
        self.monitor = build_monitor(run)
        self.warned_cut = False  # warn_cut_replies has spoken

    def start(self) -> None:
        """Before the first RL step: with ``alarms.on_alarm=rollback``, a checkpoint to roll
        back to (unless the run resumes from one)."""
        if self.run.cfg.alarms.on_alarm == "rollback" and self.run.resume_from is None:
            self.checkpoint(self.state.step)

    @property
    def kl_coef(self) -> float:
        return self.controller.coef if self.controller is not None else self.run.algo.kl_coef

    def end_step(self, metrics: dict[str, float], advance: Callable[[str], None]) -> None:
        """Log, alarms, evaluation, checkpoint and signals after the RL step just done."""
        cfg, state = self.run.cfg, self.state
        fired, flags = self.monitor.check(metrics)
        metrics.update(flags)
        done = state.step + 1
        self.run.logger.log(done, metrics)
        state.history.append(metrics)
        self.warn_cut_replies(metrics)
        # alarms print as warnings (on_alarm), never in the status: the bar keeps its width
        advance(f"reward {metrics['reward/mean']:.3f} success {metrics['rollout/success']:.3f}")
        if fired:
            rolled_back = self.on_alarm(done, fired, metrics)
            if rolled_back is not None and state.stop_signal is None:
                state.step = rolled_back
                return
            if rolled_back is not None:  # rolled back, and asked to stop: stop there
                done = rolled_back
        t = cfg.train
        if t.eval_every and done % t.eval_every == 0 and done < t.steps:
            self.evaluate(done, f"step {done}")
        saved = bool(t.checkpoint_every and done % t.checkpoint_every == 0)
        if saved:
            self.checkpoint(done)
        if cfg.log.report_every and done % cfg.log.report_every == 0:
            write_run_report(self.run.run_dir)
        state.step = done
        if state.stop_signal is not None:  # SIGINT/SIGTERM: save, then stop cleanly
            if not saved:
                self.checkpoint(done)
            name = signal.Signals(state.stop_signal).name
            raise Interrupted(state.stop_signal,
                              f"stopped by {name} after step {done}; checkpoint saved: resume "
                              f"with `turnrl train --resume {self.run.run_dir}`")

    def warn_cut_replies(self, metrics: dict[str, float]) -> None:
        """Once a run: a warning when most of a step's replies hit ``rollout.max_new_tokens``
        (``rollout/length_finishes`` over ``rollout/turns``, both per episode)."""
        turns = metrics.get("rollout/turns", 0.0)
        cut = metrics.get("rollout/length_finishes", 0.0) / turns if turns else 0.0
        if cut > CUT_REPLIES and not self.warned_cut:
            self.warned_cut = True
            budget = self.run.cfg.rollout.max_new_tokens
            self.run.progress.warn(
                f"step {self.state.step + 1}: {cut:.0%} of the replies "
                f"hit rollout.max_new_tokens={budget} and were cut; if the task needs longer "
                f"replies, raise it (e.g. rollout.max_new_tokens={2 * budget})")

    def final_report(self) -> Path | None:
        """``RUN/report.html`` once the run is done (``log.report``); its path, or None."""
        return write_run_report(self.run.run_dir) if self.run.cfg.log.report else None

    def update_policies(self, separate: dict[str, Collected], shape: Shaping, *,
                        train_policy: bool) -> dict[str, float]:
        """Each separate policy's update on its own episodes (:func:`~turnrl.train.stages.
        prepare`, then its learner), its engine given the new weights; the metrics as
        ``policy/<name>/<metric>``."""
        run, algo, metrics = self.run, self.run.algo, {}
        for name, part in separate.items():
            learner = self.policies[name]
            if part:
                p = prepare(learner, part.trajectories, part.scores, part.outcomes, algo,
                            pad_token_id=run.model.tokenizer.pad_token_id, shape=shape,
                            kl_coef=self.kl_coef, controller=None, measure_mismatch=False,
                            critic_prefixes=critic_prefixes(run, learner, part.trajectories))
                update = learner.update(p.batch, train_policy=train_policy)
                metrics.update({f"policy/{name}/{k}": v for k, v in
                                {**p.metrics, **update, **part.metrics}.items()})
            engine = run.policies[name].engine
            engine.load_weights(learner.policy)
            engine.version = self.state.policy_version
        return metrics

    def _optimizers(self) -> dict[str, torch.optim.Optimizer | None]:
        """Every optimizer of the run, by its name in ``optimizer.pt``."""
        optimizers: dict[str, torch.optim.Optimizer | None] = {
            "policy": self.learner.optimizer, "critic": self.learner.critic_optimizer}
        for name, learner in self.policies.items():
            optimizers |= {f"policy/{name}": learner.optimizer,
                           f"critic/{name}": learner.critic_optimizer}
        return optimizers

    def _generators(self) -> dict[str, torch.Generator]:
        """Every sampling generator of the run, by its name in ``state.json``."""
        generators = {"engine": self.run.model.engine.generator,
                      "learner": self.learner.generator}
        for name, learner in self.policies.items():
            generators |= {f"engine/{name}": self.run.policies[name].engine.generator,
                           f"learner/{name}": learner.generator}
        return generators

    def checkpoint(self, step: int) -> None:
        learner, run = self.learner, self.run
        if self.gather_states is not None:  # fsdp: the sharded optimizer states, gathered
            self.gather_states(learner)
        save_checkpoint(run.run_dir, step, policy=run.model.policy, tokenizer=run.model.tokenizer,
                        optimizers=self._optimizers(), critic=learner.critic,
                        policies={name: (other.policy, other.critic)
                                  for name, other in self.policies.items()},
                        extra_state={"eval_before": self.state.before,
                                     "seed_cursor": self.collector.cursor,
                                     "kl_coef": self.kl_coef,
                                     "metrics_lines": run.logger.lines,
                                     "alarms": self.monitor.state(),
                                     "rollbacks": self.state.rollbacks,
                                     "players": run.players.state() if run.players else None,
                                     "generators": {
                                         name: generator.get_state().tolist()
                                         for name, generator in self._generators().items()}})
        prune_checkpoints(run.run_dir, run.cfg.train.keep_last)

    def after_update(self, done: int) -> None:
        """After RL step ``done``: a multi-agent run's pool takes the model every
        ``multi.pool_every`` steps (:class:`~turnrl.train.players.Players`)."""
        if self.run.players is not None:
            self.run.players.after_update(done, self.learner.policy)

    def player_metrics(self) -> dict[str, float]:
        """The frozen players' ratings and pool size (``multi/``), when the run has any."""
        return self.run.players.metrics() if self.run.players is not None else {}

    def resume(self, checkpoint: Path) -> None:
        """Continue a run from ``checkpoint``: its training state and the loop's step, the
        evaluation before RL and the rollbacks so far."""
        saved = self.restore(checkpoint)
        self.state.step, self.state.before = saved["step"], saved.get("eval_before")
        self.state.rollbacks = saved.get("rollbacks", 0)

    def restore(self, checkpoint: Path) -> dict:
        """Optimizers, RNG states, the task cursor, the KL coefficient, the alarms and the
        engine's and learner's generators from ``checkpoint``; returns its ``state.json``."""
        state = load_training_state(checkpoint, self._optimizers())
        self.collector.cursor = state.get("seed_cursor",
                                          state["step"] * self.run.cfg.train.n_groups)
        if self.controller is not None:
            self.controller.coef = state.get("kl_coef", self.controller.coef)
        for name, generator in self._generators().items():
            generator.set_state(torch.tensor(state["generators"][name], dtype=torch.uint8))
        if "alarms" in state:
            self.monitor.load_state(state["alarms"])
        if self.run.players is not None and state.get("players"):
            self.run.players.restore(state["players"])
        return state

    def on_alarm(self, done: int, fired: list[str], metrics: dict[str, float]) -> int | None:
        """Act on alarms raised at step ``done`` (``alarms.on_alarm``): warn; stop (after a
        checkpoint); or roll back to the newest checkpoint from before the alarms' streak,
        with the learning rates scaled by ``alarms.rollback_lr_factor``. Returns the step
        to continue from after a rollback, else None."""
        a, run = self.run.cfg.alarms, self.run
        message = f"step {done}: {alarm_details(fired, metrics)}"
        log.debug("%s", message)
        acts = a.on_alarm != "warn" and any(ACTIONABLE[name] for name in fired)
        stops = acts and (a.on_alarm == "stop" or self.state.rollbacks >= a.max_rollbacks)
        if not stops:  # printed once: a run that stops says it in its error
            run.progress.warn(message)
        if not acts:
            return None  # the warn-only alarms may mean the task is solved
        if stops:
            self.checkpoint(done)
            why = (f"after {self.state.rollbacks} rollbacks " if a.on_alarm == "rollback" else "")
            raise AlarmStop(f"{message}; stopped {why}(alarms.on_alarm={a.on_alarm}); the "
                            f"last state is checkpointed in {run.run_dir / 'checkpoints'}")
        good = [p for p in checkpoints(run.run_dir) if checkpoint_step(p) <= done - a.patience]
        if not good:
            self.checkpoint(done)
            raise AlarmStop(f"{message}; no checkpoint from before the alarm to roll back to "
                            f"(keep more with train.keep_last or checkpoint more often with "
                            f"train.checkpoint_every); the last state is checkpointed")
        return self.roll_back(good[-1])

    def roll_back(self, target: Path) -> int:
        """Resume from checkpoint ``target`` with the learning rates scaled down; returns its
        step."""
        drop_checkpoints_after(self.run.run_dir, checkpoint_step(target))  # the collapse's
        self.learner = self.rebuild(target)
        optimizers = [o for o in (self.learner.optimizer, self.learner.critic_optimizer) if o]
        configured = [[group["lr"] for group in o.param_groups] for o in optimizers]
        state = self.restore(target)  # (also restores the checkpoint's learning rates)
        self.state.rollbacks += 1
        scale = self.run.cfg.alarms.rollback_lr_factor ** self.state.rollbacks
        for optimizer, lrs in zip(optimizers, configured, strict=True):
            for group, lr in zip(optimizer.param_groups, lrs, strict=True):
                group["lr"] = lr * scale
        self.monitor.reset_streaks()
        self.push_weights()  # the workers sample with the rolled-back weights
        self.run.logger.log(self.state.step + 1, {"alarm/rollback_to": float(state["step"]),
                                                  "alarm/lr_scale": scale}, phase="alarm")
        log.warning("rolled back to %s with learning rates x%g", target.name, scale)
        return int(state["step"])
