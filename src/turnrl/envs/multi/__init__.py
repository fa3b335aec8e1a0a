"""Multi-agent envs: the contract (PettingZoo's AEC shape, text in and out), its checker and
an episode player. See ``docs/multi_agent.md``."""

from turnrl.envs.multi.checker import check_multi_env
from turnrl.envs.multi.play import (
    MultiEpisode,
    Policy,
    oracle_policy,
    play_episode,
    play_terminal,
    random_policy,
)
from turnrl.envs.multi.protocol import OUTCOMES, MultiAgentEnv, MultiStepResult, is_multi_agent

__all__ = [
    "OUTCOMES",
    "MultiAgentEnv",
    "MultiEpisode",
    "MultiStepResult",
    "Policy",
    "check_multi_env",
    "is_multi_agent",
    "oracle_policy",
    "play_episode",
    "play_terminal",
    "random_policy",
]
