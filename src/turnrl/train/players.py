"""The frozen players of a multi-agent run: ``frozen`` (the model as RL began), ``pool``
(past versions of the run's model, one sampled per task: fictitious self-play) and the named
model dirs of ``multi.frozen_models`` (a checkpoint of another run, say), rated with
OpenSkill.

Each is a model dir under ``RUN/players/`` written once, atomically: ``start/`` when RL
begins (the SFT model), ``step_<n>/`` every ``multi.pool_every`` RL steps. The pool holds the
newest ``multi.pool_size`` versions (the start first); which ones, and the ratings, are part
of every checkpoint's ``state.json``, so a resumed run samples from the same pool with the
same ratings. Every task group of a step meets one pool member (drawn from the run's seed and
the group's index), so its episodes share a baseline.

Ratings (``openskill``'s Plackett-Luce model, Weng & Lin 2011): after every game of a
two-player env between the run's model and a pool member or the frozen start, both are
rated from the outcome (a win, a loss or a draw); ``multi/rating`` is the model's rating
(mu, and ``multi/rating_sigma``), ``multi/pool_rating`` the best member's, and
``multi/pool_size`` the pool's size.
"""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from turnrl.models.policy import load_policy
from turnrl.rollout.engine import Engine
from turnrl.rollout.engines import build_engine
from turnrl.rollout.runner import stable_hash
from turnrl.types import Trajectory

FROZEN, POOL = "frozen", "pool"
START = "start"


class Players:
    """The frozen players of one run (see the module docstring).

    Args:
        run_dir: the run dir (``players/`` is made under it).
        tokenizer, device, dtype, engine_options: how to load a player and its engine.
        pool_every, pool_size: ``multi.pool_every``, ``multi.pool_size``.
        seed: the run's seed (which member each task group meets).
        models: frozen players from model dirs (``multi.frozen_models``), by name.
    """

    def __init__(self, run_dir: Path, tokenizer: Any, *, device: torch.device,
                 dtype: torch.dtype, engine_options: dict[str, Any], pool_every: int,
                 pool_size: int, seed: int, models: dict[str, Path] | None = None) -> None:
        from openskill.models import PlackettLuce

        self.root = run_dir / "players"
        self.tokenizer, self.device, self.dtype = tokenizer, device, dtype
        self.engine_options = engine_options
        self.pool_every, self.pool_size, self.seed = pool_every, pool_size, seed
        self.members: list[str] = []  # the pool, oldest first: "start", "step_5", ...
        self.skill = PlackettLuce()
        self.ratings: dict[str, Any] = {}
        self._engines: dict[str, Engine] = {}
        self.models = dict(models or {})

    # ------------------------------------------------------------------ the pool
    def begin(self, policy: torch.nn.Module) -> None:
        """RL begins with ``policy``: it is the frozen start and the pool's first member."""
        self._save(START, policy)
        self.members = [START]

    def adopt(self, root: Path) -> None:
        """Play the frozen start of another run (``turnrl eval`` of a run dir): its
        ``players/`` folder."""
        self.root, self.members = root, [START]
        self._engines.clear()

    def after_update(self, step: int, policy: torch.nn.Module) -> None:
        """After RL step ``step``: every ``pool_every`` steps the model joins the pool (the
        oldest member but the start leaves when it is full)."""
        if step % self.pool_every:
            return
        name = f"step_{step}"
        self._save(name, policy)
        self.members.append(name)
        while len(self.members) > self.pool_size:
            gone = next(m for m in self.members if m != START) \
                if len(self.members) > 1 else self.members[0]
            self.members.remove(gone)
            self._engines.pop(gone, None)

    def choose(self, group: int) -> str:
        """The pool member task group ``group`` meets."""
        return random.Random(stable_hash((self.seed, group, "pool"))).choice(self.members)

    def engine(self, player: str) -> Engine:
        """The engine of ``player``: ``frozen`` (the start), a pool member's name or a frozen
        model's (:attr:`models`)."""
        name = START if player == FROZEN else player
        if name not in self._engines:
            path = self.models.get(name, self.root / name)
            policy = load_policy(path, dtype=self.dtype, device=self.device).eval()
            self._engines[name] = build_engine(policy, self.tokenizer, self.engine_options)
        return self._engines[name]

    def _save(self, name: str, policy: torch.nn.Module) -> None:
        final = self.root / name
        if final.is_dir():  # written before (a resumed run)
            return
        tmp = self.root / f".tmp_{name}"
        shutil.rmtree(tmp, ignore_errors=True)
        policy.save_pretrained(str(tmp))  # type: ignore[operator]
        self.tokenizer.save_pretrained(str(tmp))
        os.replace(tmp, final)

    # ------------------------------------------------------------------ ratings
    def rate(self, trajectories: Sequence[Trajectory], opponents: Sequence[str]) -> None:
        """Rate the games of ``trajectories`` (the model's agent-episodes) against
        ``opponents`` (the frozen player each one met): a win, loss or draw each."""
        ranks = {"win": [0.0, 1.0], "loss": [1.0, 0.0], "draw": [0.0, 0.0]}
        for trajectory, opponent in zip(trajectories, opponents, strict=True):
            outcome = trajectory.info.get("outcome")
            if outcome not in ranks:
                continue
            name = START if opponent == FROZEN else opponent
            main, other = self._rating("main"), self._rating(name)
            [[main], [other]] = self.skill.rate([[main], [other]], ranks=ranks[outcome])
            self.ratings["main"], self.ratings[name] = main, other

    def _rating(self, name: str) -> Any:
        if name not in self.ratings:
            self.ratings[name] = self.skill.rating(name=name)
        return self.ratings[name]

    def metrics(self) -> dict[str, float]:
        """``multi/rating``, ``multi/rating_sigma``, ``multi/pool_rating`` (the best member's
        mu) and ``multi/pool_size``."""
        main = self._rating("main")
        pool = [self._rating(m).mu for m in self.members]
        return {"multi/rating": float(main.mu), "multi/rating_sigma": float(main.sigma),
                "multi/pool_rating": float(max(pool)) if pool else 0.0,
                "multi/pool_size": float(len(self.members))}

    # ------------------------------------------------------------------ checkpoints
    def state(self) -> dict[str, Any]:
        """The pool and the ratings, for a checkpoint's ``state.json``."""
        return {"members": list(self.members),
                "ratings": {n: [r.mu, r.sigma] for n, r in self.ratings.items()}}

    def restore(self, state: dict[str, Any]) -> None:
        """The pool and the ratings of a checkpoint (its model dirs are under ``players/``)."""
        missing = [m for m in state["members"] if not (self.root / m).is_dir()]
        if missing:
            raise FileNotFoundError(f"{self.root}: the pool's players {missing} are missing; "
                                    "a run's players/ folder must stay with its checkpoints")
        self.members = list(state["members"])
        self.ratings = {n: self.skill.rating(mu=mu, sigma=sigma, name=n)
                        for n, (mu, sigma) in state["ratings"].items()}
        self._engines.clear()

    def close(self) -> None:
        for engine in self._engines.values():
            engine.close()  # type: ignore[attr-defined]
        self._engines.clear()
