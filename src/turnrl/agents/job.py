"""An agent program as a training job (``agent.*``): the agent, its tasks, the spec the
training loop reads in place of an env's, and the model server its runs talk to.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers import PreTrainedTokenizerBase

from turnrl.agents.program import AgentError, load_agent
from turnrl.agents.protocol import Limits
from turnrl.agents.runner import AgentRunner
from turnrl.agents.server import ModelServer
from turnrl.agents.workers import AgentWorkers
from turnrl.config import Config, ConfigError
from turnrl.config.multi_checks import check_policy_names
from turnrl.envs.builtin.dataset import DatasetEnvError, read_records
from turnrl.envs.protocol import EnvSpec
from turnrl.rollout.engine import Engine

__all__ = ["AGENT_ENV_ID", "AgentJob", "agent_spec", "check_agent", "load_tasks"]

AGENT_ENV_ID = "agent-v0"  # the trajectories' env_id and the spec's id


def load_tasks(path: str, key: str) -> list[dict[str, Any]]:
    """The task rows of ``path``; :class:`ConfigError` naming ``key`` when unreadable."""
    try:
        return read_records(Path(path))
    except DatasetEnvError as error:
        message = str(error).removeprefix("dataset-v0: ")
        raise ConfigError(f"{key}: {message}") from None


def check_agent(cfg: Config) -> tuple[Callable[..., Any], list[dict[str, Any]],
                                      list[dict[str, Any]]]:
    """The agent of ``agent.entry_point``, its training and held-out tasks (default: the
    training tasks), and the settings an agent cannot use refused; :class:`ConfigError`
    naming the key and the fix."""
    a = cfg.agent
    assert a.entry_point is not None and a.tasks is not None
    try:
        agent = load_agent(a.entry_point)
    except AgentError as error:
        raise ConfigError(f"agent.entry_point: {error}") from None
    tasks = load_tasks(a.tasks, "agent.tasks")
    held_out = load_tasks(a.eval_tasks, "agent.eval_tasks") if a.eval_tasks else tasks
    if cfg.sft.enabled and cfg.sft.source == "oracle":
        raise ConfigError("sft.source: an agent program has no oracle; set sft.enabled=false, "
                          "or sft.source=jsonl with sft.path (demonstrations as chat messages)")
    if cfg.multi.agents:
        raise ConfigError("multi.agents: an agent program has no agents to seat; its calls "
                          "name the policy that answers (agent.model_name or one of "
                          "multi.policies): remove multi.agents")
    check_policy_names(cfg)
    if cfg.distributed.backend != "none":
        raise ConfigError("distributed.backend: agent programs run in this process for now "
                          "(so train.mode is sync); set distributed.backend=none")
    return agent, tasks, held_out


def agent_spec(cfg: Config) -> EnvSpec:
    """What the training loop reads of an env, for the agent: ``max_turns`` is the most
    model calls of a run (``agent.max_calls``)."""
    return EnvSpec(id=AGENT_ENV_ID, entry_point=str(cfg.agent.entry_point),
                   max_turns=cfg.agent.max_calls,
                   description=f"agent program {cfg.agent.entry_point} through the "
                   "OpenAI-compatible endpoint", reward_range=(float("-inf"), float("inf")))


@dataclass
class AgentJob:
    """The agent, its training and held-out tasks, and the model server (started with the
    first runner, closed with the run)."""

    cfg: Config
    agent: Callable[..., Any]
    tasks: list[dict[str, Any]]
    eval_tasks: list[dict[str, Any]]
    server: ModelServer | None = None
    workers: AgentWorkers | None = None  # agent.workers processes, shared by the runners
    _runners: dict[bool, AgentRunner] = field(default_factory=dict)  # by evaluation

    @classmethod
    def from_config(cls, cfg: Config) -> AgentJob:
        return cls(cfg, *check_agent(cfg))

    def runner(self, engine: Engine, tokenizer: PreTrainedTokenizerBase, temperature: float, *,
               evaluation: bool = False, policies: Mapping[str, Engine] | None = None
               ) -> AgentRunner:
        """A runner of the agent on the training (or held-out) tasks, sampling from
        ``engine`` at ``temperature`` whatever the agent asks (the learner recomputes the
        log-probs at the run's temperature); a call naming a separate policy (``policies``:
        name → engine, ``multi.policies``) as its ``model`` is answered by that one."""
        r, a = self.cfg.rollout, self.cfg.agent
        if self.server is None:
            self.server = ModelServer(engine, tokenizer, model_name=a.model_name,
                                      limits=Limits(max_tokens=r.max_new_tokens),
                                      max_context_tokens=r.max_context_tokens,
                                      max_calls=a.max_calls).start()
            self.server.train_partial = a.train_partial
        self.server.engine = engine  # a rollback may have rebuilt it
        self.server.engines.update(policies or {})
        if self.workers is None and a.workers > 0:
            self.workers = AgentWorkers(str(a.entry_point), a.workers, http_timeout_s=a.timeout_s)
        runner = self._runners.get(evaluation)
        if runner is None:
            runner = self._runners[evaluation] = AgentRunner(
                self.server, self.agent, self.eval_tasks if evaluation else self.tasks,
                name=AGENT_ENV_ID, timeout_s=a.timeout_s, model=a.model_name,
                workers=self.workers, seed=self.cfg.run.seed + int(evaluation))
        runner.sampling = (temperature, r.top_p)
        return runner

    def close(self) -> None:
        """Stop the runners' threads, the worker processes and the server (idempotent)."""
        for runner in self._runners.values():
            runner.close()
        self._runners.clear()
        if self.workers is not None:
            self.workers.close()
            self.workers = None
        if self.server is not None:
            self.server.close()
            self.server = None
