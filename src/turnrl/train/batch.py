"""Lay trajectories out as right-padded tensors for the learner."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from turnrl.train.prefix import prompt_sorted
from turnrl.types import AdvantageInputs, Batch, Trajectory


def used_length(traj: Trajectory, *, keep_tail: bool) -> int:
    """Ledger tokens the learner needs: all of them, or up to the last sampled token.

    Tokens after the last sampled token (the final observation of an episode) cannot change
    the log-prob of any sampled token (attention is causal) and carry no loss, so they are
    only needed where a critic reads the state after them: the bootstrap value of a
    truncated episode (``keep_tail``). A ledger without sampled tokens is kept whole.
    """
    if keep_tail:
        return len(traj.token_ids)
    last = max((i for i, m in enumerate(traj.loss_mask) if m), default=-1)
    return last + 1 if last >= 0 else len(traj.token_ids)


def layout(trajectories: Sequence[Trajectory], pad_token_id: int, *,
           bootstrap_truncated: bool = True) -> Batch:
    """Build a :class:`Batch` of B trajectories, T = longest used ledger, K = most turns.

    Every per-token list of the ledger keeps its position; padding is appended on the
    right with ``attention_mask = loss_mask = 0`` and ``turn_index = -1``. Each row is cut
    after its last sampled token (:func:`used_length`) unless it is a truncated episode and
    ``bootstrap_truncated`` (its critic bootstrap value is read at the last real position).
    When every trajectory recorded ``info["state_keys"]`` (one id per turn, from envs that
    declare ``has_state_key``), they become ``adv_inputs.state_keys`` (B, K), -1 on missing
    turns.
    """
    if not trajectories:
        raise ValueError("layout needs at least one trajectory")
    size = len(trajectories)
    lengths = [used_length(t, keep_tail=bootstrap_truncated and not t.terminated)
               for t in trajectories]
    width = max(lengths)
    # one spare turn column: turn-level critics read the bootstrap value after the last turn
    turns = max(t.num_turns for t in trajectories) + 1
    input_ids = torch.full((size, width), pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros((size, width))
    loss_mask = torch.zeros((size, width))
    old_logprobs = torch.zeros((size, width))
    turn_index = torch.full((size, width), -1, dtype=torch.long)
    turn_rewards = torch.zeros((size, turns))
    turn_mask = torch.zeros((size, turns))
    for row, (traj, n) in enumerate(zip(trajectories, lengths, strict=True)):
        k = traj.num_turns
        input_ids[row, :n] = torch.tensor(traj.token_ids[:n], dtype=torch.long)
        attention_mask[row, :n] = 1.0
        loss_mask[row, :n] = torch.tensor(traj.loss_mask[:n], dtype=torch.float)
        old_logprobs[row, :n] = torch.tensor(traj.logprobs[:n], dtype=torch.float)
        turn_index[row, :n] = torch.tensor(traj.turn_index[:n], dtype=torch.long)
        turn_rewards[row, :k] = torch.tensor(traj.turn_rewards, dtype=torch.float)
        turn_mask[row, :k] = 1.0
    state_keys = None
    if all("state_keys" in t.info for t in trajectories):
        state_keys = torch.full((size, turns), -1, dtype=torch.long)
        for row, traj in enumerate(trajectories):
            keys = traj.info["state_keys"][: traj.num_turns]
            state_keys[row, : len(keys)] = torch.tensor(keys, dtype=torch.long)
    adv_inputs = AdvantageInputs(
        token_mask=loss_mask,
        turn_index=turn_index,
        turn_rewards=turn_rewards,
        turn_mask=turn_mask,
        group_ids=torch.tensor([t.group_id for t in trajectories], dtype=torch.long),
        terminated=torch.tensor([t.terminated for t in trajectories], dtype=torch.bool),
        attention_mask=attention_mask,
        state_keys=state_keys,
    )
    return Batch(input_ids=input_ids, attention_mask=attention_mask, loss_mask=loss_mask,
                 old_logprobs=old_logprobs, adv_inputs=adv_inputs)


def turn_start_values(values: torch.Tensor, inputs: AdvantageInputs) -> torch.Tensor:
    """Turn-level values (B, K) read off a token-level critic.

    ``values[b, t]`` is V after ``tokens[: t + 1]``, so the state at the start of turn k is
    valued at the position just before its first sampled token. The slot after a truncated
    episode's last turn gets the value at its last real position (the bootstrap value of
    ``turn_gae``); everything else is 0.
    """
    size, turns = inputs.turn_mask.shape
    sampled = inputs.token_mask > 0
    out = torch.zeros(size, turns, dtype=values.dtype)
    for k in range(turns):
        in_turn = sampled & (inputs.turn_index == k)
        first = in_turn.float().argmax(-1)
        at = values.gather(1, (first - 1).clamp(min=0)[:, None])[:, 0]
        out[:, k] = torch.where(in_turn.any(-1), at, torch.zeros_like(at))
    num_turns = inputs.turn_mask.sum(-1).long()
    assert inputs.attention_mask is not None
    last_real = (inputs.attention_mask.sum(-1).long() - 1).clamp(min=0)
    boot = values.gather(1, last_real[:, None])[:, 0]
    rows = torch.nonzero((num_turns < turns) & ~inputs.terminated)[:, 0]
    out[rows, num_turns[rows]] = boot[rows]
    return out


def with_critic_prefix(batch: Batch, prefixes: Sequence[Sequence[int]], pad_token_id: int) -> None:
    """Set the critic's per-row prefix (the privileged input), left-padded to one width P:
    ``critic_prefix_ids`` (B, P) long and ``critic_prefix_mask`` (B, P) float."""
    if len(prefixes) != batch.size:
        raise ValueError(f"{len(prefixes)} critic prefixes for a batch of {batch.size}")
    width = max(len(p) for p in prefixes)
    ids = torch.full((batch.size, width), pad_token_id, dtype=torch.long)
    mask = torch.zeros((batch.size, width))
    for row, prefix in enumerate(prefixes):
        if prefix:
            ids[row, width - len(prefix):] = torch.tensor(list(prefix), dtype=torch.long)
            mask[row, width - len(prefix):] = 1.0
    batch.critic_prefix_ids, batch.critic_prefix_mask = ids, mask


def micro_batches(batch: Batch, rows: torch.Tensor, *, max_rows: int,
                  max_tokens: int | None = None, by_prompt: bool = False) -> list[torch.Tensor]:
    """Cut ``rows`` into forward passes: sorted by length (``by_prompt``: by prompt, then
    length, so a group's rows share a pass; see :mod:`turnrl.train.prefix`), then greedily
    filled while a pass has at most ``max_rows`` rows and, with ``max_tokens``, at most that
    many padded tokens (rows × its longest row). A row longer than ``max_tokens`` gets a pass
    of its own.

    Short rows then share big passes and long rows small ones, so memory per pass is bounded
    and little of it is padding. Every row lands in exactly one pass.
    """
    ordered = (prompt_sorted(batch.input_ids, batch.loss_mask, batch.attention_mask, rows)
               if by_prompt else length_sorted(batch, rows))
    if max_tokens is None:
        return list(ordered.split(max_rows))
    lengths = batch.attention_mask[ordered].sum(-1).long().tolist()
    passes: list[torch.Tensor] = []
    start, longest_row = 0, 0
    for end in range(1, len(lengths) + 1):
        count = end - start  # rows [start, end)
        longest_row = max(longest_row, lengths[end - 1])
        if (count > max_rows or count * longest_row > max_tokens) and count > 1:
            passes.append(ordered[start:end - 1])
            start, longest_row = end - 1, lengths[end - 1]
    passes.append(ordered[start:])
    return passes


def length_sorted(batch: Batch, rows: torch.Tensor) -> torch.Tensor:
    """``rows`` ordered by sequence length, so micro-batches cut from them carry little padding."""
    lengths = batch.attention_mask[rows].sum(-1)
    return rows[torch.argsort(lengths, stable=True)]


def bucketed_batches(batch: Batch, batch_size: int, generator: torch.Generator,
                     bucket: int = 8) -> list[torch.Tensor]:
    """Shuffled batches of similar-length rows: shuffle, sort each run of ``bucket`` batches
    by length, cut it into batches, then shuffle the batch order."""
    order = torch.randperm(batch.size, generator=generator)
    batches: list[torch.Tensor] = []
    for chunk in order.split(batch_size * bucket):
        batches.extend(length_sorted(batch, chunk).split(batch_size))
    return [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]


def select(batch: Batch, rows: torch.Tensor) -> Batch:
    """The sub-batch of ``rows``, trimmed to its longest sequence (less padding to compute)."""
    width = int(batch.attention_mask[rows].sum(-1).max().item())

    def take(x: torch.Tensor | None) -> torch.Tensor | None:
        return None if x is None else x[rows, :width]

    return Batch(
        input_ids=batch.input_ids[rows, :width],
        attention_mask=batch.attention_mask[rows, :width],
        loss_mask=batch.loss_mask[rows, :width],
        old_logprobs=batch.old_logprobs[rows, :width],
        adv_inputs=batch.adv_inputs,  # whole-batch view; the learner reads only adv/ret
        adv=take(batch.adv),
        ret=take(batch.ret),
        ref_logprobs=take(batch.ref_logprobs),
        old_values=take(batch.old_values),
        is_weights=take(batch.is_weights),
        critic_prefix_ids=(None if batch.critic_prefix_ids is None
                           else batch.critic_prefix_ids[rows]),
        critic_prefix_mask=(None if batch.critic_prefix_mask is None
                            else batch.critic_prefix_mask[rows]),
    )
