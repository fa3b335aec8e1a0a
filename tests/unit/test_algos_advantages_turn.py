"""Turn-aware advantage estimators: reference values (derived by hand) and properties.

reinforce_pp_baseline, grpo_passk, turn_gae, trloo, turn_grpo, gigpo.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace
from typing import Any

import pytest
import torch
from algo_inputs import make_inputs
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from turnrl.algos import ADVANTAGES, needs_critic
from turnrl.algos.advantages import grpo, rloo
from turnrl.algos.functional import masked_whiten
from turnrl.algos.turn_advantages import (
    gigpo,
    grpo_passk,
    reinforce_pp_baseline,
    trloo,
    turn_gae,
    turn_grpo,
)
from turnrl.types import AdvantageInputs

FAST = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
F64 = torch.float64
GROUP_IDS = [3, -7, 10**12, 42]  # arbitrary longs, neither contiguous nor sorted
NEW = ["reinforce_pp_baseline", "grpo_passk", "turn_gae", "trloo", "turn_grpo", "gigpo"]
CRITIC_FREE = [n for n in NEW if n != "turn_gae"]


def expand_turns(per_turn: list[list[float]], inputs: AdvantageInputs) -> torch.Tensor:
    """Expected (B, T): per_turn[b][turn_index[b, t]] on sampled tokens, 0 elsewhere and on
    tokens of turns past the end of per_turn[b] (turns that do not exist)."""
    out = torch.zeros_like(inputs.token_mask)
    for b, t in inputs.token_mask.nonzero().tolist():
        k = int(inputs.turn_index[b, t])
        out[b, t] = per_turn[b][k] if k < len(per_turn[b]) else 0.0
    return out


# ----------------------------------------------------------------------------- random ledgers


@dataclass
class Ledger:
    inputs: AdvantageInputs
    n_turns: list[int]  # existing turns per row (a prefix of the K turn slots)


@st.composite
def ledgers(draw: st.DrawFn, max_rows: int = 6, max_turns: int = 3) -> Ledger:
    """Prompt (1-2 tokens), then turns of 1-3 sampled + 0-2 observation tokens, then padding.

    Garbage sits where nothing may be read: reward 1000 on turns that do not exist. Turn
    values exist everywhere (a row with fewer than K turns has a bootstrap slot); state keys
    come from a small alphabet so that anchor states repeat.
    """
    B = draw(st.integers(1, max_rows))
    K = draw(st.integers(1, max_turns))
    layouts = []
    for _ in range(B):
        prompt = draw(st.integers(1, 2))
        n_turns = draw(st.integers(1, K))
        layouts.append(
            (prompt, [(draw(st.integers(1, 3)), draw(st.integers(0, 2))) for _ in range(n_turns)])
        )
    T = max(p + sum(s + o for s, o in ts) for p, ts in layouts) + draw(st.integers(0, 1))
    token_mask = torch.zeros(B, T, dtype=F64)
    turn_index = torch.full((B, T), -1, dtype=torch.long)
    turn_mask = torch.zeros(B, K, dtype=F64)
    for b, (prompt, ts) in enumerate(layouts):
        t = prompt
        for k, (s, o) in enumerate(ts):
            token_mask[b, t : t + s] = 1
            turn_index[b, t : t + s + o] = k
            t += s + o
        turn_mask[b, : len(ts)] = 1
    reward = st.sampled_from([-1.0, 0.0, 0.5, 1.0, 2.0])
    turn_rewards = torch.tensor(
        [[draw(reward) if turn_mask[b, k] else 1000.0 for k in range(K)] for b in range(B)],
        dtype=F64,
    )
    value = st.integers(-20, 20).map(lambda v: v / 10)
    inputs = AdvantageInputs(
        token_mask=token_mask,
        turn_index=turn_index,
        turn_rewards=turn_rewards,
        turn_mask=turn_mask,
        group_ids=torch.tensor([draw(st.sampled_from(GROUP_IDS)) for _ in range(B)]),
        terminated=torch.tensor([draw(st.booleans()) for _ in range(B)]),
        turn_values=torch.tensor([[draw(value) for _ in range(K)] for _ in range(B)], dtype=F64),
        state_keys=torch.tensor([[draw(st.integers(0, 2)) for _ in range(K)] for _ in range(B)]),
    )
    return Ledger(inputs, [len(ts) for _, ts in layouts])


def hparams(name: str, inputs: AdvantageInputs) -> dict[str, Any]:
    """grpo_passk needs k <= every group's size: use the smallest group's size."""
    if name != "grpo_passk":
        return {}
    _, counts = torch.unique(inputs.group_ids, return_counts=True)
    return {"k": int(counts.min())}


def naive_returns(inputs: AdvantageInputs, b: int, gamma: float) -> list[float]:
    """G_{b,k} = r_k + γ G_{b,k+1} over the existing (prefix) turns of row b."""
    n = int(inputs.turn_mask[b].sum())
    out = [0.0] * n
    running = 0.0
    for k in reversed(range(n)):
        running = float(inputs.turn_rewards[b, k]) + gamma * running
        out[k] = running
    return out


# ----------------------------------------------------------------------------- registry


def test_registered_with_critic_flags() -> None:
    assert set(NEW) <= set(ADVANTAGES.names())
    assert ADVANTAGES["gigpo"] is gigpo
    assert needs_critic("turn_gae")
    assert not any(needs_critic(n) for n in CRITIC_FREE)


# ----------------------------------------------------------------------------- reference values


def test_reinforce_pp_baseline_reference_values() -> None:
    # γ = 0.5. Row 0 (group 7): [prompt, s0, s0, obs, s1], turn rewards [1, 2], R = 3;
    #   token rewards at positions 1, 2, 4 = [0, 1, 2] -> G_4 = 2, G_2 = 1 + 0.5·2 = 2,
    #   G_1 = 0.5·2 = 1.
    # Row 1 (group 7): [prompt, s0, s0, s0, pad], turn reward [1] (turn 1's 99 does not exist),
    #   R = 1 -> G = [0.25, 0.5, 1].
    # Row 2 (group 9, singleton): [prompt, s0, pad...], R = 4 -> G = 4, baseline 4.
    # Group 7's mean R = 2: centred row 0 [-1, 0, 0], row 1 [-1.75, -1.5, -1], row 2 [0].
    # All seven: mean -5.25 / 7 = -0.75; deviations [-0.25, 0.75, 0.75, -1, -0.75, -0.25, 0.75],
    #   squares sum 3.375, unbiased var 3.375 / 6 = 0.5625 (std 0.75)
    #   -> A = deviation / 0.75 = [-1/3, 1, 1, -4/3, -1, -1/3, 1]
    inputs = make_inputs(
        token_mask=[[0, 1, 1, 0, 1], [0, 1, 1, 1, 0], [0, 1, 0, 0, 0]],
        turn_index=[[-1, 0, 0, 0, 1], [-1, 0, 0, 0, -1], [-1, 0, -1, -1, -1]],
        turn_rewards=[[1, 2], [1, 99], [4, 0]],
        turn_mask=[[1, 1], [1, 0], [1, 0]],
        group_ids=[7, 7, 9],
    )
    out = reinforce_pp_baseline(inputs, gamma=0.5)
    dev = torch.tensor(
        [[0, -0.25, 0.75, 0, 0.75], [0, -1, -0.75, -0.25, 0], [0, 0.75, 0, 0, 0]], dtype=F64
    )
    torch.testing.assert_close(out.advantages, dev / math.sqrt(0.5625 + 1e-8))
    torch.testing.assert_close(out.returns, out.advantages)
    assert out.metrics["adv/returns_mean"] == pytest.approx((1 + 2 + 2 + 0.25 + 0.5 + 1 + 4) / 7)
    assert out.metrics["adv/frac_zero_std_groups"] == pytest.approx(0.5)  # group 9


def test_grpo_passk_reference_values() -> None:
    # success iff R > 0.5; k = 2.
    # Group 1: R = [1, 0, 0.5, 0] -> n = 4, c = 1 (0.5 is a failure).
    #   ρ = 1 - C(3,2)/C(4,2) = 1 - 3/6 = 0.5, σ = sqrt(0.25) = 0.5
    #   success: (1 - 0.5)/σ = 1; failure: (1 - 0.5 - C(2,1)/C(3,1))/σ = (0.5 - 2/3)/0.5 = -1/3
    # Group -2: R = [0.7, 1, 0, 0, 0] -> n = 5, c = 2.
    #   ρ = 1 - C(3,2)/C(5,2) = 0.7, σ = sqrt(0.21)
    #   success: 0.3/σ; failure: (0.3 - C(2,1)/C(4,1))/σ = -0.2/σ   (2·0.3 - 3·0.2 = 0)
    # Group 10**9: R = [1, 1, 0] -> n - c = 1 < k: every pair passes, ρ = 1, σ = 0 -> 0
    outcomes = [1, 0, 0.5, 0, 0.7, 1, 0, 0, 0, 1, 1, 0]
    ids = [1] * 4 + [-2] * 5 + [10**9] * 3
    inputs = make_inputs(
        token_mask=[[0, 1, 1]] * 12,
        turn_index=[[-1, 0, 0]] * 12,
        turn_rewards=[[r] for r in outcomes],
        group_ids=ids,
    )
    out = grpo_passk(inputs, k=2)
    s1, s2 = 0.5 + 1e-6, math.sqrt(0.21) + 1e-6
    per_traj = [0.5 / s1, -1 / 6 / s1, -1 / 6 / s1, -1 / 6 / s1]
    per_traj += [0.3 / s2, 0.3 / s2, -0.2 / s2, -0.2 / s2, -0.2 / s2, 0, 0, 0]
    expected = torch.tensor(per_traj, dtype=F64)[:, None] * torch.tensor([[0, 1, 1]], dtype=F64)
    torch.testing.assert_close(out.advantages, expected)
    torch.testing.assert_close(out.returns, out.advantages)
    assert out.metrics["adv/pass_at_k"] == pytest.approx((0.5 + 0.7 + 1.0) / 3)
    assert out.metrics["adv/frac_zero_std_groups"] == 0.0


def test_grpo_passk_group_smaller_than_k_is_an_error() -> None:
    inputs = make_inputs(
        token_mask=[[0, 1]] * 5,
        turn_index=[[-1, 0]] * 5,
        turn_rewards=[[1], [0], [1], [0], [0]],
        group_ids=[5, 5, 5, 5, 6],
    )
    with pytest.raises(ValueError, match=r"k=4.*group 6 has 1"):
        grpo_passk(inputs, k=4)
    with pytest.raises(ValueError, match="k must be an integer >= 1"):
        grpo_passk(inputs, k=0)


def turn_gae_inputs() -> AdvantageInputs:
    """Three rows, K = 3: [prompt, s0, s0, obs, s1, obs, s2]."""
    return make_inputs(
        token_mask=[[0, 1, 1, 0, 1, 0, 0], [0, 1, 1, 0, 1, 0, 0], [0, 1, 0, 0, 1, 0, 1]],
        turn_index=[[-1, 0, 0, 0, 1, 1, -1], [-1, 0, 0, 0, 1, 1, -1], [-1, 0, 0, 0, 1, 1, 2]],
        turn_rewards=[[1, 2, 7], [1, 2, 7], [0, 0, 1]],
        turn_mask=[[1, 1, 0], [1, 1, 0], [1, 1, 1]],
        terminated=[True, False, False],
        turn_values=[[0.5, 0.2, 9.0], [0.5, 0.2, 0.3], [0.1, 0.2, 0.4]],
    )


def test_turn_gae_reference_values() -> None:
    # γ = 0.9, λ = 0.5, γλ = 0.45.
    # Row 0, terminated, turns 0-1: V = [0.5, 0.2] (the 9 in slot 2 is not read)
    #   δ_1 = 2 + 0 - 0.2 = 1.8; δ_0 = 1 + 0.9·0.2 - 0.5 = 0.68
    #   A_1 = 1.8; A_0 = 0.68 + 0.45·1.8 = 1.49; returns A + V = [1.99, 2.0]
    # Row 1, truncated: bootstrap from slot 2, V_boot = 0.3
    #   δ_1 = 2 + 0.9·0.3 - 0.2 = 2.07; A_0 = 0.68 + 0.45·2.07 = 1.6115; returns [2.1115, 2.27]
    # Row 2, truncated, all K = 3 turns exist: no slot, V_boot = 0; V = [0.1, 0.2, 0.4]
    #   δ_2 = 1 - 0.4 = 0.6; δ_1 = 0.9·0.4 - 0.2 = 0.16; δ_0 = 0.9·0.2 - 0.1 = 0.08
    #   A_2 = 0.6; A_1 = 0.16 + 0.45·0.6 = 0.43; A_0 = 0.08 + 0.45·0.43 = 0.2735
    #   returns [0.3735, 0.63, 1.0]
    inputs = turn_gae_inputs()
    out = turn_gae(inputs, gamma=0.9, lam=0.5)
    advantages = [[1.49, 1.8], [1.6115, 2.07], [0.2735, 0.43, 0.6]]
    returns = [[1.99, 2.0], [2.1115, 2.27], [0.3735, 0.63, 1.0]]
    torch.testing.assert_close(out.advantages, expand_turns(advantages, inputs))
    torch.testing.assert_close(out.returns, expand_turns(returns, inputs))
    assert out.metrics["adv/frac_no_bootstrap"] == pytest.approx(1 / 3)  # row 2
    # V_k on the 3 + 3 + 3 sampled tokens: [0.5, 0.5, 0.2] twice and [0.1, 0.2, 0.4]
    assert out.metrics["adv/values_mean"] == pytest.approx(2 * 1.2 / 9 + 0.7 / 9)


def test_turn_gae_whiten_standardises_the_advantages_but_not_the_returns() -> None:
    inputs = turn_gae_inputs()
    plain = turn_gae(inputs, gamma=0.9, lam=0.5)
    white = turn_gae(inputs, gamma=0.9, lam=0.5, whiten=True)
    mask = inputs.token_mask.bool()
    torch.testing.assert_close(white.advantages, masked_whiten(plain.advantages, inputs.token_mask))
    assert float(white.advantages[mask].mean()) == pytest.approx(0.0, abs=1e-9)
    assert float(white.advantages[mask].std()) == pytest.approx(1.0, rel=1e-6)  # unbiased
    torch.testing.assert_close(white.returns, plain.returns)  # the critic's targets stay raw


def test_turn_gae_needs_turn_values() -> None:
    inputs = replace(turn_gae_inputs(), turn_values=None)
    with pytest.raises(ValueError, match="advantage 'turn_gae' needs a turn-level critic"):
        turn_gae(inputs)
    bad = replace(turn_gae_inputs(), turn_values=torch.zeros(3, 2, dtype=F64))
    with pytest.raises(ValueError, match=r"turn_values has shape \(3, 2\), expected \(3, 3\)"):
        turn_gae(bad)


def test_trloo_reference_values() -> None:
    # γ = 0.5; one sampled token per turn: [prompt, s0, s1, s2].
    # Group 5: row 0 r = [0, 1]: G = [0.5, 1], R = 1; row 1 r = [0.5, 0]: G = [0.5, 0], R = 0.5;
    #          row 2 r = [1]: G = [1], R = 1.
    #   turn 0: row 0 vs rows 1, 2: 0.5 - (0.5 + 1)/2 = -0.25; row 1: 0.5 - 0.75 = -0.25;
    #           row 2 vs rows 0, 1: 1 - (0.5 + 0.5)/2 = 0.5
    #   turn 1: row 0 vs row 1: 1 - 0 = 1; row 1 vs row 0: 0 - 1 = -1
    # Group 8: row 3 r = [0, 2, 1]: G = [0.5·(2 + 0.5·1), 2.5, 1] = [1.25, 2.5, 1], R = 3;
    #          row 4 r = [1]: G = [1], R = 1.
    #   turn 0: row 3: 1.25 - 1 = 0.25; row 4: 1 - 1.25 = -0.25
    #   turns 1, 2: no other episode got there -> leave-one-out mean of R: R_4 = 1
    #           -> 2.5 - 1 = 1.5 and 1 - 1 = 0
    # Group 11: row 5 alone -> 0
    # Sampled tokens of turns that do not exist (row 0's turn 2, ...) get 0
    inputs = make_inputs(
        token_mask=[[0, 1, 1, 1]] * 6,
        turn_index=[[-1, 0, 1, 2]] * 6,
        turn_rewards=[[0, 1, 9], [0.5, 0, 9], [1, 9, 9], [0, 2, 1], [1, 9, 9], [3, 9, 9]],
        turn_mask=[[1, 1, 0], [1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 0, 0], [1, 0, 0]],
        group_ids=[5, 5, 5, 8, 8, 11],
    )
    out = trloo(inputs, gamma=0.5)
    per_turn = [[-0.25, 1], [-0.25, -1], [0.5], [0.25, 1.5, 0], [-0.25], [0]]
    torch.testing.assert_close(out.advantages, expand_turns(per_turn, inputs))
    torch.testing.assert_close(out.returns, out.advantages)


def test_turn_grpo_reference_values() -> None:
    # γ = 0.5. Group 2: row 0 r = [0, 1]: G = [0.5, 1]; row 1 r = [1]: G = [1];
    #   row 2 r = [0, 0]: G = [0, 0]. The five turn returns [0.5, 1, 1, 0, 0]: mean 0.5,
    #   deviations [0, 0.5, 0.5, -0.5, -0.5], unbiased var 1 / 4, std 0.5
    #   -> A = [0, 1, 1, -1, -1] / (0.5 + 1e-6)
    # Group 4: rows 3, 4 r = [1]: G = [1], [1]: all equal -> 0
    # Sampled tokens of turns that do not exist (turn 1 of rows 1, 3, 4) get 0
    inputs = make_inputs(
        token_mask=[[0, 1, 1]] * 5,
        turn_index=[[-1, 0, 1]] * 5,
        turn_rewards=[[0, 1], [1, 5], [0, 0], [1, 5], [1, 5]],
        turn_mask=[[1, 1], [1, 0], [1, 1], [1, 0], [1, 0]],
        group_ids=[2, 2, 2, 4, 4],
    )
    out = turn_grpo(inputs, gamma=0.5)
    s = 0.5 + 1e-6
    per_turn = [[0, 0.5 / s], [0.5 / s], [-0.5 / s, -0.5 / s], [0], [0]]
    torch.testing.assert_close(out.advantages, expand_turns(per_turn, inputs))
    torch.testing.assert_close(out.returns, out.advantages)
    assert out.metrics["adv/frac_zero_std_groups"] == pytest.approx(0.5)


def test_gigpo_reference_values() -> None:
    # γ = 1, ω = 0.5, norm_std. [prompt, s0, s1].
    # Group 4: row 0 r = [0, 1], keys [10, 20]: R = 1, G = [1, 1]
    #          row 1 r = [0, 0], keys [10, 30]: R = 0, G = [0, 0]
    #          row 2 r = [0.5, 0.5], keys [10, 20]: R = 1, G = [1, 0.5]
    #   episode: R = [1, 0, 1], mean 2/3, unbiased std sqrt(1/3) = 0.57735
    #     -> A^E = [1/3, -2/3, 1/3] / (0.57735 + 1e-6) = [0.57735, -1.15470, 0.57735]
    #   key 10 (turn 0 of all three): G = [1, 0, 1] -> the same numbers as A^E
    #   key 20: G = [1 (row 0), 0.5 (row 2)]: mean 0.75, std sqrt(0.125) -> ±0.25 / 0.35355
    #   key 30: singleton -> 0
    # Group 9: row 3 r = [0, 1], keys [10, 2]: R = 1, G = [1, 1]; row 4 r = [3], keys [2]: R = 3
    #   episode: mean 2, std sqrt(2) -> A^E = ∓1 / sqrt(2)
    #   key 2 (row 3 turn 1, row 4 turn 0: the same state at different turns): G = [1, 3]
    #     -> ∓1 / sqrt(2); key 10 here is a singleton (group 4's key 10 is another set) -> 0
    inputs = make_inputs(
        token_mask=[[0, 1, 1]] * 4 + [[0, 1, 0]],
        turn_index=[[-1, 0, 1]] * 4 + [[-1, 0, -1]],
        turn_rewards=[[0, 1], [0, 0], [0.5, 0.5], [0, 1], [3, 9]],
        turn_mask=[[1, 1]] * 4 + [[1, 0]],
        group_ids=[4, 4, 4, 9, 9],
        state_keys=[[10, 20], [10, 30], [10, 20], [10, 2], [2, 77]],
    )
    out = gigpo(inputs, omega=0.5)
    e = 1 / 3 / (math.sqrt(1 / 3) + 1e-6)
    st20 = 0.25 / (math.sqrt(0.125) + 1e-6)
    e9 = 1 / (math.sqrt(2) + 1e-6)
    per_turn = [
        [e + 0.5 * e, e + 0.5 * st20],
        [-2 * e - e, -2 * e],
        [e + 0.5 * e, e - 0.5 * st20],
        [-e9, -e9 - 0.5 * e9],
        [e9 + 0.5 * e9],
    ]
    torch.testing.assert_close(out.advantages, expand_turns(per_turn, inputs))
    torch.testing.assert_close(out.returns, out.advantages)
    # existing turns: 9; singleton state sets: key 30 in group 4, key 10 in group 9
    assert out.metrics["adv/frac_singleton_steps"] == pytest.approx(2 / 9)
    assert out.metrics["adv/frac_zero_std_groups"] == 0.0


def test_gigpo_needs_state_keys() -> None:
    inputs = make_inputs(token_mask=[[0, 1]], turn_index=[[-1, 0]], turn_rewards=[[1.0]])
    with pytest.raises(ValueError, match=r"needs state keys: .*has_state_key"):
        gigpo(inputs)


# ----------------------------------------------------------------------------- shared properties


@pytest.mark.parametrize("name", CRITIC_FREE)
@FAST
@given(
    ledger=ledgers(), constants=st.lists(st.sampled_from([-1.0, 0.0, 3.0]), min_size=4, max_size=4)
)
def test_constant_reward_group_has_zero_advantage(
    name: str, ledger: Ledger, constants: list[float]
) -> None:
    # every row of group g: outcome c_g on its last turn, 0 on the others, γ = 1: every
    # return-to-go (token- or turn-level) equals c_g
    inputs = ledger.inputs
    group_const = dict(zip(GROUP_IDS, constants, strict=True))
    rewards = torch.zeros_like(inputs.turn_rewards)
    for b, n in enumerate(ledger.n_turns):
        rewards[b, n - 1] = group_const[int(inputs.group_ids[b])]
    constant = replace(inputs, turn_rewards=rewards)
    out = ADVANTAGES[name](constant, **hparams(name, constant))
    torch.testing.assert_close(out.advantages, torch.zeros_like(out.advantages))


@pytest.mark.parametrize("name", NEW)
@FAST
@given(ledger=ledgers(), junk=st.integers(-5, 99))
def test_masked_tokens_and_turns_cannot_change_outputs(
    name: str, ledger: Ledger, junk: int
) -> None:
    inputs = ledger.inputs
    assert inputs.turn_values is not None and inputs.state_keys is not None
    sampled, exists = inputs.token_mask.bool(), inputs.turn_mask.bool()
    # turn values are read on existing turns, and in the slot after the last turn of a
    # truncated row (its bootstrap)
    read_values = exists.clone()
    for b, n in enumerate(ledger.n_turns):
        if not bool(inputs.terminated[b]) and n < exists.shape[1]:
            read_values[b, n] = True
    garbled = replace(
        inputs,
        turn_index=torch.where(sampled, inputs.turn_index, junk),
        turn_rewards=torch.where(exists, inputs.turn_rewards, torch.nan),
        turn_values=torch.where(read_values, inputs.turn_values, torch.nan),
        state_keys=torch.where(exists, inputs.state_keys, junk),
        values=torch.full_like(inputs.token_mask, torch.nan),
    )
    kwargs = hparams(name, inputs)
    base, out = ADVANTAGES[name](inputs, **kwargs), ADVANTAGES[name](garbled, **kwargs)
    torch.testing.assert_close(out.advantages, base.advantages)
    torch.testing.assert_close(out.returns, base.returns)
    assert torch.all(out.advantages[~sampled] == 0)
    assert torch.all(out.returns[~sampled] == 0)
    for key, value in base.metrics.items():
        assert out.metrics[key] == pytest.approx(value, abs=1e-9)


@pytest.mark.parametrize("name", NEW)
@FAST
@given(ledger=ledgers(), seed=st.integers(0, 2**16))
def test_row_order_and_labels_do_not_matter(name: str, ledger: Ledger, seed: int) -> None:
    inputs = ledger.inputs
    assert inputs.turn_values is not None and inputs.state_keys is not None
    B = inputs.token_mask.shape[0]
    perm = torch.randperm(B, generator=torch.Generator().manual_seed(seed))
    relabel = {3: 10**15, -7: 0, 10**12: -(10**9), 42: 5}  # a bijection on the group ids
    shuffled = AdvantageInputs(
        token_mask=inputs.token_mask[perm],
        turn_index=inputs.turn_index[perm],
        turn_rewards=inputs.turn_rewards[perm],
        turn_mask=inputs.turn_mask[perm],
        group_ids=torch.tensor([relabel[int(g)] for g in inputs.group_ids[perm]]),
        terminated=inputs.terminated[perm],
        turn_values=inputs.turn_values[perm],
        state_keys=(inputs.state_keys[perm] * 7919 - 10**11),  # a bijection on the state keys
    )
    fn, kwargs = ADVANTAGES[name], hparams(name, inputs)
    base, moved = fn(inputs, **kwargs), fn(shuffled, **kwargs)
    torch.testing.assert_close(moved.advantages, base.advantages[perm])
    torch.testing.assert_close(moved.returns, base.returns[perm])
    for key, value in base.metrics.items():
        assert moved.metrics[key] == pytest.approx(value, abs=1e-9)


@pytest.mark.parametrize("name", NEW)
def test_outputs_have_shapes_and_adv_metrics(name: str) -> None:
    inputs = replace(turn_gae_inputs(), state_keys=torch.zeros(3, 3, dtype=torch.long))
    out = ADVANTAGES[name](inputs, **hparams(name, inputs))
    assert out.advantages.shape == out.returns.shape == (3, 7)
    assert {"adv/mean", "adv/std", "adv/min", "adv/max"} <= set(out.metrics)
    assert all(k.startswith("adv/") and isinstance(v, float) for k, v in out.metrics.items())


@pytest.mark.parametrize("name", [n for n in NEW if n != "grpo_passk"])  # as grpo: no turn read
def test_turn_index_out_of_range_on_sampled_token_is_an_error(name: str) -> None:
    inputs = make_inputs(
        token_mask=[[0, 1], [0, 1]],
        turn_index=[[-1, 0], [-1, 2]],
        turn_rewards=[[1.0, 0.0], [0.0, 1.0]],
        turn_values=[[0.0, 0.0], [0.0, 0.0]],
        state_keys=[[0, 1], [0, 1]],
    )
    with pytest.raises(ValueError, match="turn_index on sampled tokens"):
        ADVANTAGES[name](inputs, **hparams(name, inputs))


def test_integer_rewards_are_promoted() -> None:
    inputs = replace(
        turn_gae_inputs(),
        turn_rewards=torch.tensor([[1, 2, 0], [1, 2, 0], [0, 0, 1]]),
        state_keys=torch.zeros(3, 3, dtype=torch.long),
    )
    for name in NEW:
        assert ADVANTAGES[name](inputs, **hparams(name, inputs)).advantages.is_floating_point()


# ----------------------------------------------------------------------------- per estimator


@FAST
@given(ledger=ledgers(), gamma=st.sampled_from([0.5, 1.0]))
def test_reinforce_pp_baseline_matches_naive_and_is_whitened(ledger: Ledger, gamma: float) -> None:
    # raw_t = G_t - mean_g R: G_t the token return-to-go (turn k's reward on its last
    # sampled token; one discount step per sampled token)
    inputs = ledger.inputs
    out = reinforce_pp_baseline(inputs, gamma=gamma)
    B = inputs.token_mask.shape[0]
    outcome = [sum(naive_returns(inputs, b, 1.0)[:1]) for b in range(B)]
    raw = torch.zeros_like(inputs.token_mask)
    for b in range(B):
        same = [
            outcome[j] for j in range(B) if int(inputs.group_ids[j]) == int(inputs.group_ids[b])
        ]
        sampled = inputs.token_mask[b].nonzero().flatten().tolist()
        running = 0.0
        for i in reversed(range(len(sampled))):
            t = sampled[i]
            k = int(inputs.turn_index[b, t])
            last_of_turn = i + 1 == len(sampled) or int(inputs.turn_index[b, sampled[i + 1]]) != k
            running = (float(inputs.turn_rewards[b, k]) if last_of_turn else 0.0) + gamma * running
            raw[b, t] = running - sum(same) / len(same)
    mask = inputs.token_mask.bool()
    var = raw[mask].var() if mask.sum() > 1 else torch.tensor(0.0, dtype=F64)
    expected = (raw - raw[mask].mean()) * torch.rsqrt(var + 1e-8) * mask
    torch.testing.assert_close(out.advantages, expected)
    assume(float(var) > 1e-3)
    assert float(out.advantages[mask].mean()) == pytest.approx(0.0, abs=1e-9)
    assert float(out.advantages[mask].var()) == pytest.approx(1.0, rel=1e-5)


@FAST
@given(ledger=ledgers())
def test_reinforce_pp_baseline_outcome_only_is_whitened_dr_grpo(ledger: Ledger) -> None:
    # γ = 1, reward on the last turn only: every token of b carries R_b - mean_g R
    inputs = ledger.inputs
    rewards = torch.zeros_like(inputs.turn_rewards)
    for b, n in enumerate(ledger.n_turns):
        rewards[b, n - 1] = inputs.turn_rewards[b, 0]
    outcome_only = replace(inputs, turn_rewards=rewards)
    dr_grpo = grpo(outcome_only, norm_std=False).advantages
    torch.testing.assert_close(
        reinforce_pp_baseline(outcome_only).advantages,
        masked_whiten(dr_grpo, outcome_only.token_mask),
    )


@given(
    successes=st.lists(st.booleans(), min_size=1, max_size=6),
    k=st.integers(1, 6),
)
@FAST
def test_grpo_passk_is_the_mean_over_k_subsets(successes: list[bool], k: int) -> None:
    # brute force the derivation: enumerate every k-subset S of the group, score it
    # max_{j in S} success_j, normalise by the subset scores' mean ρ and population std σ,
    # and average the normalised score over the subsets that contain each sample
    n = len(successes)
    assume(k <= n)
    subsets = list(itertools.combinations(range(n), k))
    scores = [float(any(successes[j] for j in s)) for s in subsets]
    rho = sum(scores) / len(scores)
    sigma = math.sqrt(rho * (1 - rho))
    inputs = make_inputs(
        token_mask=[[1]] * n, turn_index=[[0]] * n, turn_rewards=[[float(s)] for s in successes]
    )
    out = grpo_passk(inputs, k=k, eps=0.0)
    for i in range(n):
        mine = [sc for s, sc in zip(subsets, scores, strict=True) if i in s]
        expected = 0.0 if sigma == 0 else sum((sc - rho) / sigma for sc in mine) / len(mine)
        assert float(out.advantages[i, 0]) == pytest.approx(expected, abs=1e-9)
    assert float(out.advantages.sum()) == pytest.approx(0.0, abs=1e-9)  # zero-sum group
    assert out.metrics["adv/pass_at_k"] == pytest.approx(rho)


@FAST
@given(ledger=ledgers())
def test_grpo_passk_with_k_one_is_grpo_with_population_std(ledger: Ledger) -> None:
    # k = 1: ρ = p = c/n, success (1 - p)/σ, failure -p/σ: (s - p) / sqrt(p (1 - p))
    inputs = ledger.inputs
    out = grpo_passk(inputs, k=1)
    R = torch.tensor([sum(naive_returns(inputs, b, 1.0)[:1]) for b in range(len(ledger.n_turns))])
    success = (R > 0.5).to(F64)
    ids = inputs.group_ids
    same = (ids[:, None] == ids[None, :]).to(F64)
    p = (same @ success) / same.sum(1)
    sigma = (p * (1 - p)).sqrt()
    per_traj = torch.where(sigma > 0, (success - p) / (sigma + 1e-6), 0.0)
    torch.testing.assert_close(out.advantages, per_traj[:, None] * inputs.token_mask)


@FAST
@given(
    ledger=ledgers(), gamma=st.sampled_from([0.5, 0.9, 1.0]), lam=st.sampled_from([0.0, 0.7, 1.0])
)
def test_turn_gae_matches_naive_recursion(ledger: Ledger, gamma: float, lam: float) -> None:
    inputs = ledger.inputs
    V = inputs.turn_values
    assert V is not None
    K = V.shape[1]
    out = turn_gae(inputs, gamma=gamma, lam=lam)
    per_turn_adv, per_turn_ret = [], []
    for b, n in enumerate(ledger.n_turns):
        boot = 0.0 if bool(inputs.terminated[b]) or n == K else float(V[b, n])
        adv, ret, following = [0.0] * n, [0.0] * n, 0.0
        for k in reversed(range(n)):
            v_next = float(V[b, k + 1]) if k + 1 < n else boot
            delta = float(inputs.turn_rewards[b, k]) + gamma * v_next - float(V[b, k])
            following = delta + gamma * lam * following
            adv[k], ret[k] = following, following + float(V[b, k])
        per_turn_adv.append(adv)
        per_turn_ret.append(ret)
    torch.testing.assert_close(out.advantages, expand_turns(per_turn_adv, inputs))
    torch.testing.assert_close(out.returns, expand_turns(per_turn_ret, inputs))


@FAST
@given(ledger=ledgers())
def test_turn_gae_gamma_lambda_one_zero_values_is_reward_to_go(ledger: Ledger) -> None:
    inputs = replace(ledger.inputs, turn_values=torch.zeros_like(ledger.inputs.turn_rewards))
    out = turn_gae(inputs, gamma=1.0, lam=1.0)
    to_go = [naive_returns(inputs, b, 1.0) for b in range(len(ledger.n_turns))]
    torch.testing.assert_close(out.advantages, expand_turns(to_go, inputs))
    torch.testing.assert_close(out.returns, out.advantages)


@FAST
@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from([-1.0, 0.0, 1.0, 2.5]),  # r_0
            st.integers(-10, 10).map(lambda v: v / 10),  # V_0
            st.integers(-10, 10).map(lambda v: v / 10),  # V_boot
            st.booleans(),  # terminated
            st.integers(1, 3),  # sampled tokens of the turn
        ),
        min_size=1,
        max_size=4,
    ),
    gamma=st.sampled_from([0.5, 0.9, 1.0]),
    lam=st.sampled_from([0.0, 0.95, 1.0]),
)
def test_turn_gae_one_turn_is_single_step_gae(
    rows: list[tuple[float, float, float, bool, int]], gamma: float, lam: float
) -> None:
    # One turn of n sampled tokens, K = 2 (slot 1 holds V_boot): A_0 = r + γ·V_boot·(1 - done)
    # - V_0. The equivalent single-step gae input: [prompt, s] with values [V_0, V_boot]: the
    # sampled token's state value is values[0] = V_0, and a truncated row bootstraps from
    # values[1], its last real position.
    turn = make_inputs(
        token_mask=[[0] + [1] * n + [0] * (3 - n) for *_, n in rows],
        turn_index=[[-1] + [0] * n + [-1] * (3 - n) for *_, n in rows],
        turn_rewards=[[r, 0.0] for r, *_ in rows],
        turn_mask=[[1, 0]] * len(rows),
        terminated=[done for *_, done, _ in rows],
        turn_values=[[v0, vb] for _, v0, vb, *_ in rows],
    )
    step = AdvantageInputs(
        token_mask=torch.tensor([[0.0, 1.0]] * len(rows), dtype=F64),
        turn_index=torch.tensor([[-1, 0]] * len(rows)),
        turn_rewards=torch.tensor([[r] for r, *_ in rows], dtype=F64),
        turn_mask=torch.ones(len(rows), 1, dtype=F64),
        group_ids=torch.zeros(len(rows), dtype=torch.long),
        terminated=torch.tensor([done for *_, done, _ in rows]),
        attention_mask=torch.ones(len(rows), 2, dtype=F64),
        values=torch.tensor([[v0, vb] for _, v0, vb, *_ in rows], dtype=F64),
    )
    by_turn = turn_gae(turn, gamma=gamma, lam=lam)
    by_token = ADVANTAGES["gae"](step, gamma=gamma, lam=lam)
    mask = turn.token_mask
    torch.testing.assert_close(by_turn.advantages, by_token.advantages[:, 1:2] * mask)
    torch.testing.assert_close(by_turn.returns, by_token.returns[:, 1:2] * mask)


@FAST
@given(ledger=ledgers(max_turns=1))
def test_trloo_with_one_turn_is_rloo(ledger: Ledger) -> None:
    inputs = ledger.inputs
    torch.testing.assert_close(trloo(inputs).advantages, rloo(inputs).advantages)


@FAST
@given(ledger=ledgers(max_turns=1))
def test_turn_grpo_with_one_turn_is_grpo(ledger: Ledger) -> None:
    inputs = ledger.inputs
    torch.testing.assert_close(turn_grpo(inputs).advantages, grpo(inputs).advantages)


@FAST
@given(ledger=ledgers(), gamma=st.sampled_from([0.5, 1.0]))
def test_trloo_matches_naive(ledger: Ledger, gamma: float) -> None:
    inputs = ledger.inputs
    B = len(ledger.n_turns)
    G = [naive_returns(inputs, b, gamma) for b in range(B)]
    R = [sum(naive_returns(inputs, b, 1.0)[:1]) for b in range(B)]
    per_turn = []
    for b in range(B):
        group = [
            j for j in range(B) if j != b and int(inputs.group_ids[j]) == int(inputs.group_ids[b])
        ]
        row = []
        for k in range(ledger.n_turns[b]):
            reached = [G[j][k] for j in group if k < ledger.n_turns[j]]
            if not group:
                row.append(0.0)
            elif reached:
                row.append(G[b][k] - sum(reached) / len(reached))
            else:
                row.append(G[b][k] - sum(R[j] for j in group) / len(group))
        per_turn.append(row)
    torch.testing.assert_close(
        trloo(inputs, gamma=gamma).advantages, expand_turns(per_turn, inputs)
    )


@pytest.mark.parametrize("norm_std", [True, False])
@FAST
@given(ledger=ledgers(), omega=st.sampled_from([0.0, 0.5, 1.0]))
def test_gigpo_with_distinct_states_is_grpo(ledger: Ledger, norm_std: bool, omega: float) -> None:
    inputs = ledger.inputs
    B, K = inputs.turn_mask.shape
    distinct = replace(inputs, state_keys=torch.arange(B * K).view(B, K) * 3 - 5)
    out = gigpo(distinct, omega=omega, gamma=0.9, norm_std=norm_std)
    torch.testing.assert_close(out.advantages, grpo(inputs, norm_std=norm_std).advantages)
    assert out.metrics["adv/frac_singleton_steps"] == 1.0


@FAST
@given(ledger=ledgers())
def test_gigpo_step_part_centres_each_state_set(ledger: Ledger) -> None:
    # with norm_std=False the step advantages of the existing turns of a (group, state) set
    # sum to 0; A - A^E (= ω·A^S) is the same on every sampled token of a turn
    inputs = ledger.inputs
    assert inputs.state_keys is not None
    out = gigpo(inputs, omega=2.0, norm_std=False)
    step = (out.advantages - grpo(inputs, norm_std=False).advantages) / 2.0
    sums: dict[tuple[int, int], float] = {}
    for b, t in inputs.token_mask.nonzero().tolist():
        k = int(inputs.turn_index[b, t])
        first = t == min(
            s
            for s in inputs.token_mask[b].nonzero().flatten().tolist()
            if int(inputs.turn_index[b, s]) == k
        )
        if first:
            key = (int(inputs.group_ids[b]), int(inputs.state_keys[b, k]))
            sums[key] = sums.get(key, 0.0) + float(step[b, t])
    assert all(abs(v) < 1e-9 for v in sums.values())
