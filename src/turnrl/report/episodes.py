"""The trajectory browser's data: an index of sampled episodes and each episode's view.

``samples/step_<n>.jsonl`` (``turnrl.train.samples``) holds, per kept episode, the ledger
(token ids, loss mask, sampling log-probs, turn index), the messages, the per-turn rewards
and every token's advantage, and, when the learner recorded them, its log-probs and
entropies. The report embeds a bounded selection of steps (:func:`choose_steps`: the first,
the last and evenly spaced ones between), so a run of any length gives a page of bounded
size; each embedded episode is a JSON document the page parses only when it is opened.

An episode's view (:func:`episode_view`) is what the page draws: the conversation with the
tool calls found in each reply, per-turn rewards and mean advantages, the token strings
(one vocabulary per run, :func:`vocabulary`) and, for each colour mode of
:mod:`turnrl.report.colours`, the sampled tokens' values (shown on hover; ``values[mode][j]``
belongs to the ``j``-th token with loss mask 1) and every token's palette bin.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from turnrl.envs.tools.parsing import find_calls
from turnrl.report.colours import MODES, Scale, codes, fit_scale
from turnrl.report.runs import RunRecord

__all__ = ["choose_steps", "episode_view", "fit_scales", "groups", "index_row",
           "read_samples", "token_text", "vocabulary"]


def choose_steps(steps: Sequence[int], per_step: int, max_episodes: int) -> list[int]:
    """At most ``max_episodes // per_step`` of ``steps`` (at least one): the first, the last
    and evenly spaced ones between, ascending."""
    keep = max(1, max_episodes // max(per_step, 1))
    if len(steps) <= keep:
        return list(steps)
    if keep == 1:
        return [steps[-1]]
    picks = {round(i * (len(steps) - 1) / (keep - 1)) for i in range(keep)}
    return [steps[i] for i in sorted(picks)]


def read_samples(path: Path) -> list[dict[str, Any]]:
    """The episodes of one samples file (a line being written is skipped)."""
    episodes = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            episodes.append(json.loads(line))
        except ValueError:
            continue
    return episodes


def _turn_rewards(episode: dict[str, Any]) -> list[float]:
    return [float(r) for r in episode.get("turn_rewards", episode.get("env_rewards", []))]


def index_row(step: int, position: int, episode: dict[str, Any]) -> dict[str, Any]:
    """The browser index's summary of an episode (what its filters and list show)."""
    return {"step": step, "i": position, "group": episode.get("group_id"),
            "seed": episode.get("seed"), "reward": round(sum(_turn_rewards(episode)), 6),
            "success": bool(episode.get("success")), "turns": len(_turn_rewards(episode)),
            "truncated": bool(episode.get("truncated")), "error": episode.get("error"),
            "sampled": int(sum(episode.get("loss_mask", []))), "agent": episode.get("agent")}


def groups(rows: Iterable[dict[str, Any]]) -> dict[tuple[int, Any], list[int]]:
    """``(step, group id) → [positions]``: the episodes of one task in one step, which the
    browser shows side by side."""
    out: dict[tuple[int, Any], list[int]] = {}
    for row in rows:
        out.setdefault((row["step"], row["group"]), []).append(row["i"])
    return out


def _mode_values(episode: dict[str, Any], mode: str) -> list[float] | None:
    if mode == "logprob_diff":
        learner = episode.get("learner_logprobs")
        if learner is None:
            return None
        return [abs(a - b) for a, b in zip(episode["logprobs"], learner, strict=True)]
    values = episode.get(MODES[mode])
    return None if values is None else [float(v) for v in values]


def fit_scales(episodes: Iterable[dict[str, Any]]) -> dict[str, Scale]:
    """One scale per colour mode over the sampled tokens of ``episodes`` (a run's shown
    episodes); modes no episode recorded are left out."""
    pooled: dict[str, list[float]] = {}
    for episode in episodes:
        mask = episode.get("loss_mask", [])
        for mode in MODES:
            values = _mode_values(episode, mode)
            if values is not None:
                pooled.setdefault(mode, []).extend(v for v, m in zip(values, mask,
                                                                     strict=True) if m)
    return {mode: fit_scale(mode, values) for mode, values in pooled.items()}


def token_text(tokenizer: Any, ids: Iterable[int]) -> dict[int, str]:
    """Each id's text as the tokenizer decodes it alone (``"⟨id⟩"`` without one)."""
    unique = sorted(set(ids))
    if tokenizer is None:
        return {i: f"⟨{i}⟩" for i in unique}
    texts = tokenizer.batch_decode([[i] for i in unique], skip_special_tokens=False,
                                   clean_up_tokenization_spaces=False)
    return dict(zip(unique, texts, strict=True))


def vocabulary(episodes: Iterable[dict[str, Any]], tokenizer: Any) -> dict[int, str]:
    """The token texts of every id in ``episodes``."""
    return token_text(tokenizer, (i for e in episodes for i in e.get("token_ids", [])))


class _AnyName:
    """Every name is a tool name (a report does not know the env's toolbox)."""

    def __contains__(self, name: object) -> bool:
        return True


def tool_calls(text: str) -> list[dict[str, Any]]:
    """The tool calls in a reply, as the envs' parser reads them (JSON or compact)."""
    return [{"name": call.name, "arguments": call.arguments, "problem": call.problem,
             "start": call.start, "end": call.end}
            for call in find_calls(text, "auto", _AnyName())]


def api_call(call: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI-format tool call of an agent program's reply (``{"function": {"name",
    "arguments"}}``, arguments a JSON string) in the form of :func:`tool_calls` (no span in
    the text: it is not in the text)."""
    function = call.get("function") or {}
    arguments: Any = function.get("arguments", "")
    with contextlib.suppress(ValueError):  # not JSON: shown as the model wrote it
        arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
    return {"name": function.get("name"), "arguments": arguments, "problem": None,
            "start": None, "end": None}


def _round(values: Sequence[float]) -> list[float]:
    return [float(f"{v:.4g}") if math.isfinite(v) else 0.0 for v in values]


def episode_view(run: RunRecord, step: int, position: int, episode: dict[str, Any],
                 scales: dict[str, Scale]) -> dict[str, Any]:
    """What the page draws for one episode (see the module docstring)."""
    mask = [int(m) for m in episode.get("loss_mask", [])]
    turn_of = episode.get("turn_index", [])
    advantages = episode.get("advantages") or [0.0] * len(mask)
    rewards, env_rewards = _turn_rewards(episode), episode.get("env_rewards", [])
    turns = []
    for k, reward in enumerate(rewards):
        sampled = [a for a, m, t in zip(advantages, mask, turn_of, strict=True) if m and t == k]
        turns.append({"reward": reward,
                      "env_reward": env_rewards[k] if k < len(env_rewards) else None,
                      "advantage": sum(sampled) / len(sampled) if sampled else None,
                      "tokens": len(sampled)})
    messages = []
    for message in episode.get("messages", []):
        entry = {"role": message.get("role"), "content": message.get("content") or ""}
        if entry["role"] == "assistant":  # an API reply's calls, else those in its text
            entry["calls"] = [api_call(c) for c in message.get("tool_calls") or []] or \
                tool_calls(str(entry["content"]))
        messages.append(entry)
    values, colour_codes = {}, {}
    for mode, scale in scales.items():
        mode_values = _mode_values(episode, mode)
        if mode_values is None:
            continue
        values[mode] = _round([v for v, m in zip(mode_values, mask, strict=True) if m])
        colour_codes[mode] = codes(scale, mode_values, mask)
    return {"run": run.name, "step": step, "i": position, **index_row(step, position, episode),
            "env_id": episode.get("env_id"), "terminated": bool(episode.get("terminated")),
            "reward_terms": episode.get("reward_terms"), "info": episode.get("info", {}),
            "messages": messages, "turn_rewards": turns, "token_ids": episode.get("token_ids", []),
            "turn_index": turn_of, "values": values, "codes": colour_codes}
