"""HFEngine: stopping, greedy decoding, top-p, continuous batching with padding, per-request
seeds, KV sessions."""

from __future__ import annotations

import asyncio

import pytest
import torch

from turnrl.models.chat import encode, render
from turnrl.rollout.engine import Completion, Engine, SamplingParams
from turnrl.rollout.hf import GrowingLayer, HFEngine, _Request, sample_rows, sample_tokens
from turnrl.rollout.hf_sampling import UNIFORM_BLOCK, _Row

GREEDY = SamplingParams(max_new_tokens=8, temperature=0.0)


def make_engine(model, tokenizer, **kwargs) -> HFEngine:
    return HFEngine(model, eos_token_id=tokenizer.eos_token_id,
                    pad_token_id=tokenizer.pad_token_id, **kwargs)


@pytest.fixture(scope="module")
def random_model(load_tiny):
    return load_tiny().eval()


@pytest.fixture(scope="module")
def sft_model(load_sft):
    return load_sft().eval()


@pytest.fixture(scope="module")
def prompts(tokenizer) -> list[list[int]]:
    """Prompts of different lengths (1 to ~60 tokens), as the runner would send them."""
    chats = [[{"role": "user", "content": "12+30="}],
             [{"role": "system", "content": "Reach G and avoid H."},
              {"role": "user", "content": "A..\n.H.\n..G"}]]
    return [encode(tokenizer, render(tokenizer, c, add_generation_prompt=True)) for c in chats] \
        + [encode(tokenizer, "x"), encode(tokenizer, "hello there, general")]


def test_hf_engine_satisfies_the_engine_protocol(random_model, tokenizer) -> None:
    assert isinstance(make_engine(random_model, tokenizer), Engine)


def test_generation_stops_at_eos(sft_model, tokenizer, prompts) -> None:
    engine = make_engine(sft_model, tokenizer)
    completion = engine.generate_batch([prompts[0]], GREEDY)[0]
    assert completion.finish_reason == "stop"
    assert completion.token_ids[-1] == tokenizer.eos_token_id
    assert tokenizer.eos_token_id not in completion.token_ids[:-1]
    assert len(completion.token_ids) < GREEDY.max_new_tokens
    assert len(completion.logprobs) == len(completion.token_ids)
    answer = tokenizer.decode(completion.token_ids[:-1])
    assert answer.isdigit()  # the SFT model answers arithmetic prompts with a number


def test_generation_stops_at_max_new_tokens(random_model, tokenizer, prompts) -> None:
    engine = make_engine(random_model, tokenizer)
    for n in (1, 5):
        params = SamplingParams(max_new_tokens=n, temperature=0.0)
        for completion in engine.generate_batch(prompts, params):
            assert completion.finish_reason == "length"
            assert len(completion.token_ids) == len(completion.logprobs) == n


def test_extra_stop_token_ids_also_stop(random_model, tokenizer, prompts) -> None:
    engine = make_engine(random_model, tokenizer)
    free = engine.generate_batch([prompts[1]], GREEDY)[0]
    stop_at = free.token_ids[2]
    first = free.token_ids.index(stop_at)
    params = SamplingParams(max_new_tokens=8, temperature=0.0, stop_token_ids=(stop_at,))
    stopped = engine.generate_batch([prompts[1]], params)[0]
    assert stopped.finish_reason == "stop"
    assert stopped.token_ids == free.token_ids[: first + 1]


def test_greedy_is_deterministic_and_equals_argmax_of_a_fresh_forward(random_model, tokenizer,
                                                                      prompts) -> None:
    a = make_engine(random_model, tokenizer, seed=0).generate_batch(prompts, GREEDY)
    b = make_engine(random_model, tokenizer, seed=123).generate_batch(prompts, GREEDY)
    assert [c.token_ids for c in a] == [c.token_ids for c in b]
    for prompt, completion in zip(prompts, a, strict=True):
        ids = torch.tensor([prompt + completion.token_ids])
        with torch.no_grad():
            logits = random_model(ids).logits[0, len(prompt) - 1:-1]
        assert logits.argmax(-1).tolist() == completion.token_ids
        expected = torch.log_softmax(logits, -1).max(-1).values
        assert torch.allclose(torch.tensor(completion.logprobs), expected, atol=1e-5)


def test_batched_generation_matches_one_by_one(random_model, tokenizer, prompts) -> None:
    """Left padding and position ids: a prompt's tokens do not depend on its batch mates."""
    engine = make_engine(random_model, tokenizer)
    batched = engine.generate_batch(prompts, GREEDY)
    for prompt, together in zip(prompts, batched, strict=True):
        alone = engine.generate_batch([prompt], GREEDY)[0]
        assert alone.token_ids == together.token_ids
        assert alone.finish_reason == together.finish_reason
        gaps = [abs(x - y) for x, y in zip(alone.logprobs, together.logprobs, strict=True)]
        assert max(gaps) < 1e-5


def test_batched_rows_that_stop_early_keep_only_their_tokens(sft_model, tokenizer,
                                                             prompts) -> None:
    engine = make_engine(sft_model, tokenizer)
    params = SamplingParams(max_new_tokens=4, temperature=0.0)
    batched = engine.generate_batch(prompts, params)
    reasons = {c.finish_reason for c in batched}
    assert reasons == {"stop", "length"}  # a mixed batch: rows finish at different steps
    for prompt, together in zip(prompts, batched, strict=True):
        alone = engine.generate_batch([prompt], params)[0]
        assert alone.token_ids == together.token_ids
        assert alone.finish_reason == together.finish_reason


def test_sample_tokens_with_tiny_top_p_always_picks_the_argmax() -> None:
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(256, 50, generator=generator)
    params = SamplingParams(temperature=1.0, top_p=1e-6)
    tokens, logprobs = sample_tokens(logits, params, generator)
    assert torch.equal(tokens, logits.argmax(-1))
    # recorded log-probs are those of the untruncated distribution
    assert torch.allclose(logprobs, torch.log_softmax(logits, -1).max(-1).values)


def test_sample_tokens_frequencies_follow_temperature_and_top_p() -> None:
    probs = torch.tensor([0.4, 0.35, 0.25])
    logits = probs.log().repeat(20_000, 1)
    generator = torch.Generator().manual_seed(0)

    def freqs(params: SamplingParams) -> torch.Tensor:
        tokens, _ = sample_tokens(logits, params, generator)
        return torch.bincount(tokens, minlength=3).float() / len(tokens)

    assert torch.allclose(freqs(SamplingParams(temperature=1.0)), probs, atol=0.015)
    # top-p 0.5 keeps the smallest prefix whose mass exceeds 0.5: {0.4, 0.35}, renormalised
    kept = torch.tensor([0.4, 0.35, 0.0]) / 0.75
    assert torch.allclose(freqs(SamplingParams(temperature=1.0, top_p=0.5)), kept, atol=0.015)
    # temperature 0.5 squares the odds: p_i ∝ p_i²
    sharp = probs**2 / (probs**2).sum()
    tokens, logprobs = sample_tokens(logits[:1], SamplingParams(temperature=0.5), generator)
    assert torch.allclose(logprobs.exp(), sharp[tokens], atol=1e-6)
    assert torch.allclose(freqs(SamplingParams(temperature=0.5)), sharp, atol=0.015)


def test_async_generate_batches_concurrent_requests(random_model, tokenizer, prompts) -> None:
    engine = make_engine(random_model, tokenizer)

    async def run() -> list[Completion]:
        return list(await asyncio.gather(*(engine.generate(p, GREEDY) for p in prompts)))

    completions = asyncio.run(run())
    assert engine.stats["prefills"] == 1 and engine.stats["requests"] == len(prompts)
    expected = make_engine(random_model, tokenizer).generate_batch(prompts, GREEDY)
    assert [c.token_ids for c in completions] == [c.token_ids for c in expected]


def test_max_batch_size_splits_the_requests(random_model, tokenizer, prompts) -> None:
    engine = make_engine(random_model, tokenizer, max_batch_size=2)

    async def run() -> list[Completion]:
        return list(await asyncio.gather(*(engine.generate(p, GREEDY) for p in prompts)))

    completions = asyncio.run(run())
    assert engine.stats["max_running"] == 2 and engine.stats["prefills"] >= 2
    expected = make_engine(random_model, tokenizer).generate_batch(prompts, GREEDY)
    assert [c.token_ids for c in completions] == [c.token_ids for c in expected]


def test_kv_session_is_reused_then_dropped_by_end_session(random_model, tokenizer,
                                                          prompts) -> None:
    engine = make_engine(random_model, tokenizer, reuse_kv=True)
    reference = make_engine(random_model, tokenizer, reuse_kv=False)
    first = engine.generate_batch([prompts[1]], GREEDY, sessions=["a"])[0]
    assert "a" in engine._sessions
    follow_up = prompts[1] + first.token_ids + encode(tokenizer, "<|im_end|>\n<|im_start|>user\nok")
    before = engine.stats["prefill_tokens"]
    # a cached session next to an uncached one in the same batch
    second = engine.generate_batch([follow_up, prompts[2]], GREEDY, sessions=["a", "b"])
    prefilled = engine.stats["prefill_tokens"] - before
    assert prefilled == len(follow_up) - len(prompts[1]) - (len(first.token_ids) - 1) \
        + len(prompts[2])  # only the new tokens of "a" (its last sampled token was never fed)
    expected = reference.generate_batch([follow_up, prompts[2]], GREEDY)
    for got, want in zip(second, expected, strict=True):
        assert got.token_ids == want.token_ids
        assert max(abs(x - y) for x, y in zip(got.logprobs, want.logprobs, strict=True)) < 1e-5
    engine.end_session("a")
    assert "a" not in engine._sessions and "b" in engine._sessions
    engine.end_session("never-started")  # unknown sessions are ignored
    before = engine.stats["prefill_tokens"]
    engine.generate_batch([follow_up], GREEDY, sessions=["a"])
    assert engine.stats["prefill_tokens"] - before == len(follow_up)  # full prefill again


def test_a_prompt_that_is_not_an_extension_of_the_session_is_prefilled(random_model, tokenizer,
                                                                       prompts) -> None:
    engine = make_engine(random_model, tokenizer, reuse_kv=True)
    engine.generate_batch([prompts[1]], GREEDY, sessions=["a"])
    before = engine.stats["prefill_tokens"]
    got = engine.generate_batch([prompts[3]], GREEDY, sessions=["a"])[0]
    assert engine.stats["prefill_tokens"] - before == len(prompts[3])
    assert got.token_ids == engine.generate_batch([prompts[3]], GREEDY)[0].token_ids


def test_load_weights_drops_sessions_and_copies_new_weights(random_model, sft_model, load_tiny,
                                                            tokenizer, prompts) -> None:
    engine = make_engine(load_tiny().eval(), tokenizer, reuse_kv=True)
    engine.generate_batch([prompts[0]], GREEDY, sessions=["a"])
    assert engine._sessions
    engine.load_weights(engine.model)  # shared in-process: a no-op that still drops caches
    assert not engine._sessions
    engine.generate_batch([prompts[0]], GREEDY, sessions=["a"])
    engine.load_weights(sft_model)
    assert not engine._sessions
    want = make_engine(sft_model, tokenizer).generate_batch(prompts, GREEDY)
    got = engine.generate_batch(prompts, GREEDY)
    assert [c.token_ids for c in got] == [c.token_ids for c in want]
    assert [c.token_ids for c in got] != [
        c.token_ids for c in make_engine(random_model, tokenizer).generate_batch(prompts, GREEDY)]


def test_generate_batch_restores_the_training_mode(random_model, tokenizer, prompts) -> None:
    engine = make_engine(random_model, tokenizer)
    random_model.train()
    try:
        engine.generate_batch(prompts[:1], GREEDY)
        assert random_model.training
    finally:
        random_model.eval()


def full_forward_logprobs(model, prompt: list[int], completion: Completion,
                          temperature: float) -> torch.Tensor:
    """log_softmax(logits / T) of each sampled token, from one forward pass of the sequence."""
    ids = torch.tensor([prompt + completion.token_ids])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1:-1].float()
    logp = torch.log_softmax(logits / (temperature or 1.0), -1)
    return logp.gather(-1, torch.tensor(completion.token_ids)[:, None])[:, 0]


MIXED = [SamplingParams(max_new_tokens=7, temperature=1.0, seed=11),
         SamplingParams(max_new_tokens=3, temperature=0.7, seed=12),
         SamplingParams(max_new_tokens=8, temperature=1.0, top_p=0.9, seed=13),
         SamplingParams(max_new_tokens=5, temperature=0.0, seed=14)]


def test_seeded_requests_sample_the_same_tokens_alone_or_in_a_mixed_batch(random_model, tokenizer,
                                                                          prompts) -> None:
    """Per-request generators: a request's samples do not depend on its batch mates, and the
    recorded log-probs equal those of a full forward pass at the request's temperature."""
    engine = make_engine(random_model, tokenizer)
    together = engine.generate_batch(prompts, MIXED)
    lengths = [len(c.token_ids) for c in together]
    assert len(set(lengths)) > 1  # rows leave the batch at different steps
    assert all(n <= p.max_new_tokens for n, p in zip(lengths, MIXED, strict=True))
    for prompt, params, got in zip(prompts, MIXED, together, strict=True):
        alone = make_engine(random_model, tokenizer, seed=99).generate_batch([prompt], params)[0]
        assert alone.token_ids == got.token_ids
        assert max(abs(x - y) for x, y in zip(alone.logprobs, got.logprobs, strict=True)) < 1e-5
        want = full_forward_logprobs(random_model, prompt, got, params.temperature)
        assert torch.allclose(torch.tensor(got.logprobs), want, atol=1e-5)
    # the seed matters: another seed gives other samples
    other = engine.generate_batch(prompts[:1], SamplingParams(max_new_tokens=7, seed=12345))[0]
    assert other.token_ids != together[0].token_ids


def test_a_rows_uniforms_are_its_generators_draws_in_order_across_blocks() -> None:
    """Rows draw their uniforms a block at a time: the numbers and their order are those of
    one ``torch.rand`` call per token from the same seed, past a block boundary too."""
    row = _Row(_Request([1], SamplingParams(), None), torch.Generator().manual_seed(7),
               frozenset())
    got = [row.next_uniform() for _ in range(2 * UNIFORM_BLOCK + 5)]
    reference = torch.Generator().manual_seed(7)
    want = [torch.rand((), generator=reference).item() for _ in range(len(got))]
    assert got == want


def test_a_long_completion_samples_as_a_per_token_draw_would(random_model, tokenizer,
                                                             prompts) -> None:
    """A completion longer than a block of uniforms samples the tokens that inverting each
    step's CDF at a per-token ``torch.rand`` draw of the request's seed gives."""
    params = SamplingParams(max_new_tokens=150, temperature=1.0, seed=21)
    got = HFEngine(random_model, eos_token_id=-1, pad_token_id=tokenizer.pad_token_id
                   ).generate_batch([prompts[0]], params)[0]
    assert len(got.token_ids) == 150
    generator = torch.Generator().manual_seed(21)
    ids = list(prompts[0])
    with torch.no_grad():
        for token in got.token_ids:
            logits = random_model(input_ids=torch.tensor([ids])).logits[0, -1].float()
            cdf = torch.softmax(logits, -1).cumsum(-1)
            u = torch.rand((), generator=generator)
            want = int(torch.searchsorted(cdf, (u * cdf[-1]).view(1), right=True)[0])
            assert token == min(want, logits.shape[-1] - 1)
            ids.append(token)


def test_a_groups_shared_prompt_is_prefilled_once(random_model, tokenizer, prompts) -> None:
    """Requests with the same prompt (a group's first turn) share one prefill row; each still
    samples with its own generator, as it would alone, and the log-probs stay exact."""
    engine = make_engine(random_model, tokenizer)
    batch = [prompts[1]] * 3 + [prompts[0]] * 2 + [prompts[1]]
    params = [SamplingParams(max_new_tokens=6, temperature=1.0, seed=s) for s in range(6)]
    together = engine.generate_batch(batch, params)
    assert engine.stats["prefills"] == 1 and engine.stats["requests"] == 6
    assert engine.stats["prefill_tokens"] == len(prompts[1]) + len(prompts[0])
    assert len({tuple(c.token_ids) for c in together}) > 2  # the seeds differ, so do samples
    for prompt, param, got in zip(batch, params, together, strict=True):
        alone = make_engine(random_model, tokenizer).generate_batch([prompt], param)[0]
        assert alone.token_ids == got.token_ids
        want = full_forward_logprobs(random_model, prompt, got, param.temperature)
        assert torch.allclose(torch.tensor(got.logprobs), want, atol=1e-5)


def test_unseeded_requests_are_reproducible_from_the_engine_seed(random_model, tokenizer,
                                                                 prompts) -> None:
    params = SamplingParams(max_new_tokens=6, temperature=1.0)
    a = make_engine(random_model, tokenizer, seed=5).generate_batch(prompts, params)
    b = make_engine(random_model, tokenizer, seed=5).generate_batch(prompts, params)
    c = make_engine(random_model, tokenizer, seed=6).generate_batch(prompts, params)
    assert [x.token_ids for x in a] == [x.token_ids for x in b]
    assert [x.token_ids for x in a] != [x.token_ids for x in c]


def test_continuous_batching_admits_a_request_while_others_decode(random_model, tokenizer,
                                                                  prompts) -> None:
    """An episode whose turn ends early sends its next request at once; it joins the running
    batch (merged into the KV cache with different lengths) instead of waiting for it."""
    engine = make_engine(random_model, tokenizer, reuse_kv=True)
    long = SamplingParams(max_new_tokens=12, temperature=1.0, seed=1)
    short = SamplingParams(max_new_tokens=2, temperature=1.0, seed=2)
    follow = SamplingParams(max_new_tokens=4, temperature=1.0, seed=3)
    events: list[str] = []

    async def long_episode() -> Completion:
        completion = await engine.generate(prompts[3], long, session="long")
        events.append("long done")
        return completion

    async def short_episode() -> tuple[Completion, Completion]:
        first = await engine.generate(prompts[1], short, session="short")
        events.append("short turn 1 done")
        second_prompt = prompts[1] + first.token_ids + prompts[2]
        second = await engine.generate(second_prompt, follow, session="short")
        events.append("short turn 2 done")
        return first, second

    async def run():
        return await asyncio.gather(long_episode(), short_episode())

    got_long, (first, second) = asyncio.run(run())
    assert events == ["short turn 1 done", "short turn 2 done", "long done"]
    assert engine.stats["prefills"] == 2 and engine.stats["max_running"] == 2
    assert engine.stats["decode_steps"] == long.max_new_tokens - 1  # never decoded alone
    # the second turn prefilled only its new tokens (session KV reuse inside the running batch)
    assert engine.stats["prefill_tokens"] == len(prompts[3]) + len(prompts[1]) \
        + 1 + len(prompts[2])  # the first turn's last sampled token was never fed
    reference = make_engine(random_model, tokenizer, reuse_kv=False)
    second_prompt = prompts[1] + first.token_ids + prompts[2]
    for prompt, params, got in [(prompts[3], long, got_long), (prompts[1], short, first),
                                (second_prompt, follow, second)]:
        alone = reference.generate_batch([prompt], params)[0]
        assert alone.token_ids == got.token_ids
        want = full_forward_logprobs(random_model, prompt, got, params.temperature)
        assert torch.allclose(torch.tensor(got.logprobs), want, atol=1e-5)
    assert engine._rows == [] and engine._cache is None  # the batch is empty again


def test_retiring_rows_drops_padding_columns(random_model, tokenizer, prompts) -> None:
    """When the longest row finishes, the columns that are padding in every remaining row go."""
    engine = make_engine(random_model, tokenizer)
    long_prompt, short_prompt = prompts[1], prompts[2]
    engine._pending.extend([
        _Request(long_prompt, SamplingParams(max_new_tokens=1, temperature=0.0), None),
        _Request(short_prompt, SamplingParams(max_new_tokens=4, temperature=0.0), None)])
    engine.step()  # admit both; the long one finishes at its first token
    assert [row.alive for row in engine._rows] == [False, True]  # kept until the next step
    engine.step()  # compacts the batch, then decodes
    assert len(engine._rows) == 1
    assert engine._mask.shape[1] == len(short_prompt) + 2  # its prompt and two fed tokens
    assert bool(engine._mask.all())


def test_sample_rows_mixes_greedy_and_sampled_rows() -> None:
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(4, 30, generator=generator)
    temperature = torch.tensor([0.0, 1.0, 0.5, 0.0])
    top_p = torch.tensor([1.0, 1.0, 1e-6, 0.5])
    uniform = torch.tensor([0.9, 0.0, 0.7, 0.1])
    tokens, logprobs = sample_rows(logits, temperature, top_p, uniform)
    argmax = logits.argmax(-1)
    assert tokens[0] == argmax[0] and tokens[3] == argmax[3]  # greedy ignores u and top-p
    assert tokens[2] == argmax[2]  # a tiny nucleus keeps only the argmax
    # u = 0 picks the first token with non-zero probability: token 0
    assert tokens[1] == 0
    expected = torch.stack([torch.log_softmax(logits[0], -1)[tokens[0]],
                            torch.log_softmax(logits[1], -1)[tokens[1]],
                            torch.log_softmax(logits[2] / 0.5, -1)[tokens[2]],
                            torch.log_softmax(logits[3], -1)[tokens[3]]])
    assert torch.allclose(logprobs, expected)


def test_growing_layer_appends_in_place_and_doubles_when_full() -> None:
    generator = torch.Generator().manual_seed(0)
    first = torch.randn(2, 1, 3, 4, generator=generator)
    layer = GrowingLayer()
    keys, values = layer.update(first, -first)
    assert torch.equal(keys, first) and torch.equal(values, -first)
    buffer = layer._keys
    assert buffer.shape[2] == 6  # room for as many again
    chunks = [first]
    for _ in range(3):  # 3 + 1 + 1 + 1 = 6: still the same buffer
        step = torch.randn(2, 1, 1, 4, generator=generator)
        chunks.append(step)
        keys, _ = layer.update(step, -step)
    assert layer._keys is buffer and keys.data_ptr() == buffer.data_ptr()
    step = torch.randn(2, 1, 2, 4, generator=generator)
    chunks.append(step)
    keys, values = layer.update(step, -step)  # 8 > 6: a new buffer, contents carried over
    assert layer._keys is not buffer and layer._keys.shape[2] >= 8
    assert torch.equal(keys, torch.cat(chunks, 2)) and torch.equal(values, -torch.cat(chunks, 2))
    assert layer.get_seq_length() == 8


def test_finished_rows_wait_in_the_batch_without_changing_the_others(random_model, tokenizer,
                                                                     prompts) -> None:
    """With six rows, one early finisher stays in the batch (below the compaction quarter):
    the live rows' logits are picked around it and every row equals its solo run."""
    engine = make_engine(random_model, tokenizer)
    six = [prompts[i % 4] + [7] * i for i in range(6)]
    params = [SamplingParams(max_new_tokens=2 if i == 3 else 6, temperature=1.0, seed=40 + i)
              for i in range(6)]
    for i, p in enumerate(params):
        engine._pending.append(_Request(six[i], p, None))
    requests = list(engine._pending)
    engine.step()  # admit all six
    engine.step()  # row 3 has its 2 tokens: finished, but 1 dead in 6 is not compacted
    assert len(engine._rows) == 6 and [r.alive for r in engine._rows].count(False) == 1
    while any(r.result is None for r in requests):
        engine.step()
    for prompt, p, request in zip(six, params, requests, strict=True):
        alone = make_engine(random_model, tokenizer).generate_batch([prompt], p)[0]
        assert request.result.token_ids == alone.token_ids
        gaps = [abs(a - b) for a, b in zip(request.result.logprobs, alone.logprobs, strict=True)]
        assert max(gaps) < 1e-5


@pytest.mark.parametrize("reuse_kv", [True, False])
def test_a_step_that_admits_rows_while_others_decode_is_one_pass(random_model, tokenizer,
                                                                 prompts, monkeypatch,
                                                                 reuse_kv) -> None:
    """Rows admitted while others decode are prefilled in the running batch's decoding pass
    (``DecodeStep`` with an extension): that step is one pass, and the requests sample what
    they sample with a prefill pass of their own (the transformers forward, forced by a zero
    ``FUSED_ATTENTION_LIMIT``), in the same steps."""
    import turnrl.rollout.hf as hf

    params = [SamplingParams(max_new_tokens=n, temperature=1.0, seed=n) for n in (9, 2, 5, 3)]

    def play(engine: HFEngine) -> list[Completion]:
        async def episode(prompt, first, then) -> list[Completion]:
            one = await engine.generate(prompt, first, session=str(first.seed))
            two = await engine.generate(prompt + one.token_ids + prompts[2], then,
                                        session=str(first.seed))
            return [one, two]

        async def run():
            return await asyncio.gather(episode(prompts[3], params[0], params[2]),
                                        episode(prompts[1], params[1], params[3]))
        return [c for pair in asyncio.run(run()) for c in pair]

    fused = make_engine(random_model, tokenizer, reuse_kv=reuse_kv)
    assert fused._decode is not None
    passes, forwards = [0], []
    call = type(fused._decode).__call__

    def counted(self, *args, **kwargs):
        passes[0] += 1
        return call(self, *args, **kwargs)

    monkeypatch.setattr(type(fused._decode), "__call__", counted)
    hook = random_model.register_forward_hook(lambda *_: forwards.append(1))
    try:
        got = play(fused)
    finally:
        hook.remove()
    # three prefills: both first turns (alone: a forward pass), the short episode's second
    # turn while the long one decodes (in its decoding pass), the long one's second turn alone
    assert fused.stats["prefills"] == 3 and len(forwards) == 2
    assert passes[0] == fused.stats["decode_steps"]
    forwards.clear()
    monkeypatch.setattr(hf, "FUSED_ATTENTION_LIMIT", 0)
    separate = make_engine(random_model, tokenizer, reuse_kv=reuse_kv)
    hook = random_model.register_forward_hook(lambda *_: forwards.append(1))
    try:
        want = play(separate)
    finally:
        hook.remove()
    assert len(forwards) == 3 and separate.stats == fused.stats  # a prefill pass each
    for a, b in zip(got, want, strict=True):
        assert a.token_ids == b.token_ids
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)) < 1e-5


@pytest.mark.parametrize("reuse_kv", [True, False])
def test_a_request_admitted_beside_a_finished_row_takes_its_place(random_model, tokenizer,
                                                                  prompts, reuse_kv) -> None:
    """A request that arrives after rows finished is written over one of them in the batch's
    own buffers (no rebuild of the others), the finished row's session copied out first and
    the rest of the row masked out: a narrower new request, the session's next turn (from
    its copied keys and values) and the row decoding beside them all sample what they sample
    alone."""
    engine = make_engine(random_model, tokenizer, reuse_kv=reuse_kv)
    long = SamplingParams(max_new_tokens=12, temperature=1.0, seed=1)
    short = SamplingParams(max_new_tokens=2, temperature=1.0, seed=2)
    wide = prompts[3] + prompts[0] * 4  # the batch is wider than "b"'s next turn
    first = [_Request(wide, long, "a"), _Request(prompts[1], short, "b"),
             _Request(prompts[3] + prompts[0], short, "c")]
    engine._pending.extend(first)
    engine.step()  # all admitted; "b" and "c" have their 2 tokens: finished, their rows wait
    assert [r.alive for r in engine._rows] == [True, False, False]
    buffer = engine._cache.layers[0]._keys
    again = _Request(prompts[1] + first[1].result.token_ids + prompts[2], short, "b")
    fresh = _Request(prompts[0], short, "d")  # narrower than "b", whose row it takes
    engine._pending.append(fresh)
    engine.step()
    engine._pending.append(again)
    engine.step()
    assert [r.request for r in engine._rows] == [first[0], fresh, again]
    assert engine._cache.layers[0]._keys is buffer  # written in place
    assert engine.stats["cached_tokens"] == (len(prompts[1]) + 1 if reuse_kv else 0)
    while any(r.result is None for r in [*first, again, fresh]):
        engine.step()
    for request in [*first, again, fresh]:
        alone = make_engine(random_model, tokenizer, reuse_kv=False).generate_batch(
            [request.prompt_ids], request.params)[0]
        assert request.result.token_ids == alone.token_ids
        gaps = [abs(a - b) for a, b in zip(request.result.logprobs, alone.logprobs, strict=True)]
        assert max(gaps) < 1e-5


def test_a_request_waiting_for_a_full_batch_takes_the_first_finished_row(random_model,
                                                                          tokenizer,
                                                                          prompts) -> None:
    """A finished row frees its slot at once: with ``max_batch_size=2`` the third request
    joins at the step after the short one finished, not once the long one is done too."""
    engine = make_engine(random_model, tokenizer, max_batch_size=2)
    wide = prompts[3] + prompts[0] * 4
    requests = [_Request(prompt, SamplingParams(max_new_tokens=n, temperature=1.0, seed=n), None)
                for prompt, n in [(wide, 12), (prompts[1], 2), (prompts[0], 3)]]
    engine._pending.extend(requests)
    engine.step()  # the first two admitted; the short one has its 2 tokens
    assert engine._pending == [requests[2]] and requests[1].result is not None
    engine.step()
    assert [r.request for r in engine._rows] == [requests[0], requests[2]]
    while any(r.result is None for r in requests):
        engine.step()
    assert len(requests[0].result.token_ids) == 12 and len(requests[2].result.token_ids) == 3


def test_a_failed_admission_fails_its_requests_instead_of_hanging(random_model, tokenizer,
                                                                  prompts) -> None:
    engine = make_engine(random_model, tokenizer)

    def broken_admit(requests, **kwargs):
        raise RuntimeError("out of memory")

    engine._prefill = broken_admit  # type: ignore[method-assign]

    async def run():
        return await asyncio.wait_for(
            asyncio.gather(*(engine.generate(p, GREEDY) for p in prompts),
                           return_exceptions=True), timeout=10)

    results = asyncio.run(run())
    assert all(isinstance(r, RuntimeError) and "out of memory" in str(r) for r in results)
    assert engine._pending == [] and engine._rows == []


def test_weights_loaded_mid_turn_are_used_at_once_and_stamped_per_token(
        random_model, tokenizer, prompts) -> None:
    """A partial rollout: a turn decoding while new weights arrive finishes with them, and
    ``Completion.versions`` says which tokens each version sampled."""
    import copy

    engine = make_engine(copy.deepcopy(random_model), tokenizer)
    params = SamplingParams(max_new_tokens=12, temperature=1.0, seed=5)
    request = _Request(prompts[1], params, None)
    engine._pending.append(request)
    for _ in range(3):  # prefill and a few decoding steps with version 0
        engine.step()
    assert request.result is None
    n = len(engine._rows[0].tokens)  # sampled so far
    other = copy.deepcopy(random_model)
    with torch.no_grad():
        for p in other.parameters():
            p.add_(0.05 * torch.randn_like(p))
    engine.load_weights(other.state_dict())
    engine.version = 1
    while request.result is None:
        engine.step()
    completion = request.result
    assert 0 < n < len(completion.token_ids)
    assert completion.versions == [0] * n + [1] * (len(completion.token_ids) - n)
    # the same request without the load: the same tokens and log-probs up to the load, and
    # different log-probs from there on (the new weights decode at once, on the kept cache)
    undisturbed = make_engine(copy.deepcopy(random_model), tokenizer).generate_batch(
        [prompts[1]], params)[0]
    assert undisturbed.token_ids[:n] == completion.token_ids[:n]
    assert undisturbed.logprobs[:n] == pytest.approx(completion.logprobs[:n], abs=1e-5)
    assert undisturbed.versions == [0] * len(undisturbed.token_ids)
    first_new = completion.logprobs[n]
    assert abs(first_new - undisturbed.logprobs[n]) > 1e-3


def test_a_session_that_ends_before_the_next_step_is_never_copied(random_model, tokenizer,
                                                                   prompts, monkeypatch) -> None:
    """A finished request's keys and values stay in the batch until the engine's next step:
    an episode that ends meanwhile (every single-turn one) costs no copy, and one that goes
    on is copied then and reused by its next turn."""
    engine = make_engine(random_model, tokenizer, reuse_kv=True)
    stored: list[str] = []
    store = engine._store_session
    monkeypatch.setattr(engine, "_store_session",
                        lambda session, *args: (stored.append(session), store(session, *args)))
    params = SamplingParams(max_new_tokens=3, temperature=1.0, seed=4)

    async def episode(name: str, turns: int) -> None:
        prompt = prompts[1]
        for _ in range(turns):
            completion = await engine.generate(prompt, params, session=name)
            prompt = prompt + completion.token_ids + prompts[2]
        engine.end_session(name)

    async def run():
        await asyncio.gather(episode("one turn", 1), episode("two turns", 2))

    asyncio.run(run())
    assert stored == ["two turns"]  # the single-turn episode ended before the next step
    assert engine.stats["cached_tokens"] == len(prompts[1]) + params.max_new_tokens - 1
    assert engine._sessions == {} and engine._unstored == {}
    assert engine._rows == [] and engine._cache is None


def test_a_streamed_request_is_prefilled_first_and_joins_the_batch_at_the_next_step(
        random_model, tokenizer, prompts) -> None:
    """A streamed request (``on_tokens``) waiting beside others is prefilled alone and the
    step ends there, its first token reported; at the next step its row joins the batch, the
    others are admitted and all decode together, each sampling what it samples alone."""
    engine = make_engine(random_model, tokenizer)
    seen: list[int] = []
    params = [SamplingParams(max_new_tokens=5, temperature=1.0, seed=10 + i,
                             stop_token_ids=()) for i in range(3)]
    plain = [_Request(prompts[i], params[i], None) for i in (0, 1)]
    streamed = _Request(prompts[2], params[2], None,
                        on_tokens=lambda tokens, logprobs: seen.extend(tokens))
    engine._pending += [plain[0], streamed, plain[1]]
    engine.step()
    assert len(seen) == 1 and engine.stats["prefills"] == 1
    assert engine.stats["decode_steps"] == 0 and engine._rows == []  # not merged yet
    assert engine._pending == plain
    engine.step()
    assert engine.stats["prefills"] == 2 and engine.stats["decode_steps"] == 1
    assert len(engine._rows) == 3 and engine._pending == []
    while any(r.result is None for r in [*plain, streamed]):
        engine.step()
    assert streamed.result is not None and seen == streamed.result.token_ids
    for request in [*plain, streamed]:
        alone = make_engine(random_model, tokenizer).generate_batch([request.prompt_ids],
                                                                    request.params)[0]
        assert request.result is not None and request.result.token_ids == alone.token_ids
        gaps = [abs(a - b) for a, b in zip(request.result.logprobs, alone.logprobs, strict=True)]
        assert max(gaps) < 1e-5


def test_a_streamed_request_waiting_for_a_full_batch_is_admitted_once_rows_finish(
        random_model, tokenizer, prompts) -> None:
    """With every slot taken by rows whose sessions are kept, a waiting streamed request
    does not hold back the tidying that frees the slots: it is admitted once they finish."""
    engine = make_engine(random_model, tokenizer, max_batch_size=1)
    running = _Request(prompts[0], SamplingParams(max_new_tokens=3, temperature=1.0, seed=1),
                       "episode")
    engine._pending.append(running)
    engine.step()  # the only slot is taken
    streamed = _Request(prompts[1], SamplingParams(max_new_tokens=3, temperature=1.0, seed=2),
                        None, on_tokens=lambda tokens, logprobs: None)
    engine._pending.append(streamed)
    for _ in range(20):
        if streamed.result is not None:
            break
        engine.step()
    assert running.result is not None and streamed.result is not None
