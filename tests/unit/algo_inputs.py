"""Hand-sized ``AdvantageInputs`` for the estimator tests (float64, lists in, tensors out)."""

from __future__ import annotations

import torch

from turnrl.types import AdvantageInputs

F64 = torch.float64


def _tensor(rows: list | None, dtype: torch.dtype | None = F64) -> torch.Tensor | None:
    return None if rows is None else torch.tensor(rows, dtype=dtype)


def make_inputs(
    token_mask: list[list[int]],
    turn_index: list[list[int]],
    turn_rewards: list[list[float]],
    turn_mask: list[list[int]] | None = None,
    group_ids: list[int] | None = None,
    terminated: list[bool] | None = None,
    values: list[list[float]] | None = None,
    attention_mask: list[list[int]] | None = None,
    turn_values: list[list[float]] | None = None,
    state_keys: list[list[int]] | None = None,
) -> AdvantageInputs:
    """Defaults: every turn exists, one group (id 0), every episode terminated."""
    B = len(token_mask)
    return AdvantageInputs(
        token_mask=torch.tensor(token_mask, dtype=F64),
        turn_index=torch.tensor(turn_index, dtype=torch.long),
        turn_rewards=torch.tensor(turn_rewards, dtype=F64),
        turn_mask=torch.tensor(
            turn_mask if turn_mask is not None else [[1] * len(turn_rewards[0])] * B, dtype=F64
        ),
        group_ids=torch.tensor(group_ids if group_ids is not None else [0] * B),
        terminated=torch.tensor(terminated if terminated is not None else [True] * B),
        attention_mask=_tensor(attention_mask),
        values=_tensor(values),
        turn_values=_tensor(turn_values),
        state_keys=_tensor(state_keys, dtype=None),
    )
