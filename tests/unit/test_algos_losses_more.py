"""Policy losses pg, gspo, cispo; behaviour correction, KL reward penalty, adaptive KL."""

from __future__ import annotations

import itertools
import math
import statistics
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from turnrl.algos import (
    AGGREGATIONS,
    POLICY_LOSSES,
    AdaptiveKLController,
    behaviour_correction,
    kl_token_penalty,
)
from turnrl.algos.correction import BehaviourMode
from turnrl.algos.functional import masked_mean
from turnrl.algos.losses import cispo, gspo, pg, ppo_clip
from turnrl.registry import UnknownNameError

FAST = settings(max_examples=15, deadline=None)
F64 = torch.float64
NEW_LOSSES = ["cispo", "gspo", "pg"]
# hparams that make the clips of gspo / cispo bite on random data of ratio ~ e^±0.5
LOSS_KWARGS: dict[str, dict[str, float]] = {
    "cispo": {"clip_high": 0.2, "clip_low": 0.2},
    "gspo": {"clip_low": 0.05, "clip_high": 0.05},
    "pg": {},
}


def t(rows: list[list[float]]) -> torch.Tensor:
    return torch.tensor(rows, dtype=F64)


def random_batch(seed: int, B: int = 3, T: int = 4) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    logp = -torch.rand(B, T, generator=g, dtype=F64) * 2
    old = logp + (torch.rand(B, T, generator=g, dtype=F64) - 0.5)  # ratios in [e^-.5, e^.5]
    adv = torch.randn(B, T, generator=g, dtype=F64)
    mask = (torch.rand(B, T, generator=g) < 0.6).to(F64)
    return logp, old, adv, mask


def grad_of(fn_name: str, logp: torch.Tensor, *args: torch.Tensor, **kw: float) -> torch.Tensor:
    x = logp.detach().clone().requires_grad_()
    loss, _ = POLICY_LOSSES[fn_name](x, *args, **kw)
    (g,) = torch.autograd.grad(loss.sum(), x)
    return g


def test_registered() -> None:
    for name in NEW_LOSSES:
        assert name in POLICY_LOSSES
    assert POLICY_LOSSES["pg"] is pg
    assert POLICY_LOSSES["gspo"] is gspo
    assert POLICY_LOSSES["cispo"] is cispo


# ----------------------------------------------------------------------------- pg


def test_pg_reference_values() -> None:
    # loss = -A logp; the masked token holds garbage (inf log-prob, nan advantage)
    #   A=1,  logp=-1:   -(1)(-1)    =  1
    #   A=-2, logp=-2:   -(-2)(-2)   = -4
    #   A=3,  logp=-0.5: -(3)(-0.5)  =  1.5
    # gradient w.r.t. logp = -A = [-1, 2, -3, 0]; old_logprobs is never read (nan)
    logp = t([[-1.0, -2.0, -0.5, math.inf]]).requires_grad_()
    adv, mask = t([[1.0, -2.0, 3.0, math.nan]]), t([[1, 1, 1, 0]])
    loss, metrics = pg(logp, torch.full_like(adv, math.nan), adv, mask)
    torch.testing.assert_close(loss, t([[1.0, -4.0, 1.5, 0.0]]))
    assert metrics == {}
    loss.sum().backward()
    assert logp.grad is not None
    torch.testing.assert_close(logp.grad, t([[-1.0, 2.0, -3.0, 0.0]]))


@FAST
@given(seed=st.integers(0, 2**16))
def test_pg_gradient_is_ppo_clip_gradient_at_ratio_one(seed: int) -> None:
    logp, _, adv, mask = random_batch(seed)
    grad_pg = grad_of("pg", logp, logp, adv, mask)
    grad_ppo = grad_of("ppo_clip", logp, logp, adv, mask)  # old = logp: ratio ≡ 1
    torch.testing.assert_close(grad_pg, grad_ppo)
    torch.testing.assert_close(grad_pg, -adv * mask)


# ----------------------------------------------------------------------------- gspo

# Three trajectories, clip range [0.8, 1.2] (clip_low = clip_high = 0.2):
#   row 0: log-ratios [0.1, 0.3] on sampled tokens (+ a masked garbage token), A = 1
#   row 1: log-ratios [-0.1, 0, 0.1], A = -2
#   row 2: one sampled token with ratio 0.5 (+ two masked garbage tokens), A = -1
GS_OLD = t([[-1.0, -2.0, 0.0], [-0.5, -1.0, -1.5], [-1.0, 0.0, 0.0]])
GS_NEW = GS_OLD + t([[0.1, 0.3, math.nan], [-0.1, 0.0, 0.1], [math.log(0.5), math.inf, 0.0]])
GS_ADV = t([[1.0, 1.0, math.nan], [-2.0, -2.0, -2.0], [-1.0, math.nan, 5.0]])
GS_MASK = t([[1, 1, 0], [1, 1, 1], [1, 0, 0]])


def test_gspo_reference_values() -> None:
    # s_b = exp(mean of the sampled log-ratios):
    #   row 0: exp((0.1 + 0.3) / 2) = e^0.2 = 1.2214 > 1.2, A = 1: -min(1.2214, 1.2) = -1.2
    #          on both tokens, clipped (ppo_clip would not clip token 0: e^0.1 = 1.105)
    #   row 1: exp(0) = 1, A = -2: -min(-2, -2) = 2 on every token, not clipped
    #   row 2: 0.5, A = -1: -min(-0.5, -0.8) = 0.8, clipped
    # clipfrac = 2 of 3 sequences; ratio_mean = (e^0.2 + 1 + 0.5) / 3
    # gradients: clipped rows 0; row 1: -A · s_b = 2 per token
    logp = GS_NEW.clone().requires_grad_()
    loss, metrics = gspo(logp, GS_OLD, GS_ADV, GS_MASK, clip_low=0.2, clip_high=0.2)
    torch.testing.assert_close(loss, t([[-1.2, -1.2, 0.0], [2.0, 2.0, 2.0], [0.8, 0.0, 0.0]]))
    assert metrics["loss/clipfrac"] == pytest.approx(2 / 3)
    assert metrics["loss/ratio_mean"] == pytest.approx((math.exp(0.2) + 1.5) / 3)
    loss.sum().backward()
    assert logp.grad is not None
    torch.testing.assert_close(logp.grad, t([[0.0, 0.0, 0.0], [2.0, 2.0, 2.0], [0.0, 0.0, 0.0]]))


def test_gspo_default_bounds_are_the_papers() -> None:
    # default range [1 - 3e-4, 1 + 4e-4]: row 1 (s = 1) stays inside; rows 0 and 2 clip to
    # 1.0004 (A = 1: loss -1.0004) and 0.9997 (A = -1: -min(-0.5, -0.9997) = 0.9997)
    loss, metrics = gspo(GS_NEW, GS_OLD, GS_ADV, GS_MASK)
    torch.testing.assert_close(
        loss, t([[-1.0004, -1.0004, 0.0], [2.0, 2.0, 2.0], [0.9997, 0.0, 0.0]])
    )
    assert metrics["loss/clipfrac"] == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="clip_low"):
        gspo(GS_NEW, GS_OLD, GS_ADV, GS_MASK, clip_low=-0.1)


@FAST
@given(seed=st.integers(0, 2**16), bounds=st.sampled_from([(0.2, 0.2), (0.05, 0.3), (3e-4, 4e-4)]))
def test_gspo_one_token_per_sequence_is_ppo_clip(seed: int, bounds: tuple[float, float]) -> None:
    logp, old, adv, _ = random_batch(seed, B=5, T=3)
    g = torch.Generator().manual_seed(seed + 1)
    # one sampled token per row, at a random position; the rest of each row is garbage
    pos = torch.randint(0, 3, (5,), generator=g)
    mask = torch.nn.functional.one_hot(pos, 3).to(F64)
    logp = torch.where(mask.bool(), logp, math.nan)
    kw = {"clip_low": bounds[0], "clip_high": bounds[1]}
    loss_g, m_g = gspo(logp, old, adv, mask, **kw)
    loss_p, m_p = ppo_clip(logp, old, adv, mask, **kw)
    torch.testing.assert_close(loss_g, loss_p)
    torch.testing.assert_close(
        grad_of("gspo", logp, old, adv, mask, **kw), grad_of("ppo_clip", logp, old, adv, mask, **kw)
    )
    assert m_g["loss/clipfrac"] == pytest.approx(m_p["loss/clipfrac"])
    assert m_g["loss/ratio_mean"] == pytest.approx(m_p["loss/ratio_mean"])


@FAST
@given(seed=st.integers(0, 2**16))
def test_gspo_ratio_is_exp_of_mean_log_ratio(seed: int) -> None:
    # no clipping (wide bounds), A = 1: loss = -s_b on every sampled token, gradient -s_b
    logp, old, _, mask = random_batch(seed)
    s = masked_mean(logp - old, mask, dim=1).exp()[:, None]
    ones = torch.ones_like(logp)
    kw = {"clip_low": 1.0, "clip_high": 1e6}
    loss, metrics = gspo(logp, old, ones, mask, **kw)
    torch.testing.assert_close(loss, -s * mask)
    torch.testing.assert_close(grad_of("gspo", logp, old, ones, mask, **kw), -s * mask)
    rows = mask.sum(1) > 0
    assert metrics["loss/ratio_mean"] == pytest.approx(float(s[rows].mean()) if rows.any() else 0)


@FAST
@given(seed=st.integers(0, 2**16))
def test_gspo_token_form_with_seq_mean_is_the_sequence_objective(seed: int) -> None:
    # sequence form: -(1/G) Σ_b min(s_b A_b, clip(s_b) A_b), s_b = exp(mean log-ratio) with
    # its full gradient; equals the token form aggregated by seq_mean_token_mean
    logp, old, _, mask = random_batch(seed, B=4, T=5)
    mask[:, 0] = 1.0  # every row has a sampled token
    adv_seq = torch.randn(4, 1, generator=torch.Generator().manual_seed(seed), dtype=F64)
    adv = adv_seq.expand(4, 5)
    x = logp.clone().requires_grad_()
    s = masked_mean(x - old, mask, dim=1).exp()
    a = adv_seq[:, 0]
    seq_obj = torch.maximum(-s * a, -s.clamp(0.95, 1.05) * a).mean()
    (g_seq,) = torch.autograd.grad(seq_obj, x)
    y = logp.clone().requires_grad_()
    per_token, _ = gspo(y, old, adv, mask, clip_low=0.05, clip_high=0.05)
    tok_obj = AGGREGATIONS["seq_mean_token_mean"](per_token, mask)
    (g_tok,) = torch.autograd.grad(tok_obj, y)
    torch.testing.assert_close(tok_obj, seq_obj)
    torch.testing.assert_close(g_tok, g_seq)


# ----------------------------------------------------------------------------- cispo

# ratios r = [1, 1.5, 0.5, 8], logp = [-1, -2, -0.5, -0.25], A = [1, 1, -1, 2], a masked
# garbage token at the end
CI_RATIOS = [1.0, 1.5, 0.5, 8.0]
CI_NEW = t([[-1.0, -2.0, -0.5, -0.25, math.inf]])
CI_OLD = CI_NEW - t([[math.log(r) for r in CI_RATIOS] + [math.nan]])
CI_ADV = t([[1.0, 1.0, -1.0, 2.0, math.nan]])
CI_MASK = t([[1, 1, 1, 1, 0]])


def test_cispo_reference_values() -> None:
    # defaults: w = clip(r, none, 1 + 5) = [1, 1.5, 0.5, 6]; loss = -w A logp:
    #   -1 · 1 · (-1) = 1;  -1.5 · 1 · (-2) = 3;  -0.5 · (-1) · (-0.5) = -0.25;
    #   -6 · 2 · (-0.25) = 3;  masked: 0
    # gradient = -w A = [-1, -1.5, 0.5, -12, 0]: the clipped token keeps its gradient
    logp = CI_NEW.clone().requires_grad_()
    loss, metrics = cispo(logp, CI_OLD, CI_ADV, CI_MASK)
    torch.testing.assert_close(loss, t([[1.0, 3.0, -0.25, 3.0, 0.0]]))
    assert metrics["loss/clipfrac"] == pytest.approx(1 / 4)
    assert metrics["loss/weight_mean"] == pytest.approx((1 + 1.5 + 0.5 + 6) / 4)
    assert metrics["loss/ratio_mean"] == pytest.approx((1 + 1.5 + 0.5 + 8) / 4)
    loss.sum().backward()
    assert logp.grad is not None
    torch.testing.assert_close(logp.grad, t([[-1.0, -1.5, 0.5, -12.0, 0.0]]))


def test_cispo_lower_bound() -> None:
    # clip_low = 0.2, clip_high = 0.2: w = [1, 1.2, 0.8, 1.2]
    #   loss = [1, -1.2·1·(-2) = 2.4, -0.8·(-1)·(-0.5) = -0.4, -1.2·2·(-0.25) = 0.6]
    loss, metrics = cispo(CI_NEW, CI_OLD, CI_ADV, CI_MASK, clip_low=0.2, clip_high=0.2)
    torch.testing.assert_close(loss, t([[1.0, 2.4, -0.4, 0.6, 0.0]]))
    assert metrics["loss/clipfrac"] == pytest.approx(3 / 4)
    with pytest.raises(ValueError, match="clip_high"):
        cispo(CI_NEW, CI_OLD, CI_ADV, CI_MASK, clip_high=-1.0)


@FAST
@given(seed=st.integers(0, 2**16))
def test_cispo_gradient_at_ratio_one_is_pg(seed: int) -> None:
    logp, _, adv, mask = random_batch(seed)
    loss_c, metrics = cispo(logp, logp, adv, mask)
    loss_p, _ = pg(logp, logp, adv, mask)
    torch.testing.assert_close(loss_c, loss_p)
    torch.testing.assert_close(
        grad_of("cispo", logp, logp, adv, mask), grad_of("pg", logp, logp, adv, mask)
    )
    assert metrics["loss/clipfrac"] == 0.0


# ----------------------------------------------------------------------------- all new losses


@pytest.mark.parametrize("name", NEW_LOSSES)
@FAST
@given(
    junk=st.sampled_from([math.inf, -math.inf, math.nan, 1e6]),
    seed=st.integers(0, 2**16),
)
def test_masked_tokens_cannot_change_anything(name: str, junk: float, seed: int) -> None:
    logp, old, adv, mask = random_batch(seed)
    fn, kw = POLICY_LOSSES[name], LOSS_KWARGS[name]
    base, base_metrics = fn(logp, old, adv, mask, **kw)
    off = ~mask.bool()
    garbled = [torch.where(off, torch.full_like(x, junk), x) for x in (logp, old, adv)]
    loss, metrics = fn(*garbled, mask, **kw)
    torch.testing.assert_close(loss, base)
    assert torch.all(loss[off] == 0)
    assert metrics == pytest.approx(base_metrics)
    grad = grad_of(name, garbled[0], *garbled[1:], mask, **kw)
    torch.testing.assert_close(grad, grad_of(name, logp, old, adv, mask, **kw))
    assert torch.all(grad[off] == 0)


@pytest.mark.parametrize("name", NEW_LOSSES)
@FAST
@given(
    seed=st.integers(0, 2**16),
    cuts=st.lists(st.integers(0, 5), max_size=3),
    agg=st.sampled_from(sorted(AGGREGATIONS)),
)
def test_microbatch_split_does_not_change_loss_or_gradient(
    name: str, seed: int, cuts: list[int], agg: str
) -> None:
    logp, old, adv, mask = random_batch(seed, B=5, T=4)
    fn, kw, aggregate = POLICY_LOSSES[name], LOSS_KWARGS[name], AGGREGATIONS[agg]
    totals = {
        "total_tokens": float(mask.sum()),
        "total_seqs": float((mask.sum(1) > 0).sum()),
        "norm_len": 4.0,
    }

    def value_and_grad(rows: list[slice]) -> tuple[float, torch.Tensor]:
        x = logp.clone().requires_grad_()
        total = sum(
            aggregate(fn(x[r], old[r], adv[r], mask[r], **kw)[0], mask[r], **totals) for r in rows
        )
        (g,) = torch.autograd.grad(total, x)
        return float(total.detach()), g

    full, g_full = value_and_grad([slice(0, 5)])
    bounds = [0, *sorted(cuts), 5]
    micro, g_micro = value_and_grad([slice(a, b) for a, b in itertools.pairwise(bounds)])
    assert micro == pytest.approx(full, abs=1e-12)
    torch.testing.assert_close(g_micro, g_full)


# ----------------------------------------------------------------------------- behaviour correction

# w = exp(old - sampling) = [0.5, 1, 1.5, 3] on sampled tokens; a masked garbage token
BC_SAMPLING = t([[-1.0, -2.0, -0.5, -3.0, math.nan]])
BC_OLD = BC_SAMPLING + t([[math.log(0.5), 0.0, math.log(1.5), math.log(3.0), math.inf]])
BC_MASK = t([[1, 1, 1, 1, 0]])
# std of log w = [ln .5, 0, ln 1.5, ln 3] (Bessel), the same in every mode
BC_LOG_STD = statistics.stdev([math.log(0.5), 0.0, math.log(1.5), math.log(3.0)])


@pytest.mark.parametrize(
    ("mode", "weights", "clipfrac"),
    [
        # threshold C = 2:
        ("none", [1.0, 1.0, 1.0, 1.0], 0.0),  # no correction
        ("tis", [0.5, 1.0, 1.5, 2.0], 0.25),  # min(w, 2): 3 -> 2
        ("mask", [0.5, 1.0, 1.5, 0.0], 0.25),  # w · 1[w <= 2]: 3 -> 0, the rest keep w
    ],
)
def test_behaviour_correction_modes(
    mode: BehaviourMode, weights: list[float], clipfrac: float
) -> None:
    weight, metrics = behaviour_correction(BC_OLD, BC_SAMPLING, BC_MASK, mode=mode)
    torch.testing.assert_close(weight, t([[*weights, 0.0]]))
    assert metrics["loss/is_weight_mean"] == pytest.approx(sum(weights) / 4)
    assert metrics["loss/is_weight_max"] == pytest.approx(max(weights))
    assert metrics["loss/is_clipfrac"] == pytest.approx(clipfrac)
    assert metrics["loss/is_logratio_std"] == pytest.approx(BC_LOG_STD)
    assert not weight.requires_grad


def test_behaviour_correction_threshold_clamp_and_errors() -> None:
    # log w = 50 is clamped to 20: tis -> min(e^20, 10) = 10; threshold 4: w = 3 is kept
    weight, _ = behaviour_correction(
        t([[50.0, math.log(3)]]), t([[0.0, 0.0]]), t([[1, 1]]), mode="tis", threshold=10.0
    )
    torch.testing.assert_close(weight, t([[10.0, 3.0]]))
    weight, _ = behaviour_correction(BC_OLD, BC_SAMPLING, BC_MASK, mode="mask", threshold=4.0)
    torch.testing.assert_close(weight, t([[0.5, 1.0, 1.5, 3.0, 0.0]]))
    bad_mode: Any = "clip"
    with pytest.raises(ValueError, match="mode"):
        behaviour_correction(BC_OLD, BC_SAMPLING, BC_MASK, mode=bad_mode)
    with pytest.raises(ValueError, match="threshold"):
        behaviour_correction(BC_OLD, BC_SAMPLING, BC_MASK, mode="tis", threshold=0.0)


@FAST
@given(seed=st.integers(0, 2**16), mode=st.sampled_from(["none", "tis", "mask"]))
def test_behaviour_correction_bounds_and_masking(seed: int, mode: BehaviourMode) -> None:
    logp, old, _, mask = random_batch(seed)
    weight, metrics = behaviour_correction(old, logp, mask, mode=mode, threshold=1.2)
    off = ~mask.bool()
    assert torch.all(weight[off] == 0)
    assert torch.all(weight <= (1.0 if mode == "none" else 1.2))
    garbled = [torch.where(off, torch.full_like(x, math.nan), x) for x in (old, logp)]
    same, same_metrics = behaviour_correction(*garbled, mask, mode=mode, threshold=1.2)
    torch.testing.assert_close(same, weight)
    assert same_metrics == pytest.approx(metrics)


# ----------------------------------------------------------------------------- KL reward penalty


def test_kl_token_penalty_reference_values() -> None:
    # logp - logq = [0.5, -1]; k1 = [0.5, -1] -> -0.1 · k1 = [-0.05, 0.1]
    # k3 = e^u - u - 1 with u = logq - logp = [-0.5, 1]: [e^-.5 - .5, e - 2] -> × -0.1
    logp = t([[-1.0, -2.0, math.nan]]).requires_grad_()
    ref, mask = t([[-1.5, -1.0, 0.0]]), t([[1, 1, 0]])
    out = kl_token_penalty(logp, ref, mask, estimator="k1", coef=0.1)
    torch.testing.assert_close(out, t([[-0.05, 0.1, 0.0]]))
    assert not out.requires_grad  # a reward carries no gradient
    out = kl_token_penalty(logp, ref, mask, estimator="k3", coef=0.1)
    torch.testing.assert_close(out, t([[-0.1 * (math.exp(-0.5) - 0.5), -0.1 * (math.e - 2), 0.0]]))
    with pytest.raises(UnknownNameError, match="k3"):
        kl_token_penalty(logp, ref, mask, estimator="k4", coef=0.1)
    with pytest.raises(ValueError, match="coef"):
        kl_token_penalty(logp, ref, mask, estimator="k1", coef=-1.0)


# ----------------------------------------------------------------------------- adaptive KL


def test_adaptive_kl_reference_values() -> None:
    # coef 0.1, target 6, horizon 10000, n_steps 256 (n/h = 0.0256):
    #   KL 9:   e = clip(0.5)  = 0.2  -> 0.1 · (1 + 0.2 · 0.0256) = 0.100512
    #   KL 6.6: e = 0.1              -> 0.1 · (1 + 0.1 · 0.0256) = 0.100256
    #   KL 3:   e = clip(-0.5) = -0.2 -> 0.1 · (1 - 0.2 · 0.0256) = 0.099488
    #   KL 6:   e = 0                -> unchanged
    for kl, expected in [(9.0, 0.100512), (6.6, 0.100256), (3.0, 0.099488), (6.0, 0.1)]:
        ctl = AdaptiveKLController(coef=0.1, target=6.0, horizon=10000)
        assert ctl.update(kl, n_steps=256) == pytest.approx(expected)
        assert ctl.coef == pytest.approx(expected)  # the state is the coefficient
    with pytest.raises(ValueError, match="target"):
        AdaptiveKLController(coef=0.1, target=0.0)
    with pytest.raises(ValueError, match="n_steps"):
        AdaptiveKLController(coef=0.1, target=1.0).update(1.0, n_steps=-1)


@FAST
@given(
    kl=st.floats(0, 100),
    target=st.floats(0.01, 10),
    n_steps=st.integers(1, 1000),
    coef=st.floats(1e-4, 1.0),
)
def test_adaptive_kl_moves_towards_target_within_the_clip(
    kl: float, target: float, n_steps: int, coef: float
) -> None:
    ctl = AdaptiveKLController(coef=coef, target=target, horizon=1000)
    new = ctl.update(kl, n_steps)
    step = 0.2 * n_steps / 1000
    assert coef * (1 - step) - 1e-15 <= new <= coef * (1 + step) + 1e-15
    if kl > target * 1.000001:
        assert new > coef
    elif kl < target * 0.999999:
        assert new < coef
