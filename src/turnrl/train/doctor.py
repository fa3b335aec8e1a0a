"""``turnrl doctor RUN``: why a run did not learn, read from what it recorded.

Each check reads the run's ``config.yaml``, ``metrics.jsonl`` and held-out episodes
(``samples/eval_<step>.jsonl``) and gives a :class:`Finding`: what it saw, in numbers, and
the config key to change. The checks, in the order a run goes:

- **the model**: the random init (``model.path: tiny-random``) has never learned to read its
  context; the pretrained base (``tiny``) copies, looks up and calls tools;
- **SFT fit**: the SFT loss (nats per trained reply token) from its first to its last steps,
  against the floor of the oracle's replies: 0 when the oracle's reply is a function of the
  conversation (its moves are not random, or random ones are context only), so a fitted SFT
  ends near 0;
- **random replies trained**: ``sft.random_action_prob`` of the demonstrations' replies are
  random, and with ``sft.train_random_actions`` the model is taught them: right where a random
  move is still a legal one (frozenlake), fatal where any other reply is wrong (count up);
- **SFT batches with nothing to train** (``sft/empty_demos``): demonstrations a random
  first move ended before any trained reply;
- **valid actions after SFT**: invalid actions per turn at the evaluation before RL, and the
  SFT model's first replies beside the oracle's on the same held-out tasks;
- **reward spread**: the share of RL groups whose episodes all got the same reward
  (``reward/frac_zero_std_groups``): GRPO-style advantages are then 0 and nothing is learned;
- **reply budget and context**: replies cut by ``rollout.max_new_tokens``, episodes that
  ran out of ``rollout.max_context_tokens``;
- **the outcome**: held-out success before and after RL.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from turnrl import envs
from turnrl.config import Config, load_config
from turnrl.config.checks import env_kwargs
from turnrl.report.runs import RunRecord, load_run

PROBLEM, NOTE, OK = "problem", "note", "ok"
SFT_FITTED = 0.25  # nats per reply token: an SFT whose last loss is above this did not fit
EMPTY_DEMOS = 0.2  # share of SFT demonstrations with nothing to train
INVALID = 0.3  # invalid actions per turn after SFT
NO_SPREAD = 0.8  # share of RL groups without reward spread
CUT = 0.3  # share of replies cut by max_new_tokens
SIDE_BY_SIDE = 3  # episodes whose first replies are shown beside the oracle's


@dataclass(frozen=True)
class Finding:
    """One check's verdict: ``level`` (``problem``, ``note`` or ``ok``), what it saw and the
    config key(s) to change (empty when there is nothing to change)."""

    check: str
    level: str
    summary: str
    fix: str = ""
    examples: tuple[tuple[str, str, str], ...] = ()  # (task, the model's reply, the oracle's)


def diagnose(run_dir: Path) -> list[Finding]:
    """Every check's finding for the run in ``run_dir`` (see the module docstring)."""
    run = load_run(run_dir)
    cfg = load_config(run_dir / "config.yaml")
    findings = [check(cfg, run) for check in CHECKS]
    return [f for f in findings if f is not None]


def _mean(rows: list[dict[str, Any]], key: str) -> float | None:
    values = [float(r[key]) for r in rows if isinstance(r.get(key), int | float)]
    return sum(values) / len(values) if values else None


def check_model(cfg: Config, run: RunRecord) -> Finding:
    if cfg.model.path == "tiny-random":
        return Finding("model", PROBLEM, "the model is the random init (model.path: "
                       "tiny-random): it has never learned to read its context, so it must learn "
                       "to copy and count from this env's demonstrations alone",
                       "model.path=tiny (the pretrained base: it copies, looks up and calls "
                       "tools; docs/pretraining.md)")
    return Finding("model", OK, f"model.path: {cfg.model.path}")


def check_sft_fit(cfg: Config, run: RunRecord) -> Finding | None:
    losses = [float(r["sft/loss"]) for r in run.phase("sft")
              if isinstance(r.get("sft/loss"), int | float) and r.get("sft/tokens", 1) > 1]
    if not cfg.sft.enabled or not losses:
        return None if not cfg.sft.enabled else Finding(
            "sft_fit", PROBLEM, "SFT is on but logged no loss: it trained on nothing",
            "sft.episodes, or check that the env's oracle_action answers")
    first = sum(losses[:3]) / len(losses[:3])
    last = sum(losses[-5:]) / len(losses[-5:])
    noisy = cfg.sft.random_action_prob > 0 and cfg.sft.train_random_actions
    floor = ("above 0: random replies are trained (sft.train_random_actions)" if noisy else
             "0: the oracle's reply is a function of the conversation")
    seen = (f"SFT loss {first:.3f} -> {last:.3f} nats per reply token over {len(losses)} "
            f"steps; the oracle's replies have an entropy floor of {floor}")
    if last > SFT_FITTED and (last > 0.5 * first or noisy):
        return Finding("sft_fit", PROBLEM, f"SFT did not fit: {seen}",
                       "sft.train_random_actions=false if random replies are trained (above); "
                       "more demonstrations or passes (sft.episodes, sft.epochs), sft.lr; from "
                       "the random init, model.path=tiny")
    return Finding("sft_fit", OK if last <= SFT_FITTED else NOTE, seen)


def check_sft_noise(cfg: Config, run: RunRecord) -> Finding | None:
    c = cfg.sft
    if not c.enabled or c.source != "oracle" or not c.random_action_prob:
        return None
    share = f"{c.random_action_prob:.0%} of the demonstrations' replies are random"
    if not c.train_random_actions:
        return Finding("sft_noise", OK, f"{share}, as context only "
                       "(sft.train_random_actions: false)")
    losses = [float(r["sft/loss"]) for r in run.phase("sft")
              if isinstance(r.get("sft/loss"), int | float)]
    level = PROBLEM if losses and sum(losses[-5:]) / len(losses[-5:]) > SFT_FITTED else NOTE
    return Finding("sft_noise", level, f"{share} and the model is trained on them "
                   f"(sft.random_action_prob={c.random_action_prob:g}, "
                   "sft.train_random_actions: true): it learns to answer at random that "
                   "often, which helps only where a random reply is still a good move",
                   "sft.train_random_actions=false (random replies stay as context, only the "
                   "oracle's are learned), or sft.random_action_prob=0")


def check_sft_empty(cfg: Config, run: RunRecord) -> Finding | None:
    empty = _mean(run.phase("sft"), "sft/empty_demos")  # a count, the same on every step
    if empty is None or cfg.sft.source != "oracle":
        return None
    agents = envs.spec(cfg.env.id).agents if cfg.env.id in envs.registered_ids() else ()
    played = sum(cfg.multi.agents.get(a, "main") == "main" for a in agents) or 1
    share = empty / max(cfg.sft.episodes * played, 1)  # one demonstration per agent played
    seen = (f"{empty:.0f} of the {cfg.sft.episodes * played} SFT demonstrations ({share:.0%}) "
            "had no reply to train on")
    if share > EMPTY_DEMOS:
        return Finding("sft_empty", PROBLEM, f"{seen} (a random first move ended them)",
                       "sft.random_action_prob lower, or sft.train_random_actions=true")
    return Finding("sft_empty", OK, seen)


def check_valid_actions(cfg: Config, run: RunRecord) -> Finding | None:
    before = next((r for r in run.phase("eval") if r.get("step") == 0), None)
    if before is None or not before.get("eval/turns"):
        return None
    rate = float(before.get("eval/invalid_actions", 0.0)) / float(before["eval/turns"])
    examples = side_by_side(cfg, run.path / "samples" / "eval_0.jsonl")
    seen = f"{rate:.0%} of the replies after SFT were invalid actions (eval/invalid_actions)"
    if rate > INVALID:
        return Finding("valid_actions", PROBLEM, seen, "see SFT fit; rollout.max_new_tokens "
                       "if replies are cut", tuple(examples))
    return Finding("valid_actions", OK, seen, examples=tuple(examples))


def side_by_side(cfg: Config, episodes: Path, n: int = SIDE_BY_SIDE
                 ) -> list[tuple[str, str, str]]:
    """The first user message, the model's first reply and the env's oracle's first reply
    on up to ``n`` held-out episodes (empty when the env has no oracle, has several agents
    or cannot be built here)."""
    if not episodes.is_file() or cfg.agent.entry_point is not None:
        return []
    try:
        spec = envs.spec(cfg.env.id)
        if not spec.has_oracle or spec.agents:
            return []
        env = envs.make(cfg.env.id, **env_kwargs(cfg, evaluation=True))
    except Exception:  # an env of a module not imported here: no examples
        return []
    out = []
    try:
        for line in episodes.read_text().splitlines()[:n]:
            episode = json.loads(line)
            replies = [m["content"] for m in episode["messages"] if m["role"] == "assistant"]
            users = [m["content"] for m in episode["messages"] if m["role"] == "user"]
            env.reset(seed=episode["seed"])
            oracle = env.oracle_action()  # type: ignore[attr-defined]
            out.append((users[0] if users else "", replies[0] if replies else "",
                        "" if oracle is None else str(oracle)))
    finally:
        env.close()
    return out


def check_reward_spread(cfg: Config, run: RunRecord) -> Finding | None:
    flat = _mean(run.phase("train"), "reward/frac_zero_std_groups")
    if flat is None:
        return None
    seen = f"{flat:.0%} of the RL groups had no reward spread (every episode the same reward)"
    if flat > NO_SPREAD:
        return Finding("reward_spread", PROBLEM, f"{seen}: their advantages are 0, so RL has "
                       "nothing to learn from", "train.group_size up, rollout.temperature up, "
                       "a denser reward (per-turn rewards, reward.terms), or an SFT start that "
                       "sometimes succeeds")
    return Finding("reward_spread", OK, seen)


def check_budget(cfg: Config, run: RunRecord) -> Finding | None:
    rows = run.phase("train")
    cut, turns = _mean(rows, "rollout/length_finishes"), _mean(rows, "rollout/turns")
    overflow = _mean(rows, "rollout/context_overflow_rate") or 0.0
    if cut is None or not turns:
        return None
    share = cut / turns
    if overflow > 0:
        return Finding("budget", PROBLEM, f"{overflow:.0%} of the RL episodes ran out of "
                       f"context ({cfg.rollout.max_context_tokens} tokens)",
                       "rollout.max_context_tokens up, or shorter prompts")
    if share > CUT:
        return Finding("budget", PROBLEM, f"{share:.0%} of the RL replies were cut at "
                       f"rollout.max_new_tokens={cfg.rollout.max_new_tokens}",
                       f"rollout.max_new_tokens={2 * cfg.rollout.max_new_tokens}")
    return Finding("budget", OK, f"{share:.0%} of the replies were cut at "
                   "rollout.max_new_tokens; no episode ran out of context")


def check_outcome(cfg: Config, run: RunRecord) -> Finding | None:
    evals = [r for r in run.phase("eval") if isinstance(r.get("eval/success"), int | float)]
    if not evals:
        return None
    first, last = float(evals[0]["eval/success"]), float(evals[-1]["eval/success"])
    seen = (f"held-out success {first:.3f} at step {evals[0]['step']} -> {last:.3f} at step "
            f"{evals[-1]['step']}")
    if len(evals) > 1 and last <= first:
        return Finding("outcome", PROBLEM, f"RL did not raise it: {seen}",
                       "the problems above first; then train.steps, train.lr")
    return Finding("outcome", OK if last > first else NOTE, seen)


CHECKS: tuple[Callable[[Config, RunRecord], Finding | None], ...] = (
    check_model, check_sft_fit, check_sft_noise, check_sft_empty, check_valid_actions,
    check_reward_spread, check_budget, check_outcome)


def as_json(findings: list[Finding]) -> str:
    """The findings as a JSON list (``turnrl doctor --json``)."""
    return json.dumps([asdict(f) for f in findings], indent=1)
