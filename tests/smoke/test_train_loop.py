"""Tiny end-to-end runs of ``turnrl.train.loop.train``: SFT → eval → RL → checkpoint → eval.

Most runs use ``arithmetic-v0`` with operands in {0, 1} (answers 0..2) after a short SFT, so
that groups have mixed rewards and RL really updates the policy in a couple of steps.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from peft import get_peft_model_state_dict
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

from turnrl.cli import main
from turnrl.config import load_config
from turnrl.config.checks import validate
from turnrl.models.policy import load_tokenizer
from turnrl.train import loop, stages
from turnrl.train.loop import train
from turnrl.train.setup import Model, build_learner, open_run

pytestmark = pytest.mark.slow

TINY_MODEL = [
    "model.path=tiny-random", "model.tiny.hidden_size=32", "model.tiny.num_layers=1",
    "model.tiny.num_heads=2",
    "model.tiny.num_kv_heads=1", "model.tiny.intermediate_size=64",
]
EASY_ARITHMETIC = ["env.id=arithmetic-v0", "env.kwargs={min_value: 0, max_value: 1}",
                   "rollout.max_new_tokens=4"]
SMALL_RUN = [
    "train.steps=3", "train.n_groups=2", "train.group_size=4", "train.mini_batch_size=8",
    "train.micro_batch_size=4", "sft.episodes=50", "sft.lr=3e-2", "sft.epochs=4",
    "sft.batch_size=16", "eval.episodes=8", "log.progress=false", "run.threads=1",
    *TINY_MODEL,
]
PREFIXES = ("rollout/", "reward/", "adv/", "loss/", "perf/", "eval/", "sft/", "alarm/")


def overrides(out_dir: Path, *extra: str) -> list[str]:
    return [*SMALL_RUN, *EASY_ARITHMETIC, f"run.out_dir={out_dir}", *extra]


def read_metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def train_steps(run_dir: Path) -> list[int]:
    return [r["step"] for r in read_metrics(run_dir) if r["phase"] == "train"]


@pytest.fixture
def post_sft_weights(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, torch.Tensor]]:
    """Records the policy's weights right after the SFT warm start of each run."""
    snapshots: list[dict[str, torch.Tensor]] = []
    warm_start = loop.warm_start

    def recording(cfg, model: Model, *args, **kwargs) -> None:
        warm_start(cfg, model, *args, **kwargs)
        snapshots.append({k: v.detach().clone() for k, v in model.policy.state_dict().items()})

    monkeypatch.setattr(loop, "warm_start", recording)
    return snapshots


@pytest.mark.parametrize("preset", ["grpo", "ppo"])
def test_run_trains_logs_and_checkpoints(tmp_path: Path, post_sft_weights, preset: str) -> None:
    cfg = load_config(None, overrides(tmp_path, f"algo.preset={preset}",
                                      "train.checkpoint_every=2", "run.name=smoke"))
    result = train(cfg)
    run_dir = result.run_dir
    assert run_dir == tmp_path / "smoke"

    # --- the layout of the run dir
    assert load_config(run_dir / "config.yaml") == cfg
    assert list((run_dir / "tensorboard").glob("events.out.tfevents.*"))
    assert sorted(p.name for p in (run_dir / "samples").glob("*.jsonl")) == [
        "eval_0.jsonl", "eval_3.jsonl",  # the evaluations before and after RL
        "step_1.jsonl", "step_2.jsonl", "step_3.jsonl"]  # numbered like metrics.jsonl
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["step_2", "step_3"]
    final = run_dir / "checkpoints" / "step_3"
    for name in ("config.json", "model.safetensors", "optimizer.pt", "state.json",
                 "tokenizer_config.json"):
        assert (final / name).is_file(), name
    assert json.loads((final / "state.json").read_text())["step"] == 3
    optimizer_state = torch.load(final / "optimizer.pt", weights_only=False)
    if preset == "ppo":
        assert (final / "critic" / "value_head.safetensors").is_file()
        assert (final / "critic" / "config.json").is_file()
        assert set(optimizer_state) == {"policy", "critic"}
    else:
        assert not (final / "critic").exists()
        assert set(optimizer_state) == {"policy"}
    summary = json.loads((run_dir / "eval.json").read_text())
    assert summary["before"]["episodes"] == summary["after"]["episodes"] == 8
    assert summary["after"] == result.after and summary["before"] == result.before

    # --- samples carry the token ledger and the advantages
    samples = [json.loads(line)
               for line in (run_dir / "samples" / "step_1.jsonl").read_text().splitlines()]
    assert len(samples) == 8
    for sample in samples:
        assert len(sample["advantages"]) == len(sample["token_ids"]) == len(sample["loss_mask"])
        assert all(a == 0.0 for a, m in zip(sample["advantages"], sample["loss_mask"], strict=True)
                   if not m)

    # --- metrics: prefixed names, finite losses, one record per step
    records = read_metrics(run_dir)
    assert {r["phase"] for r in records} == {"sft", "eval", "train"}
    for record in records:
        names = set(record) - {"step", "phase", "time"}
        assert all(name.startswith(PREFIXES) for name in names), names
        expected_prefix = {"sft": ("sft/",), "eval": ("eval/", "perf/eval_s")}.get(
            record["phase"], PREFIXES)
        assert all(name.startswith(expected_prefix) for name in names)
    train_records = [r for r in records if r["phase"] == "train"]
    assert [r["step"] for r in train_records] == [1, 2, 3]
    for record in train_records:
        losses = {k: v for k, v in record.items() if k.startswith("loss/")}
        assert "loss/policy" in losses and all(math.isfinite(v) for v in losses.values())
        if preset == "ppo":
            assert math.isfinite(record["loss/value"])
    assert any(r["reward/std"] > 0 for r in train_records)  # something to learn from
    assert [r["step"] for r in records if r["phase"] == "eval"] == [0, 3]

    # --- RL moved the weights away from the post-SFT policy
    (after_sft,) = post_sft_weights
    trained = load_file(str(final / "model.safetensors"))
    common = sorted(set(trained) & set(after_sft))
    assert len(common) >= len(trained) - 1
    assert any(not torch.equal(trained[k], after_sft[k]) for k in common)
    base = load_file(str(run_dir / "base_model" / "model.safetensors"))
    assert any(not torch.equal(base[k], after_sft[k]) for k in common)  # SFT ran too


def test_multi_turn_run_on_frozenlake(tmp_path: Path) -> None:
    cfg = load_config(None, [
        *SMALL_RUN, "train.steps=2", "train.checkpoint_every=1", "algo.preset=rloo",
        "algo.entropy_coef=0.01", "rollout.max_new_tokens=6", "sft.epochs=1",
        "eval.before_training=false", "log.tensorboard=false", f"run.out_dir={tmp_path}"])
    result = train(cfg)
    assert result.before is None and result.after["episodes"] == 8
    assert sorted(p.name for p in (result.run_dir / "checkpoints").iterdir()) == [
        "step_1", "step_2"]
    samples = [json.loads(line) for line in
               (result.run_dir / "samples" / "step_1.jsonl").read_text().splitlines()]
    assert any(len(s["turn_rewards"]) > 1 for s in samples)
    for sample in samples:
        assert max(sample["turn_index"]) == len(sample["turn_rewards"]) - 1
    for record in read_metrics(result.run_dir):
        if record["phase"] == "train":
            assert record["rollout/turns"] > 1 and math.isfinite(record["loss/total"])


def test_resume_continues_to_more_steps(tmp_path: Path, capsys) -> None:
    first = train(load_config(None, overrides(tmp_path, "train.steps=2",
                                              "train.checkpoint_every=1")))
    run_dir = first.run_dir
    assert train_steps(run_dir) == [1, 2]
    assert main(["train", "--resume", str(run_dir), "train.steps=4"]) == 0
    assert "after RL" in capsys.readouterr().out
    assert train_steps(run_dir) == [1, 2, 3, 4]
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == [
        "step_2", "step_3", "step_4"]  # train.keep_last: 3
    assert json.loads((run_dir / "checkpoints/step_4/state.json").read_text())["step"] == 4
    assert load_config(run_dir / "config.yaml").train.steps == 4
    # no second SFT or before-RL eval; the before-RL numbers are carried over
    # metrics.jsonl is what an uninterrupted 4-step run would have written: the first run's
    # records after its step-2 checkpoint (its final eval) were dropped on resume
    phases = [r["phase"] for r in read_metrics(run_dir)]
    assert phases.count("eval") == 2  # before RL, after 4 steps
    summary = json.loads((run_dir / "eval.json").read_text())
    assert summary["before"] == first.before
    # the resumed steps start from the step-2 weights, not from scratch
    step2 = load_file(str(run_dir / "checkpoints/step_2/model.safetensors"))
    step4 = load_file(str(run_dir / "checkpoints/step_4/model.safetensors"))
    assert any(not torch.equal(step2[k], step4[k]) for k in step2)


def test_resumed_run_matches_an_uninterrupted_run(tmp_path: Path) -> None:
    common = ["train.checkpoint_every=2", "log.tensorboard=false"]
    straight = train(load_config(None, overrides(tmp_path, "train.steps=4", "run.name=a",
                                                 *common)))
    halted = train(load_config(None, overrides(tmp_path, "train.steps=2", "run.name=b",
                                               *common)))
    train(load_config(halted.run_dir / "config.yaml", ["train.steps=4"]),
          resume=halted.run_dir)
    a = load_file(str(straight.run_dir / "checkpoints/step_4/model.safetensors"))
    b = load_file(str(halted.run_dir / "checkpoints/step_4/model.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)


# ---------------------------------------------------------------------- LoRA
@pytest.fixture(scope="module")
def lora_run(tmp_path_factory: pytest.TempPathFactory):
    """A 2-step LoRA run (entropy bonus on, so every step has a gradient)."""
    out = tmp_path_factory.mktemp("lora")
    cfg = load_config(None, overrides(out, "model.lora.enabled=true", "model.lora.r=4",
                                      "train.steps=2", "algo.entropy_coef=0.01",
                                      "log.tensorboard=false"))
    adapters_after_sft: dict[str, torch.Tensor] = {}
    models: list[Model] = []
    warm_start = loop.warm_start

    def recording(cfg, model: Model, *args, **kwargs) -> None:
        warm_start(cfg, model, *args, **kwargs)
        models.append(model)
        adapters_after_sft.update({n: p.detach().clone()
                                   for n, p in model.policy.named_parameters()
                                   if "lora_" in n})

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(loop, "warm_start", recording)
        result = train(cfg)
    return result.run_dir, models[0].policy, adapters_after_sft


def test_lora_trains_only_the_adapters(lora_run) -> None:
    run_dir, policy, adapters_after_sft = lora_run
    trainable = [n for n, p in policy.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    # the base weights are exactly those of the base model
    base = AutoModelForCausalLM.from_pretrained(str(run_dir / "base_model")).state_dict()
    frozen = {n.replace("base_model.model.", "", 1).replace(".base_layer", ""): p
              for n, p in policy.state_dict().items() if "lora_" not in n}
    assert set(base) <= set(frozen)
    assert all(torch.equal(frozen[k], base[k]) for k in base)
    # the adapters moved during SFT (lora_B starts at 0) and again during RL
    lora_b = {n: p for n, p in policy.named_parameters() if "lora_B" in n}
    assert lora_b and all(p.abs().max() > 0 for p in lora_b.values())
    assert any(not torch.equal(p, adapters_after_sft[n])
               for n, p in policy.named_parameters() if "lora_" in n)
    checkpoint = run_dir / "checkpoints" / "step_2"
    assert (checkpoint / "adapter_model.safetensors").is_file()
    assert all("lora_" in k for k in load_file(str(checkpoint / "adapter_model.safetensors")))


def test_lora_run_resumes_training_only_the_adapters(lora_run,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir, _, _ = lora_run
    cfg = load_config(run_dir / "config.yaml", ["train.steps=3"])
    resumed: list[tuple[dict, torch.nn.Module]] = []
    build = loop.build_learner

    def recording(run, **kwargs):  # the policy as the resumed run starts training it
        adapters = {k: v.detach().clone()
                    for k, v in get_peft_model_state_dict(run.model.policy).items()}
        resumed.append((adapters, run.model.policy))
        return build(run, **kwargs)

    monkeypatch.setattr(loop, "build_learner", recording)
    train(cfg, resume=run_dir)
    # it started from the step-2 adapters, not from fresh ones
    step2 = load_file(str(run_dir / "checkpoints/step_2/adapter_model.safetensors"))
    loaded, policy = resumed[0]
    assert loaded.keys() == step2.keys()
    assert all(torch.equal(loaded[k], step2[k]) for k in step2)
    assert train_steps(run_dir) == [1, 2, 3]
    trainable = [n for n, p in policy.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    step3 = load_file(str(run_dir / "checkpoints/step_3/adapter_model.safetensors"))
    assert any(not torch.equal(step2[k], step3[k]) for k in step2)


def test_eval_of_a_lora_run(lora_run, tmp_path: Path, capsys) -> None:
    run_dir, _, _ = lora_run
    assert main(["eval", str(run_dir), "--env", "arithmetic-v0", "--episodes", "2",
                 "--out-dir", str(tmp_path)]) == 0
    assert "success" in capsys.readouterr().out


# ---------------------------------------------------------------------- learning
def test_grpo_raises_the_reward_on_easy_arithmetic(tmp_path: Path) -> None:
    """One task, "2+2=". SFT only on *random* answers (4 ± 5, so it teaches the format,
    digits then EOS, but the right answer only by chance): the policy starts near 1/11
    success. 20 GRPO steps of 64 episodes must find the answer.

    Measured on held-out eval episodes (same task, sampled at T=1) before and after RL:
    over run seeds 0-29 the success gain was ≥ 0.25 for every seed and ≥ 0.6 for 29 of
    them; seed 0 goes from ~0.03 to ~0.8. Asserted: a gain of at least 0.2."""
    cfg = load_config(None, [
        "env.id=arithmetic-v0", "env.kwargs={min_value: 2, max_value: 2}",
        "rollout.max_new_tokens=4", *TINY_MODEL, "sft.episodes=50",
        "sft.random_action_prob=1.0", "sft.lr=3e-2", "sft.epochs=8", "sft.batch_size=16",
        "algo.preset=grpo", "train.steps=20", "train.n_groups=8", "train.group_size=8",
        "train.mini_batch_size=64", "train.micro_batch_size=64", "train.lr=5e-3",
        "train.checkpoint_every=0", "train.save_samples=0", "eval.episodes=64",
        "log.progress=false", "log.tensorboard=false", "run.threads=1", "run.seed=0",
        f"run.out_dir={tmp_path}"])
    result = train(cfg)
    assert result.before is not None and result.after is not None
    assert result.after["success"] >= result.before["success"] + 0.2, (result.before,
                                                                       result.after)
    rewards = [h["reward/mean"] for h in result.history]
    assert sum(rewards[-3:]) / 3 > sum(rewards[:2]) / 2 + 0.15, rewards  # min over seeds: 0.21


def test_loop_module_reads_top_to_bottom() -> None:
    """The RL step is the design's sequence: collect → layout → scoring passes → KL → score
    → advantages → train batch → update → sync, and the loop module stays short."""
    import inspect

    source = inspect.getsource(loop.train)
    body = source[source.index("for step in state.steps("):]
    order = ["collector.collect(", "prepare(", "learner.update(", "push_weights()",
             "end_step("]
    positions = [body.rindex(token) for token in order]  # (a failed batch ends early)
    assert positions == sorted(positions)
    prepare = inspect.getsource(stages.prepare)  # the stages between the ledger and update
    order = ["layout(", "scoring_passes(", "kl_step(", "score(", "ADVANTAGES[", "train_batch("]
    positions = [prepare.rindex(token) for token in order]
    assert positions == sorted(positions)
    assert len(inspect.getsource(loop).splitlines()) <= 250


@pytest.mark.parametrize("preset", sorted(__import__("turnrl.algos").algos.PRESETS))
def test_every_preset_trains_multi_turn(preset: str, tmp_path: Path) -> None:
    """Two RL steps of each preset on frozenlake (state keys, per-turn credit, critics): the
    whole pipeline runs and stays finite (parameter changes: the grpo/ppo smoke runs)."""
    result = train(load_config(None, [
        *SMALL_RUN, "train.steps=2", "train.checkpoint_every=0", "log.tensorboard=false",
        "train.save_samples=0", "env.id=frozenlake-v0", "env.kwargs={max_size: 4}",
        "rollout.max_new_tokens=6", "sft.episodes=16", "sft.epochs=1", "eval.episodes=4",
        f"algo.preset={preset}", f"run.out_dir={tmp_path}", f"run.name={preset}"]))
    rows = [r for r in read_metrics(result.run_dir) if r["phase"] == "train"]
    assert len(rows) == 2
    for row in rows:
        assert math.isfinite(row["loss/policy"]) and math.isfinite(row["loss/grad_norm"])
        assert math.isfinite(row["adv/mean"]) and row["loss/optimizer_steps"] == 1
        assert row["rollout/turns"] >= 1


def test_dynamic_sampling_keeps_only_groups_with_reward_spread(tmp_path: Path) -> None:
    result = train(load_config(None, overrides(
        tmp_path, "algo.preset=dapo", "train.steps=2", "train.max_sampling_tries=4",
        "train.save_samples=8", "log.tensorboard=false", "run.name=dapo")))
    rows = [r for r in read_metrics(result.run_dir) if r["phase"] == "train"]
    for step, row in enumerate(rows, start=1):
        assert 1 <= row["rollout/sampling_tries"] <= 4
        # whole groups; a full batch unless the try limit was hit first
        assert row["rollout/episodes"] in ((8.0,) if row["rollout/sampling_tries"] < 4
                                           else (4.0, 8.0))
        assert "reward/overlong_penalty" in row
        samples = [json.loads(line) for line in
                   (result.run_dir / f"samples/step_{step}.jsonl").read_text().splitlines()]
        groups: dict[int, set[float]] = {}
        for s in samples:
            groups.setdefault(s["group_id"], set()).add(sum(s["env_rewards"]))
        if row["rollout/sampling_tries"] < 4:  # the batch filled before the try limit
            assert all(len(rewards) > 1 for rewards in groups.values())
        assert row["rollout/dropped_groups"] >= 0


def test_mask_truncated_zeroes_the_loss_of_truncated_episodes(tmp_path: Path,
                                                              monkeypatch) -> None:
    seen = []
    train_batch = stages.train_batch

    def recording(scored, *args):
        batch, metrics = train_batch(scored, *args)
        seen.append((batch.loss_mask.clone(), scored.tokens.terminated.clone()))
        return batch, metrics

    monkeypatch.setattr(stages, "train_batch", recording)
    result = train(load_config(None, [
        *SMALL_RUN, "train.steps=1", "env.id=frozenlake-v0", "env.kwargs={max_size: 4}",
        "rollout.max_new_tokens=6", "sft.episodes=8", "sft.epochs=1", "eval.episodes=4",
        "algo.mask_truncated=true", "log.tensorboard=false", f"run.out_dir={tmp_path}"]))
    loss_mask, terminated = seen[0]
    assert bool((loss_mask[~terminated] == 0).all())
    assert bool((loss_mask[terminated].sum(-1) > 0).all())
    row = next(r for r in read_metrics(result.run_dir) if r["phase"] == "train")
    assert row["rollout/masked_truncated"] == pytest.approx(float((~terminated).float().mean()))


@pytest.mark.parametrize("mode", ["loss", "reward"])
def test_kl_to_the_reference_as_loss_or_reward(mode: str, tmp_path: Path) -> None:
    result = train(load_config(None, overrides(
        tmp_path, "train.steps=4", "algo.kl_coef=0.5", f"algo.kl_mode={mode}",
        "log.tensorboard=false", f"run.name=kl-{mode}")))
    rows = [r for r in read_metrics(result.run_dir) if r["phase"] == "train"]
    assert rows[0]["rollout/kl_ref"] == pytest.approx(0.0, abs=1e-5)  # policy == reference
    updated = [i for i, r in enumerate(rows) if r["loss/grad_norm"] > 0]
    assert updated and updated[0] + 1 < len(rows), "no update happened: retune the run"
    after = rows[updated[0] + 1]  # the first rollout from updated weights
    assert after["rollout/kl_ref"] > 0
    if mode == "loss":
        assert all("loss/kl" in r and "reward/kl_penalty" not in r for r in rows)
    else:
        assert all("loss/kl" not in r for r in rows)
        assert after["reward/kl_penalty"] < 0  # a penalty: it lowers the rewards


def test_adaptive_kl_coefficient_moves_towards_the_target(tmp_path: Path) -> None:
    result = train(load_config(None, overrides(
        tmp_path, "train.steps=3", "algo.kl_coef=0.5", "algo.kl_target=10.0",
        "log.tensorboard=false")))
    coefs = [r["loss/kl_coef"] for r in read_metrics(result.run_dir) if r["phase"] == "train"]
    # measured KL is far below the target, so the coefficient shrinks every step
    assert coefs[0] == 0.5 and coefs[1] < coefs[0] and coefs[2] < coefs[1]


def test_kl_target_without_a_starting_coefficient_is_a_config_error(capsys) -> None:
    assert main(["train", "algo.kl_target=0.1"]) == 2
    assert "algo.kl_coef" in capsys.readouterr().err


def test_ppo_value_clipping_is_reported(tmp_path: Path) -> None:
    result = train(load_config(None, overrides(
        tmp_path, "algo.preset=ppo", "algo.value_clip=0.01", "train.steps=3", "train.epochs=3",
        "log.tensorboard=false")))
    rows = [r for r in read_metrics(result.run_dir) if r["phase"] == "train"]
    for row in rows:
        assert 0.0 <= row["loss/vf_clipfrac"] <= 1.0 and math.isfinite(row["loss/value"])
    # later epochs over a batch see values moved by > 0.01 from the old ones: clipping engages
    assert max(r["loss/vf_clipfrac"] for r in rows) > 0


@pytest.mark.parametrize("mode", ["tis", "mask"])
def test_behaviour_correction_in_sync_training_is_a_no_op(mode: str, tmp_path: Path) -> None:
    """Rollouts and learning share the weights here, so the learner's recomputed old
    log-probs equal the sampling ones (to float noise): weights are 1 and the run matches
    the uncorrected one."""
    common = ["train.steps=3", "log.tensorboard=false"]
    plain = train(load_config(None, overrides(tmp_path, *common, "run.name=plain")))
    corrected = train(load_config(None, overrides(
        tmp_path, *common, f"algo.is_correction={mode}", "run.name=corrected")))
    rows = [r for r in read_metrics(corrected.run_dir) if r["phase"] == "train"]
    for row in rows:
        assert row["loss/is_weight_mean"] == pytest.approx(1.0, abs=1e-4)
        assert row["loss/is_clipfrac"] == 0.0 and row["loss/is_logratio_std"] < 1e-4
    base = [r for r in read_metrics(plain.run_dir) if r["phase"] == "train"]
    assert [r["reward/mean"] for r in rows] == [r["reward/mean"] for r in base]
    assert corrected.after["success"] == plain.after["success"]


FROZENLAKE_SMALL = ["env.id=frozenlake-v0", "env.kwargs={max_size: 4, max_turns: 6}",
                    "rollout.max_new_tokens=6"]


def test_privileged_critic_trains_on_the_env_facts_the_policy_never_sees(
        tmp_path: Path, monkeypatch) -> None:
    seen: list[torch.Tensor | None] = []
    scoring_passes = stages.scoring_passes

    def recording(learner, tokens, algo, **kwargs):
        seen.append(tokens.critic_prefix_ids)
        return scoring_passes(learner, tokens, algo, **kwargs)

    monkeypatch.setattr(stages, "scoring_passes", recording)
    result = train(load_config(None, [*SMALL_RUN, *FROZENLAKE_SMALL, f"run.out_dir={tmp_path}",
                                      "algo.preset=turn_ppo", "critic.privileged=true",
                                      "train.steps=2", "train.save_samples=8"]))
    assert len(seen) == 2 and all(p is not None for p in seen)
    tokenizer = load_tokenizer(result.run_dir / "checkpoints" / "step_2")
    prefix = tokenizer.decode(seen[0][0][seen[0][0] != tokenizer.pad_token_id])
    assert "Privileged information (critic only): shortest path:" in prefix
    for line in (result.run_dir / "samples" / "step_1.jsonl").read_text().splitlines():
        sample = json.loads(line)
        plan = sample["privileged_info"]
        assert plan.startswith("shortest path:")
        # the policy's context (its tokens and messages) never holds the plan
        assert plan not in tokenizer.decode(sample["token_ids"])
        assert all(plan not in m["content"] for m in sample["messages"])
    assert (result.run_dir / "checkpoints" / "step_2" / "critic" / "config.json").is_file()


def test_shared_critic_run_with_warmup_saves_the_head_and_resumes(tmp_path: Path,
                                                                   post_sft_weights) -> None:
    common = [*overrides(tmp_path), "algo.preset=ppo", "critic.shared=true",
              "critic.warmup_steps=1", "train.checkpoint_every=1", "log.tensorboard=false",
              "algo.entropy_coef=0.01"]  # every policy step has a gradient
    first = train(load_config(None, [*common, "train.steps=3"]))
    run_dir = first.run_dir
    records = [r for r in read_metrics(run_dir) if r["phase"] == "train"]
    assert [r["loss/critic_warmup"] for r in records] == [1.0, 0.0, 0.0]
    assert "loss/policy" not in records[0] and "loss/policy" in records[1]
    assert any(r["reward/mean"] > 0 for r in records)  # value targets that are not all 0
    step1 = load_file(str(run_dir / "checkpoints/step_1/model.safetensors"))
    step2 = load_file(str(run_dir / "checkpoints/step_2/model.safetensors"))
    (after_sft,) = post_sft_weights
    assert all(torch.equal(step1[k], after_sft[k]) for k in step1)  # warm-up: policy waits
    assert any(not torch.equal(step1[k], step2[k]) for k in step1)  # the policy step moved it
    critic_dir = run_dir / "checkpoints/step_3/critic"
    assert sorted(p.name for p in critic_dir.iterdir()) == ["value_head.safetensors"]
    head = load_file(str(critic_dir / "value_head.safetensors"))
    assert head["weight"].abs().sum() > 0  # trained away from its zero init
    run = open_run(validate(load_config(run_dir / "config.yaml", ["train.steps=4"])),
                   resume=run_dir)
    learner = build_learner(run, source=run.resume_from, reference=None)
    assert learner.critic is not None and learner.critic.shared
    assert torch.equal(learner.critic.head.weight.detach(), head["weight"])


def test_sft_stop_loss_ends_the_warm_start_early_and_says_so(tmp_path: Path, capsys) -> None:
    """sft.stop_loss: SFT ends at the first step whose mean loss over the last 10 steps is at
    most it (here at once: 10 steps of the 16 the epochs allow), and the run says where."""
    result = train(load_config(None, overrides(tmp_path, "sft.stop_loss=100", "train.steps=1",
                                                "eval.before_training=false")))
    sft_steps = [r for r in read_metrics(result.run_dir) if r["phase"] == "sft"]
    assert len(sft_steps) == 10  # STOP_WINDOW; 50 demos / 16 per step x 4 epochs = 16
    assert sft_steps[-1]["sft/lr"] > 0  # the schedule of all 16 steps, cut at step 10
    out = capsys.readouterr()
    assert "SFT stopped after step 10 of 16: the mean loss of the last 10 steps is" in \
        out.out + out.err
    assert "<= sft.stop_loss 100" in out.out + out.err
