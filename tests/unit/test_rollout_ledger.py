"""The token ledger's invariants (docs/design.md) on real multi-turn rollouts.

Episodes of ``frozenlake-v0`` (multi-turn) and ``arithmetic-v0`` (one turn) are played by the
tiny model through ``Runner`` + ``HFEngine``, with and without KV-cache reuse, with a random
model (turns almost always end by length) and a briefly SFT-trained one (turns mostly end
with EOS; sampled at T=0.7, top-p 0.9). Each invariant is checked on every case:

1. decoding ``token_ids`` reproduces the transcript;
2. ``loss_mask`` covers exactly the sampled tokens;
3. a fresh forward pass reproduces the recorded log-probs (fp32 CPU, |Δ| < 1e-4);
4. the concatenated deltas equal the template's tokens for the whole conversation.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import pytest
import torch

from turnrl import envs
from turnrl.models.chat import encode, ledger_from_messages, render
from turnrl.models.policy import token_logprobs
from turnrl.rollout.engine import SamplingParams
from turnrl.rollout.hf import HFEngine
from turnrl.rollout.runner import Runner
from turnrl.train.layout import layout
from turnrl.types import Trajectory

SEEDS = [0, 1, 2]
GROUP_SIZE = 2
MAX_NEW_TOKENS = 6


@dataclass(frozen=True)
class Case:
    model: str  # "random" | "sft"
    env_id: str
    reuse_kv: bool
    temperature: float = 1.0
    top_p: float = 1.0
    max_context_tokens: int = 4096

    @property
    def id(self) -> str:
        kv = "reuse" if self.reuse_kv else "prefill"
        extra = f"-ctx{self.max_context_tokens}" if self.max_context_tokens != 4096 else ""
        return f"{self.env_id}-{self.model}-{kv}{extra}"


CASES = [
    Case(model, env_id, reuse, *((0.7, 0.9) if model == "sft" else (1.0, 1.0)))
    for env_id in ("frozenlake-v0", "arithmetic-v0")
    for model in ("random", "sft")
    for reuse in (True, False)
] + [
    # the prompt grows past the budget after a few turns: truncated by context overflow
    Case("random", "frozenlake-v0", True, max_context_tokens=300),
]


@dataclass
class Rollout:
    case: Case
    trajectories: list[Trajectory]
    engine: HFEngine
    model: torch.nn.Module


def play(case: Case, model: torch.nn.Module, tokenizer, *, seed: int = 0) -> Rollout:
    engine = HFEngine(model, eos_token_id=tokenizer.eos_token_id,
                      pad_token_id=tokenizer.pad_token_id, seed=seed, reuse_kv=case.reuse_kv)
    params = SamplingParams(max_new_tokens=MAX_NEW_TOKENS, temperature=case.temperature,
                            top_p=case.top_p)
    runner = Runner(engine, tokenizer, params, max_context_tokens=case.max_context_tokens)
    trajectories = runner.collect(functools.partial(envs.make, case.env_id), SEEDS, GROUP_SIZE)
    return Rollout(case, trajectories, engine, model)


@pytest.fixture(scope="module")
def models(load_tiny, load_sft) -> dict[str, torch.nn.Module]:
    return {"random": load_tiny().eval(), "sft": load_sft().eval()}


@pytest.fixture(scope="module")
def rollouts(models, tokenizer) -> dict[Case, Rollout]:
    return {}


@pytest.fixture(params=CASES, ids=[c.id for c in CASES])
def rollout(request, rollouts, models, tokenizer) -> Rollout:
    case: Case = request.param
    if case not in rollouts:
        rollouts[case] = play(case, models[case.model], tokenizer)
    return rollouts[case]


def overflowed(traj: Trajectory) -> bool:
    assert traj.counts is not None
    return bool(traj.counts.context_overflow)


def turn_runs(traj: Trajectory) -> dict[int, list[int]]:
    """Sampled token ids of each turn."""
    runs: dict[int, list[int]] = {}
    for token, mask, turn in zip(traj.token_ids, traj.loss_mask, traj.turn_index, strict=True):
        if mask:
            runs.setdefault(turn, []).append(token)
    return runs


# ------------------------------------------------------------------ invariant 1: transcript
def test_decoding_token_ids_reproduces_the_transcript(rollout: Rollout, tokenizer) -> None:
    for traj in rollout.trajectories:
        text = tokenizer.decode(traj.token_ids, skip_special_tokens=False)
        transcript = render(tokenizer, traj.messages, add_generation_prompt=False)
        if overflowed(traj):
            # the episode was cut before the agent's next turn; its ledger may still end
            # with that turn's generation prompt (tokens that are never trained on)
            assert text in (transcript,
                            render(tokenizer, traj.messages, add_generation_prompt=True))
        else:
            assert text == transcript


def test_ledger_lists_are_aligned_and_turns_ordered(rollout: Rollout) -> None:
    for traj in rollout.trajectories:
        n = len(traj.token_ids)
        assert len(traj.loss_mask) == len(traj.logprobs) == len(traj.turn_index) == n
        prompt = traj.turn_index.index(0) if 0 in traj.turn_index else n
        assert prompt > 0 and all(t == -1 for t in traj.turn_index[:prompt])
        assert all(a <= b for a, b in zip(traj.turn_index, traj.turn_index[1:], strict=False))
        assistant = [m for m in traj.messages if m["role"] == "assistant"]
        assert len(traj.turn_rewards) == len(assistant) == traj.num_turns
        assert sorted(turn_runs(traj)) == list(range(traj.num_turns))
        for lp, mask in zip(traj.logprobs, traj.loss_mask, strict=True):
            assert (lp <= 0.0) if mask else (lp == 0.0)
        assert traj.terminated != traj.truncated  # every episode ends one way or the other


# ------------------------------------------------------------------ invariant 2: loss mask
def test_loss_mask_covers_exactly_the_sampled_tokens(rollout: Rollout, tokenizer) -> None:
    eos = tokenizer.eos_token_id
    total_sampled = 0
    for traj in rollout.trajectories:
        runs = turn_runs(traj)
        contents = [m["content"] for m in traj.messages if m["role"] == "assistant"]
        length_finishes = 0
        for turn, content in enumerate(contents):
            sampled = runs[turn]
            # one contiguous run per turn, right after the turn's generation prompt
            positions = [i for i, (m, t) in
                         enumerate(zip(traj.loss_mask, traj.turn_index, strict=True))
                         if m and t == turn]
            assert positions == list(range(positions[0], positions[0] + len(sampled)))
            assert 1 <= len(sampled) <= MAX_NEW_TOKENS
            stopped = sampled[-1] == eos
            length_finishes += not stopped
            assert eos not in sampled[:-1]
            expected = content + (tokenizer.eos_token if stopped else "")
            assert tokenizer.decode(sampled, skip_special_tokens=False) == expected
        assert traj.counts is not None and length_finishes == traj.counts.length_finishes
        total_sampled += traj.num_sampled_tokens
    # ... and nothing else: the engine produced exactly the masked tokens
    assert total_sampled == rollout.engine.stats["decode_tokens"]


# ------------------------------------------------------------------ invariant 3: log-probs
def test_fresh_forward_reproduces_recorded_logprobs(rollout: Rollout, tokenizer) -> None:
    batch = layout(rollout.trajectories, tokenizer.pad_token_id)
    with torch.no_grad():
        fresh, _ = token_logprobs(rollout.model, batch.input_ids, batch.attention_mask,
                                  temperature=rollout.case.temperature)
    mask = batch.loss_mask.bool()
    assert int(mask.sum()) > 0
    assert (fresh[mask] - batch.logprobs[mask]).abs().max().item() < 1e-4
    assert torch.all(batch.logprobs[~mask] == 0.0)


# ------------------------------------------------------------------ invariant 4: deltas
def test_whole_conversation_template_equals_concatenated_deltas(rollout: Rollout,
                                                                tokenizer) -> None:
    eos = tokenizer.eos_token_id
    for traj in rollout.trajectories:
        whole = ledger_from_messages(tokenizer, traj.messages)
        n = len(whole.token_ids)
        if overflowed(traj):  # see test_decoding_token_ids_reproduces_the_transcript
            tail = traj.token_ids[n:]
            assert tail in ([], encode(tokenizer, "<|im_start|>assistant\n"))
        else:
            assert n == len(traj.token_ids)
        assert whole.token_ids == traj.token_ids[:n]
        assert whole.turn_index == traj.turn_index[:n]
        # ledger_from_messages treats every assistant turn as ending with a sampled EOS;
        # a turn cut by max_new_tokens got that EOS from the template instead (mask 0)
        pairs = zip(whole.loss_mask, traj.loss_mask[:n], strict=True)
        differ = [i for i, (a, b) in enumerate(pairs) if a != b]
        assert all(whole.loss_mask[i] == 1 and traj.loss_mask[i] == 0 for i in differ)
        assert all(traj.token_ids[i] == eos for i in differ)
        assert traj.counts is not None and len(differ) == traj.counts.length_finishes


def test_sft_cases_cover_turns_that_end_with_eos(rollouts, models, tokenizer) -> None:
    """Guard for the tests above: the EOS branch of every invariant is exercised, also in the
    middle of multi-turn episodes (an observation delta right after a sampled EOS)."""
    for case in CASES:
        if case.model != "sft":
            continue
        if case not in rollouts:
            rollouts[case] = play(case, models[case.model], tokenizer)
        trajectories = rollouts[case].trajectories
        turns = sum(t.num_turns for t in trajectories)
        finishes = [t.counts.length_finishes if t.counts else 0 for t in trajectories]
        assert all(t.counts is not None for t in trajectories)
        stopped = turns - sum(finishes)
        assert stopped >= turns / 4, case.id
        if case.env_id == "frozenlake-v0":
            assert any(t.num_turns - f >= 2 for t, f in zip(trajectories, finishes, strict=True))


def test_context_overflow_truncates_the_episode(rollouts, models, tokenizer) -> None:
    case = CASES[-1]
    if case not in rollouts:
        rollouts[case] = play(case, models[case.model], tokenizer)
    for traj in rollouts[case].trajectories:
        assert overflowed(traj) and traj.truncated and not traj.terminated
        assert 0 < traj.num_turns < envs.spec(case.env_id).max_turns
        # the next prompt (the transcript plus a generation prompt) and a full turn would
        # not have fit
        next_prompt = encode(tokenizer, render(tokenizer, traj.messages,
                                               add_generation_prompt=True))
        assert len(next_prompt) + MAX_NEW_TOKENS > case.max_context_tokens


def test_overflow_truncated_ledger_decodes_to_the_transcript(rollouts, models,
                                                             tokenizer) -> None:
    case = CASES[-1]
    if case not in rollouts:
        rollouts[case] = play(case, models[case.model], tokenizer)
    for traj in rollouts[case].trajectories:
        assert tokenizer.decode(traj.token_ids, skip_special_tokens=False) == render(
            tokenizer, traj.messages, add_generation_prompt=False)
        assert traj.token_ids == ledger_from_messages(tokenizer, traj.messages).token_ids


# ------------------------------------------------------------------ determinism
@pytest.mark.parametrize("case", [c for c in CASES if c.reuse_kv and c.max_context_tokens == 4096],
                         ids=lambda c: c.id)
def test_same_engine_seed_gives_identical_trajectories(case: Case, rollouts, models,
                                                       tokenizer) -> None:
    if case not in rollouts:
        rollouts[case] = play(case, models[case.model], tokenizer)
    first = rollouts[case].trajectories
    again = play(case, models[case.model], tokenizer, seed=0).trajectories
    assert [t.to_dict() for t in again] == [t.to_dict() for t in first]
    if case.model == "random":  # a near-uniform policy: another seed samples other tokens
        other = play(case, models[case.model], tokenizer, seed=1).trajectories
        assert [t.token_ids for t in other] != [t.token_ids for t in first]


@pytest.mark.parametrize("case", [c for c in CASES if c.reuse_kv and c.max_context_tokens == 4096],
                         ids=lambda c: c.id)
def test_kv_reuse_samples_the_same_trajectories_as_full_prefill(case: Case, rollouts, models,
                                                                tokenizer) -> None:
    """Same engine seed, same distribution: the same tokens (log-probs equal up to fp32
    noise). Reuse only skips re-encoding the conversation so far."""
    full = Case(case.model, case.env_id, False, case.temperature, case.top_p)
    for c in (case, full):
        if c not in rollouts:
            rollouts[c] = play(c, models[c.model], tokenizer)
    reused, prefilled = rollouts[case], rollouts[full]
    for a, b in zip(reused.trajectories, prefilled.trajectories, strict=True):
        assert a.token_ids == b.token_ids
        assert a.loss_mask == b.loss_mask and a.turn_index == b.turn_index
        assert a.turn_rewards == b.turn_rewards and a.messages == b.messages
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)) < 1e-5
    assert reused.engine.stats["decode_tokens"] == prefilled.engine.stats["decode_tokens"]
    if case.env_id == "frozenlake-v0":  # multi-turn: later turns prefill only the delta
        assert reused.engine.stats["prefill_tokens"] < prefilled.engine.stats["prefill_tokens"]
    assert not reused.engine._sessions  # the runner ended every episode's session
