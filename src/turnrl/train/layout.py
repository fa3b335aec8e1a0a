"""The ledger as tensors: trajectories → a right-padded :class:`~turnrl.types.TokenBatch`.

The one place where token lists become tensors; what follows (scoring, advantages, the
learner's passes) reads the batch and builds new values from it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import PreTrainedTokenizerBase

from turnrl.models.chat import encode, render
from turnrl.types import TokenBatch, Trajectory


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
           bootstrap_truncated: bool = True,
           critic_prefixes: Sequence[Sequence[int]] | None = None) -> TokenBatch:
    """Build a :class:`TokenBatch` of B trajectories, T = longest used ledger, K = most
    turns + 1.

    Every per-token list of the ledger keeps its position; padding is appended on the
    right with ``attention_mask = loss_mask = 0`` and ``turn_index = -1``. Each row is cut
    after its last sampled token (:func:`used_length`) unless it is a truncated episode and
    ``bootstrap_truncated`` (its critic bootstrap value is read at the last real position).
    When every trajectory recorded ``state_keys`` (one id per turn, from envs that declare
    state keys), they become ``state_keys`` (B, K), -1 on missing turns.
    ``critic_prefixes`` (one token list per row: a privileged critic's extra input) become
    ``critic_prefix_ids``/``critic_prefix_mask`` (B, P), left-padded.
    """
    if not trajectories:
        raise ValueError("layout needs at least one trajectory")
    size = len(trajectories)
    lengths = [used_length(t, keep_tail=bootstrap_truncated and not t.terminated)
               for t in trajectories]
    width = max(lengths)
    # one spare turn column: turn-level critics read the bootstrap value after the last turn
    turns = max(t.num_turns for t in trajectories) + 1
    # each field as one list of padded rows, then one tensor: a copy per row and field cost
    # more than the rest of the layout (4.8 ms for 128 six-token replies)
    def padded(field: str, pad: float | int) -> list[list]:
        return [list(getattr(t, field)[:n]) + [pad] * (width - n)
                for t, n in zip(trajectories, lengths, strict=True)]

    input_ids = torch.tensor(padded("token_ids", pad_token_id), dtype=torch.long)
    attention_mask = torch.tensor([[1.0] * n + [0.0] * (width - n) for n in lengths])
    loss_mask = torch.tensor(padded("loss_mask", 0), dtype=torch.float)
    old_logprobs = torch.tensor(padded("logprobs", 0.0), dtype=torch.float)
    turn_index = torch.tensor(padded("turn_index", -1), dtype=torch.long)
    turn_rewards = torch.tensor([list(t.turn_rewards) + [0.0] * (turns - t.num_turns)
                                 for t in trajectories], dtype=torch.float)
    turn_mask = torch.tensor([[1.0] * t.num_turns + [0.0] * (turns - t.num_turns)
                              for t in trajectories])
    state_keys = None
    if all(t.state_keys is not None for t in trajectories):
        state_keys = torch.full((size, turns), -1, dtype=torch.long)
        for row, traj in enumerate(trajectories):
            keys = (traj.state_keys or [])[: traj.num_turns]
            state_keys[row, : len(keys)] = torch.tensor(keys, dtype=torch.long)
    prefix_ids, prefix_mask = (left_padded(critic_prefixes, size, pad_token_id)
                               if critic_prefixes is not None else (None, None))
    return TokenBatch(
        input_ids=input_ids, attention_mask=attention_mask, loss_mask=loss_mask,
        logprobs=old_logprobs, turn_index=turn_index, turn_mask=turn_mask,
        env_rewards=turn_rewards,
        group_ids=torch.tensor([t.group_id for t in trajectories], dtype=torch.long),
        terminated=torch.tensor([t.terminated for t in trajectories], dtype=torch.bool),
        state_keys=state_keys, critic_prefix_ids=prefix_ids, critic_prefix_mask=prefix_mask)


def left_padded(prefixes: Sequence[Sequence[int]], size: int,
                pad_token_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row token lists left-padded to one width P: ids (B, P) long, mask (B, P) float."""
    if len(prefixes) != size:
        raise ValueError(f"{len(prefixes)} critic prefixes for a batch of {size}")
    width = max(len(p) for p in prefixes)
    ids = torch.full((size, width), pad_token_id, dtype=torch.long)
    mask = torch.zeros((size, width))
    for row, prefix in enumerate(prefixes):
        if prefix:
            ids[row, width - len(prefix):] = torch.tensor(list(prefix), dtype=torch.long)
            mask[row, width - len(prefix):] = 1.0
    return ids, mask


def privileged_prefix(tokenizer: PreTrainedTokenizerBase, trajectory: Trajectory) -> list[int]:
    """The privileged critic's extra input: the env's ``privileged_info()`` (recorded after
    reset) as a system message in the chat template."""
    text = render(tokenizer, [{"role": "system", "content": "Privileged information (critic "
                               f"only): {trajectory.privileged_info or ''}"}],
                  add_generation_prompt=False)
    return encode(tokenizer, text)
