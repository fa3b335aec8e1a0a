"""The HF engine's decoding step (``hf_decode.DecodeStep``) against the transformers forward:
the same logits over a padded, growing cache for Llama and Qwen2 (biased projections,
grouped-query heads), with LoRA adapters, and whole generations that sample the same tokens;
architectures it does not cover decode through the model."""

from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM
from transformers.cache_utils import Cache

from turnrl.rollout.engine import SamplingParams
from turnrl.rollout.hf import HFEngine
from turnrl.rollout.hf_decode import DecodeStep, Extension, decode_step_for
from turnrl.rollout.hf_kv import GrowingLayer, _SessionCache, prefill_inputs

SHAPE = dict(vocab_size=64, hidden_size=48, intermediate_size=96, num_hidden_layers=2,
             num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=256)


def llama() -> LlamaForCausalLM:
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(**SHAPE, rope_theta=500.0)).eval()


def qwen2() -> Qwen2ForCausalLM:
    torch.manual_seed(1)
    return Qwen2ForCausalLM(Qwen2Config(**SHAPE, tie_word_embeddings=False)).eval()


def prefilled(model, rows: list[list[int]]) -> tuple[Cache, torch.Tensor]:
    """The rows prefilled left-padded through the model, as the engine's running batch."""
    width = max(len(r) for r in rows)
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, width - len(r):] = torch.tensor(r)
        mask[i, width - len(r):] = 1
    cache = Cache(layers=[GrowingLayer() for _ in range(model.config.num_hidden_layers)])
    with torch.no_grad():
        model(input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0),
              use_cache=True, cache=cache)
    return cache, mask


@pytest.mark.parametrize("build", [llama, qwen2])
def test_decoding_steps_give_the_forward_pass_logits(build) -> None:
    model = build()
    step = decode_step_for(model)
    assert isinstance(step, DecodeStep)
    rows = [[5, 9, 13, 2, 40], [7], [11, 12, 13]]  # padding of 0, 4 and 2 columns
    ours, ours_mask = prefilled(model, rows)
    theirs, theirs_mask = prefilled(model, rows)
    tokens = torch.tensor([3, 17, 29])
    for _ in range(6):  # the cache grows past its first buffer
        positions = ours_mask.sum(-1, keepdim=True)
        ours_mask = torch.cat([ours_mask, ours_mask.new_ones(3, 1)], 1)
        theirs_mask = ours_mask.clone()
        got = step(tokens, ours, ours_mask, positions)
        with torch.no_grad():
            want = model(input_ids=tokens[:, None], attention_mask=theirs_mask,
                         position_ids=positions, use_cache=True, cache=theirs).logits[:, -1]
        assert got.shape == want.shape
        assert (got - want).abs().max().item() < 1e-5
        tokens = want.argmax(-1)


def test_lora_layers_apply_in_the_decoding_step() -> None:
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(llama(), LoraConfig(r=4, target_modules=["q_proj", "v_proj",
                                                                    "gate_proj"]))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)  # a trained adapter: it changes the logits
    model.eval()
    step = decode_step_for(model)
    assert step is not None
    cache, mask = prefilled(model, [[4, 5, 6]])
    mask = torch.cat([mask, mask.new_ones(1, 1)], 1)
    got = step(torch.tensor([8]), cache, mask, torch.tensor([[3]]))
    with torch.no_grad():
        want = model(input_ids=torch.tensor([[4, 5, 6, 8]])).logits[:, -1]
        without = model.get_base_model()(input_ids=torch.tensor([[4, 5, 6, 8]]))
    assert (got - want).abs().max().item() < 1e-5
    with model.disable_adapter(), torch.no_grad():
        without = model(input_ids=torch.tensor([[4, 5, 6, 8]])).logits[:, -1]
    assert (got - without).abs().max().item() > 1e-3  # the adapter was not skipped


def test_generations_sample_the_same_tokens_with_and_without_it() -> None:
    model = qwen2()
    fast = HFEngine(model, eos_token_id=-1, pad_token_id=0, seed=0)
    plain = HFEngine(model, eos_token_id=-1, pad_token_id=0, seed=0, fast_decode=False)
    assert fast._decode is not None and plain._decode is None
    prompts = [[1 + (i * 7 + j) % 60 for j in range(3 + i % 9)] for i in range(12)]
    params = [SamplingParams(max_new_tokens=5 + i, temperature=1.0, seed=i) for i in range(12)]
    a, b = fast.generate_batch(prompts, params), plain.generate_batch(prompts, params)
    assert [c.token_ids for c in a] == [c.token_ids for c in b]
    diffs = [abs(x - y) for p, q in zip(a, b, strict=True)
             for x, y in zip(p.logprobs, q.logprobs, strict=True)]
    assert max(diffs) < 1e-5


def test_other_architectures_decode_through_the_model() -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_embd=32, n_layer=1, n_head=2))
    assert decode_step_for(gpt2) is None
    sliding = Qwen2Config(**SHAPE, use_sliding_window=True, sliding_window=16,
                          max_window_layers=0)
    assert decode_step_for(Qwen2ForCausalLM(sliding)) is None


def session(model, tokens: list[int]) -> _SessionCache:
    """A session's cache of ``tokens``, as the engine keeps one between turns."""
    cache = DynamicCache()
    with torch.no_grad():
        model(input_ids=torch.tensor([tokens]), use_cache=True, cache=cache)
    return _SessionCache(tokens, [layer.keys for layer in cache.layers],
                         [layer.values for layer in cache.layers])


@pytest.mark.parametrize("build", [llama, qwen2])
def test_rows_admitted_in_the_decoding_pass_get_the_forward_pass_logits_and_cache(
        build) -> None:
    """One pass decodes the running rows and prefills the admitted ones (one with a cached
    prefix, one without, one longer than the others): every row's logits equal a forward
    pass of its whole sequence, and the admitted rows' keys equal the forward pass's."""
    model = build()
    step = decode_step_for(model)
    assert step is not None
    ours, ours_mask = prefilled(model, [[5, 9, 13, 2, 40], [7]])
    theirs, _ = prefilled(model, [[5, 9, 13, 2, 40], [7]])
    admitted = [([3, 4, 5, 6], [8, 9]), ([], [20, 21, 22, 23, 24]), ([30], [31])]
    cached = [session(model, p) if p else None for p, _ in admitted]
    prefix = [len(p) for p, _ in admitted]
    ids, mask, positions, cache = prefill_inputs([s for _, s in admitted], cached, prefix,
                                                 0, torch.device("cpu"))
    cache = Cache(layers=list(cache.layers))
    extension = Extension(ids, cache, mask, positions)
    tokens = torch.tensor([3, 17])
    positions = ours_mask.sum(-1, keepdim=True)
    ours_mask = torch.cat([ours_mask, ours_mask.new_ones(2, 1)], 1)
    got = step(tokens, ours, ours_mask, positions, extension)
    with torch.no_grad():
        want = model(input_ids=tokens[:, None], attention_mask=ours_mask,
                     position_ids=positions, use_cache=True, cache=theirs).logits[:, -1]
    assert got.shape[0] == 2 + len(admitted)
    assert (got[:2] - want).abs().max().item() < 1e-5
    got = got[2:]
    for row, (p, s) in enumerate(admitted):
        with torch.no_grad():
            full = model(input_ids=torch.tensor([p + s]), use_cache=True)
        assert (got[row] - full.logits[0, -1]).abs().max().item() < 1e-5
        columns = mask[row].nonzero()[:, 0]
        for layer, want_layer in zip(cache.layers, full.past_key_values.layers, strict=True):
            assert (layer.keys[row][:, columns] - want_layer.keys[0]).abs().max() < 1e-5
            assert (layer.values[row][:, columns] - want_layer.values[0]).abs().max() < 1e-5


def test_a_rows_columns_are_copied_out_by_runs() -> None:
    """A finished row's keys/values are copied out as a session from the runs of its mask
    (cached prefix, padding, new and sampled tokens): the same as indexing its columns."""
    from turnrl.rollout.hf_kv import column_runs, take_columns

    mask = torch.tensor([[0, 0, 1, 1, 1, 0, 0, 1, 1, 0, 1], [1] * 11])
    assert column_runs(mask[0]) == [(2, 5), (7, 9), (10, 11)]
    assert column_runs(mask[1]) == [(0, 11)]
    states = torch.randn(2, 3, 11, 4)
    before = states.clone()
    for row in range(2):
        columns = mask[row].nonzero()[:, 0]
        got = take_columns(states, row, column_runs(mask[row]))
        assert torch.equal(got, states[row:row + 1, :, columns])
        got.add_(1)  # a copy: the batch's buffers are reused
    assert torch.equal(states, before)
