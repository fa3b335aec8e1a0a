"""Advantage estimators: reference values (derived by hand) and properties."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pytest
import torch
from algo_inputs import make_inputs
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from turnrl.algos import ADVANTAGES, needs_critic
from turnrl.algos.advantages import gae, grpo, reinforce_pp, rloo
from turnrl.types import AdvantageInputs

FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
F64 = torch.float64
GROUP_IDS = [3, -7, 10**12, 42]  # arbitrary longs, neither contiguous nor sorted


def outcome_inputs(outcomes: list[float], group_ids: list[int], T: int = 3) -> AdvantageInputs:
    """One prompt token, then T - 1 sampled tokens of turn 0; the outcome on turn 0."""
    B = len(outcomes)
    return make_inputs(
        token_mask=[[0] + [1] * (T - 1)] * B,
        turn_index=[[-1] + [0] * (T - 1)] * B,
        turn_rewards=[[r] for r in outcomes],
        group_ids=group_ids,
    )


# ----------------------------------------------------------------------------- random ledgers


@dataclass
class Ledger:
    inputs: AdvantageInputs
    turns: list[list[tuple[int, int, int]]]  # per row: (start, n_sampled, n_obs) per turn
    ends: list[int]  # per row: the number of real tokens


@st.composite
def ledgers(draw: st.DrawFn, max_rows: int = 5, max_turns: int = 3) -> Ledger:
    """Prompt (1-2 tokens), then turns of 1-3 sampled + 0-2 observation tokens, then padding.

    Garbage sits where nothing may be read: reward 1000 on turns that do not exist.
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
    attention = torch.zeros(B, T, dtype=F64)
    turn_index = torch.full((B, T), -1, dtype=torch.long)
    turn_mask = torch.zeros(B, K, dtype=F64)
    turns, ends = [], []
    for b, (prompt, ts) in enumerate(layouts):
        t, row = prompt, []
        for k, (s, o) in enumerate(ts):
            token_mask[b, t : t + s] = 1
            turn_index[b, t : t + s + o] = k
            row.append((t, s, o))
            t += s + o
        attention[b, :t] = 1
        turn_mask[b, : len(ts)] = 1
        turns.append(row)
        ends.append(t)
    reward = st.sampled_from([-1.0, -0.5, 0.0, 0.5, 1.0, 2.0])
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
        attention_mask=attention,
        values=torch.tensor([[draw(value) for _ in range(T)] for _ in range(B)], dtype=F64),
    )
    return Ledger(inputs, turns, ends)


def naive_token_rewards(ledger: Ledger, b: int) -> dict[int, float]:
    """Reward of each sampled token of row b: turn k's reward on its last sampled token."""
    rewards: dict[int, float] = {}
    for k, (start, s, _) in enumerate(ledger.turns[b]):
        for t in range(start, start + s):
            rewards[t] = 0.0
        rewards[start + s - 1] = float(ledger.inputs.turn_rewards[b, k])
    return rewards


def naive_gae(ledger: Ledger, b: int, gamma: float, lam: float) -> tuple[dict, dict]:
    """Textbook GAE by explicit recursion over the list of sampled positions of row b."""
    inp = ledger.inputs
    values = inp.values
    assert values is not None
    rewards = naive_token_rewards(ledger, b)
    sampled = sorted(rewards)
    adv: dict[int, float] = {}
    ret: dict[int, float] = {}
    following = 0.0
    for i in reversed(range(len(sampled))):
        t = sampled[i]
        v = float(values[b, t - 1])
        if i + 1 < len(sampled):
            v_next = float(values[b, sampled[i + 1] - 1])
        else:
            v_next = 0.0 if bool(inp.terminated[b]) else float(values[b, ledger.ends[b] - 1])
        delta = rewards[t] + gamma * v_next - v
        following = delta + gamma * lam * following
        adv[t], ret[t] = following, following + v
    return adv, ret


def assert_zero_outside_mask(x: torch.Tensor, inputs: AdvantageInputs) -> None:
    assert torch.all(x[inputs.token_mask == 0] == 0)


# ----------------------------------------------------------------------------- registry


def test_registered_estimators_and_critic_flags() -> None:
    assert {"gae", "grpo", "reinforce_pp", "rloo"} <= set(ADVANTAGES.names())
    assert ADVANTAGES["grpo"] is grpo
    assert needs_critic("gae")
    assert not any(needs_critic(n) for n in ("grpo", "rloo", "reinforce_pp"))


# ----------------------------------------------------------------------------- grpo / rloo


def test_grpo_reference_values() -> None:
    # group 7: R = [1, 0, 2]; mean 1; unbiased std sqrt((0 + 1 + 1) / 2) = 1
    #   -> A = [0, -1, 1] / (1 + 1e-6)
    # group 3: R = [1, 0] (row 1 is 0.5 + 0.5 over two turns; row 3's turn 1 does not exist)
    #   mean 0.5; std sqrt((0.25 + 0.25) / 1) = 1/sqrt(2) -> A = ±0.5 / (0.70711 + 1e-6)
    # group 42: a single trajectory -> 0
    inputs = make_inputs(
        token_mask=[[0, 1, 1]] * 6,
        turn_index=[[-1, 0, 0]] * 6,
        turn_rewards=[[1, 0], [0.5, 0.5], [0, 0], [0, 99], [2, 0], [5, 0]],
        turn_mask=[[1, 1], [1, 1], [1, 1], [1, 0], [1, 1], [1, 1]],  # row 3's 99 is no turn
        group_ids=[7, 3, 7, 3, 7, 42],
    )
    out = grpo(inputs)
    s = 0.5 / (math.sqrt(0.5) + 1e-6)
    expected = torch.tensor([0, s, -1 / (1 + 1e-6), -s, 1 / (1 + 1e-6), 0], dtype=F64)
    torch.testing.assert_close(out.advantages, expected[:, None] * torch.tensor([[0, 1, 1]]))
    torch.testing.assert_close(out.returns, out.advantages)
    # groups 7 and 3 have spread, group 42 (a singleton) has none
    assert out.metrics["adv/frac_zero_std_groups"] == pytest.approx(1 / 3)
    assert out.metrics["adv/max"] == pytest.approx(1 / (1 + 1e-6))
    assert out.metrics["adv/mean"] == pytest.approx(0.0, abs=1e-12)  # symmetric within groups


def test_dr_grpo_reference_values() -> None:
    # norm_std=False: A = R - mean_g. Group 1: R = [1, 0, 0, 0] mean 0.25 -> [0.75, -0.25 x3]
    out = grpo(outcome_inputs([1, 0, 0, 0], [1, 1, 1, 1]), norm_std=False)
    torch.testing.assert_close(
        out.advantages[:, 1], torch.tensor([0.75, -0.25, -0.25, -0.25], dtype=F64)
    )


def test_rloo_reference_values() -> None:
    # group 7: R = [1, 0, 2]: A_0 = 1 - (0 + 2)/2 = 0, A_1 = 0 - (1 + 2)/2 = -1.5,
    #          A_2 = 2 - (1 + 0)/2 = 1.5
    # group 3: R = [0, 1]: A = 0 - 1 = -1, 1 - 0 = 1; group 42 (singleton): 0
    out = rloo(outcome_inputs([1, 0, 0, 1, 2, 5], [7, 3, 7, 3, 7, 42]))
    expected = torch.tensor([0, -1, -1.5, 1, 1.5, 0], dtype=F64)
    torch.testing.assert_close(out.advantages, expected[:, None] * torch.tensor([[0, 1, 1]]))
    torch.testing.assert_close(out.returns, out.advantages)
    assert out.metrics["adv/frac_zero_std_groups"] == pytest.approx(1 / 3)


@pytest.mark.parametrize("name", ["grpo", "rloo"])
@FAST
@given(
    ledger=ledgers(), constants=st.lists(st.sampled_from([-1.0, 0.0, 3.0]), min_size=4, max_size=4)
)
def test_constant_reward_group_has_zero_advantage(
    name: str, ledger: Ledger, constants: list[float]
) -> None:
    inputs = ledger.inputs
    group_const = dict(zip(GROUP_IDS, constants, strict=True))
    # every row of group g: outcome c_g, split over its turns in different ways
    rewards = torch.zeros_like(inputs.turn_rewards)
    for b in range(inputs.token_mask.shape[0]):
        n_turns = int(inputs.turn_mask[b].sum())
        rewards[b, :n_turns] = group_const[int(inputs.group_ids[b])] / n_turns
    out = ADVANTAGES[name](replace(inputs, turn_rewards=rewards))
    torch.testing.assert_close(out.advantages, torch.zeros_like(out.advantages))
    assert out.metrics["adv/frac_zero_std_groups"] == 1.0


@FAST
@given(ledger=ledgers())
def test_dr_grpo_times_g_over_g_minus_1_is_rloo(ledger: Ledger) -> None:
    inputs = ledger.inputs
    ids = inputs.group_ids
    G = (ids[:, None] == ids[None, :]).sum(1).to(F64)
    scale = torch.where(G > 1, G / (G - 1).clamp(min=1), 0.0)
    dr = grpo(inputs, norm_std=False).advantages
    torch.testing.assert_close(dr * scale[:, None], rloo(inputs).advantages)


@pytest.mark.parametrize("name", ["grpo", "rloo", "reinforce_pp", "gae"])
@FAST
@given(ledger=ledgers(), seed=st.integers(0, 2**16))
def test_row_order_and_group_labels_do_not_matter(name: str, ledger: Ledger, seed: int) -> None:
    inputs = ledger.inputs
    B = inputs.token_mask.shape[0]
    perm = torch.randperm(B, generator=torch.Generator().manual_seed(seed))
    relabel = {3: 10**15, -7: 0, 10**12: -(10**9), 42: 5}  # a bijection on the ids
    shuffled = AdvantageInputs(
        token_mask=inputs.token_mask[perm],
        turn_index=inputs.turn_index[perm],
        turn_rewards=inputs.turn_rewards[perm],
        turn_mask=inputs.turn_mask[perm],
        group_ids=torch.tensor([relabel[int(g)] for g in inputs.group_ids[perm]]),
        terminated=inputs.terminated[perm],
        attention_mask=inputs.attention_mask[perm] if inputs.attention_mask is not None else None,
        values=inputs.values[perm] if inputs.values is not None else None,
    )
    fn = ADVANTAGES[name]
    base, moved = fn(inputs), fn(shuffled)
    torch.testing.assert_close(moved.advantages, base.advantages[perm])
    torch.testing.assert_close(moved.returns, base.returns[perm])
    for key, value in base.metrics.items():
        assert moved.metrics[key] == pytest.approx(value, abs=1e-9)


@pytest.mark.parametrize("name", ["grpo", "rloo", "reinforce_pp", "gae"])
@FAST
@given(ledger=ledgers(), junk=st.integers(-5, 99))
def test_masked_tokens_cannot_change_outputs(name: str, ledger: Ledger, junk: int) -> None:
    inputs = ledger.inputs
    assert inputs.values is not None
    sampled = inputs.token_mask.bool()
    # turn_index is only read on sampled tokens (even out-of-range junk elsewhere is fine)
    garbled_turns = torch.where(sampled, inputs.turn_index, junk)
    # values are read at t - 1 for sampled t, and at the last real position (bootstrap)
    read = torch.zeros_like(sampled)
    read[:, :-1] = sampled[:, 1:]
    for b, end in enumerate(ledger.ends):
        read[b, end - 1] = True
    garbled_values = torch.where(read, inputs.values, torch.nan)
    garbled = replace(inputs, turn_index=garbled_turns, values=garbled_values)
    base, out = ADVANTAGES[name](inputs), ADVANTAGES[name](garbled)
    torch.testing.assert_close(out.advantages, base.advantages)
    torch.testing.assert_close(out.returns, base.returns)
    assert_zero_outside_mask(out.advantages, inputs)
    assert_zero_outside_mask(out.returns, inputs)


# ----------------------------------------------------------------------------- reinforce_pp


def test_reinforce_pp_reference_values() -> None:
    # row 0: [prompt, s0, s0, obs, s1, pad], turn rewards [1, 2]; gamma = 0.5
    #   rewards on sampled tokens (positions 1, 2, 4) = [0, 1, 2]  (each on its turn's last token)
    #   G_4 = 2; G_2 = 1 + 0.5 * 2 = 2; G_1 = 0 + 0.5 * 2 = 1   (the obs token is no step)
    # row 1: [prompt, s0, s0, s0, pad, pad], turn reward [3]
    #   G_3 = 3; G_2 = 1.5; G_1 = 0.75
    # all six: [1, 2, 2, 0.75, 1.5, 3], mean 10.25 / 6, unbiased var 3.3020833 / 5
    inputs = make_inputs(
        token_mask=[[0, 1, 1, 0, 1, 0], [0, 1, 1, 1, 0, 0]],
        turn_index=[[-1, 0, 0, 0, 1, -1], [-1, 0, 0, 0, -1, -1]],
        turn_rewards=[[1, 2], [3, 0]],
        turn_mask=[[1, 1], [1, 0]],
    )
    out = reinforce_pp(inputs, gamma=0.5)
    g = torch.tensor([[0, 1, 2, 0, 2, 0], [0, 0.75, 1.5, 3, 0, 0]], dtype=F64)
    mean, var = 10.25 / 6, 3.3020833333333333 / 5
    expected = (g - mean) / math.sqrt(var + 1e-8) * inputs.token_mask
    torch.testing.assert_close(out.advantages, expected)
    torch.testing.assert_close(out.returns, out.advantages)
    assert out.metrics["adv/returns_mean"] == pytest.approx(mean)


def test_reinforce_pp_gamma_one_outcome_only_gives_outcome_before_whitening() -> None:
    # outcome on the last turn only; gamma = 1 -> G_t = R_b on every sampled token of b:
    # row 0 (R = 1, 3 tokens), row 1 (R = 3, 1 token) -> values [1, 1, 1, 3]
    # mean 1.5, unbiased var (3 * 0.25 + 2.25) / 3 = 1 -> A = [-0.5, -0.5, -0.5, 1.5]
    inputs = make_inputs(
        token_mask=[[0, 1, 0, 1, 1], [0, 1, 0, 0, 0]],
        turn_index=[[-1, 0, 0, 1, 1], [-1, 0, -1, -1, -1]],
        turn_rewards=[[0, 1], [3, 0]],
        turn_mask=[[1, 1], [1, 0]],
    )
    out = reinforce_pp(inputs)
    expected = torch.tensor([[0, -0.5, 0, -0.5, -0.5], [0, 1.5, 0, 0, 0]], dtype=F64) / math.sqrt(
        1 + 1e-8
    )
    torch.testing.assert_close(out.advantages, expected)


@FAST
@given(ledger=ledgers(), gamma=st.sampled_from([0.0, 0.5, 0.9, 1.0]))
def test_reinforce_pp_matches_naive_and_is_whitened(ledger: Ledger, gamma: float) -> None:
    inputs = ledger.inputs
    out = reinforce_pp(inputs, gamma=gamma)
    raw = torch.zeros_like(inputs.token_mask)
    for b in range(inputs.token_mask.shape[0]):
        rewards = naive_token_rewards(ledger, b)
        running = 0.0
        for t in sorted(rewards, reverse=True):
            running = rewards[t] + gamma * running
            raw[b, t] = running
    mask = inputs.token_mask.bool()
    var = raw[mask].var() if mask.sum() > 1 else torch.tensor(0.0, dtype=F64)
    torch.testing.assert_close(
        out.advantages, (raw - raw[mask].mean()) * torch.rsqrt(var + 1e-8) * mask
    )
    assume(float(var) > 1e-3)
    assert float(out.advantages[mask].mean()) == pytest.approx(0.0, abs=1e-9)
    assert float(out.advantages[mask].var()) == pytest.approx(1.0, rel=1e-5)


# ----------------------------------------------------------------------------- gae


def gae_layout(
    *, terminated: bool = True, attention: bool = True, values: bool = True
) -> AdvantageInputs:
    """[prompt, s0, s0, obs, s1, obs, pad] with turn rewards [1, 2]."""
    return make_inputs(
        token_mask=[[0, 1, 1, 0, 1, 0, 0]],
        turn_index=[[-1, 0, 0, 0, 1, 1, -1]],
        turn_rewards=[[1.0, 2.0]],
        terminated=[terminated],
        values=[[0.5, 0.6, 0.7, 0.2, 0.9, 0.3, 9.0]] if values else None,
        attention_mask=[[1, 1, 1, 1, 1, 1, 0]] if attention else None,
    )


@pytest.mark.parametrize(
    ("terminated", "attention", "expected_adv"),
    [
        # Sampled t = 1, 2, 4; V_t = values[t-1] = 0.5, 0.6, 0.2; r = 0, 1, 2; γ = 0.9, λ = 0.5.
        # V_next: t=1 -> values[1] = 0.6; t=2 -> values[3] = 0.2 (after the obs); t=4 -> final.
        # δ_2 = 1 + 0.9*0.2 - 0.6 = 0.58; δ_1 = 0.9*0.6 - 0.5 = 0.04; γλ = 0.45.
        # terminated: final 0 -> δ_4 = 2 - 0.2 = 1.8; A_2 = 0.58 + 0.45*1.8 = 1.39;
        #   A_1 = 0.04 + 0.45*1.39 = 0.6655
        (True, True, [0.6655, 1.39, 1.8]),
        # truncated, bootstrap values[5] = 0.3 (last real position): δ_4 = 2 + 0.27 - 0.2 = 2.07
        #   A_2 = 0.58 + 0.45*2.07 = 1.5115; A_1 = 0.04 + 0.45*1.5115 = 0.720175
        (False, True, [0.720175, 1.5115, 2.07]),
        # truncated, no attention mask: bootstrap values[4] = 0.9: δ_4 = 2 + 0.81 - 0.2 = 2.61
        #   A_2 = 0.58 + 0.45*2.61 = 1.7545; A_1 = 0.04 + 0.45*1.7545 = 0.829525
        (False, False, [0.829525, 1.7545, 2.61]),
    ],
)
def test_gae_reference_values(terminated: bool, attention: bool, expected_adv: list[float]) -> None:
    inputs = gae_layout(terminated=terminated, attention=attention)
    out = gae(inputs, gamma=0.9, lam=0.5)
    expected = torch.zeros(1, 7, dtype=F64)
    expected[0, [1, 2, 4]] = torch.tensor(expected_adv, dtype=F64)
    torch.testing.assert_close(out.advantages, expected)
    # returns = A + V_t on sampled tokens
    value_of_state = torch.tensor([0, 0.5, 0.6, 0, 0.2, 0, 0], dtype=F64)
    torch.testing.assert_close(out.returns, (expected + value_of_state) * inputs.token_mask)


def test_gae_needs_values() -> None:
    inputs = gae_layout(values=False)
    with pytest.raises(ValueError, match="advantage 'gae' needs a critic"):
        gae(inputs)


def test_gae_whiten_flag() -> None:
    inputs = gae_layout()
    plain, white = gae(inputs, gamma=0.9, lam=0.5), gae(inputs, gamma=0.9, lam=0.5, whiten=True)
    mask = inputs.token_mask.bool()
    a = plain.advantages[mask]
    torch.testing.assert_close(white.advantages[mask], (a - a.mean()) / torch.sqrt(a.var() + 1e-8))
    torch.testing.assert_close(white.returns, plain.returns)


@FAST
@given(
    ledger=ledgers(), gamma=st.sampled_from([0.5, 0.9, 1.0]), lam=st.sampled_from([0.0, 0.7, 1.0])
)
def test_gae_matches_textbook_recursion(ledger: Ledger, gamma: float, lam: float) -> None:
    out = gae(ledger.inputs, gamma=gamma, lam=lam)
    for b in range(ledger.inputs.token_mask.shape[0]):
        adv, ret = naive_gae(ledger, b, gamma, lam)
        for t in adv:
            assert float(out.advantages[b, t]) == pytest.approx(adv[t], abs=1e-9)
            assert float(out.returns[b, t]) == pytest.approx(ret[t], abs=1e-9)


@FAST
@given(ledger=ledgers())
def test_gae_gamma_lambda_one_is_reward_to_go_minus_value(ledger: Ledger) -> None:
    # A_t = Σ_{s ≥ t} r_s + V_boot - V_t, V_boot = 0 if terminated else values[last real]
    inputs = ledger.inputs
    assert inputs.values is not None
    out = gae(inputs, gamma=1.0, lam=1.0)
    for b in range(inputs.token_mask.shape[0]):
        rewards = naive_token_rewards(ledger, b)
        boot = 0.0 if bool(inputs.terminated[b]) else float(inputs.values[b, ledger.ends[b] - 1])
        for t in rewards:
            to_go = sum(r for s, r in rewards.items() if s >= t)
            expected = to_go + boot - float(inputs.values[b, t - 1])
            assert float(out.advantages[b, t]) == pytest.approx(expected, abs=1e-9)


@FAST
@given(ledger=ledgers(), lam=st.sampled_from([0.0, 0.5, 0.95, 1.0]))
def test_gae_with_perfect_values_has_zero_advantage(ledger: Ledger, lam: float) -> None:
    # outcome R_b on the last turn, terminated, V ≡ R_b: every δ is 0 (γ = 1)
    inputs = ledger.inputs
    B, T = inputs.token_mask.shape
    rewards = torch.zeros_like(inputs.turn_rewards)
    outcome = inputs.turn_rewards[:, 0]
    for b in range(B):
        rewards[b, int(inputs.turn_mask[b].sum()) - 1] = outcome[b]
    perfect = replace(
        inputs,
        turn_rewards=rewards,
        terminated=torch.ones(B, dtype=torch.bool),
        values=outcome[:, None].expand(B, T).clone(),
    )
    out = gae(perfect, gamma=1.0, lam=lam)
    torch.testing.assert_close(out.advantages, torch.zeros_like(out.advantages))
    torch.testing.assert_close(out.returns, outcome[:, None] * inputs.token_mask)


# ----------------------------------------------------------------------------- shared contract


@pytest.mark.parametrize("name", ["grpo", "rloo", "reinforce_pp", "gae"])
def test_outputs_have_shapes_and_adv_metrics(name: str) -> None:
    inputs = gae_layout()
    out = ADVANTAGES[name](inputs)
    assert out.advantages.shape == out.returns.shape == (1, 7)
    assert {"adv/mean", "adv/std", "adv/min", "adv/max"} <= set(out.metrics)
    assert all(k.startswith("adv/") and isinstance(v, float) for k, v in out.metrics.items())


def test_shape_mismatch_names_the_field() -> None:
    inputs = replace(outcome_inputs([1, 0], [1, 1]), group_ids=torch.tensor([1, 1, 1]))
    with pytest.raises(ValueError, match=r"group_ids has shape \(3,\), expected \(2,\)"):
        grpo(inputs)


def test_turn_index_out_of_range_on_sampled_token_is_an_error() -> None:
    inputs = make_inputs(token_mask=[[0, 1]], turn_index=[[-1, 2]], turn_rewards=[[1.0, 0.0]])
    with pytest.raises(ValueError, match="turn_index on sampled tokens"):
        reinforce_pp(inputs)


def test_turn_without_sampled_tokens_credits_the_previous_turn() -> None:
    # turn 1 exists (reward 2) but has no sampled token: its reward lands on turn 0's last
    # sampled token, position 2 -> G = [3, 3] at positions 1, 2 (γ = 1), all equal -> A = 0;
    # check the raw returns through the metric instead: mean G = 3
    inputs = make_inputs(
        token_mask=[[0, 1, 1, 0]], turn_index=[[-1, 0, 0, 1]], turn_rewards=[[1.0, 2.0]]
    )
    assert reinforce_pp(inputs).metrics["adv/returns_mean"] == pytest.approx(3.0)


def test_empty_batch_rows_and_integer_rewards() -> None:
    # a row without sampled tokens gets zeros; integer rewards are promoted to float
    inputs = AdvantageInputs(
        token_mask=torch.tensor([[0.0, 1.0], [0.0, 0.0]]),
        turn_index=torch.tensor([[-1, 0], [-1, -1]]),
        turn_rewards=torch.tensor([[1], [0]]),
        turn_mask=torch.ones(2, 1),
        group_ids=torch.tensor([0, 0]),
        terminated=torch.tensor([True, True]),
    )
    for name in ("grpo", "rloo", "reinforce_pp"):
        out = ADVANTAGES[name](inputs)
        assert out.advantages.is_floating_point()
        assert torch.all(out.advantages[1] == 0)
