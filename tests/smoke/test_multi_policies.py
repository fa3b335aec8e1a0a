"""Separate policies in one run (``multi.policies``): each agent trains its own weights on its
own tokens, and a run stopped and resumed restores every policy, optimizer and generator."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file
from test_train_loop import SMALL_RUN

from turnrl.config import load_config
from turnrl.train.loop import train

pytestmark = pytest.mark.slow

# both agents reply in every episode of the referential game (the speaker, then the listener)
REFERENTIAL = ["env.id=referential-v0", "rollout.max_new_tokens=6", "sft.episodes=60",
               "sft.epochs=2", "eval.episodes=4", "eval.samples_per_task=1",
               "multi.policies=[picker]", "multi.agents={listener: picker}",
               "multi.eval_opponents=[self,oracle]", "log.tensorboard=false",
               "log.report=false", "algo.entropy_coef=0.01"]  # a gradient at every step


def run_overrides(out, steps: int) -> list[str]:
    return [*SMALL_RUN, *REFERENTIAL, f"run.out_dir={out}", "run.name=run",
            f"train.steps={steps}", "train.checkpoint_every=1", "train.keep_last=10",
            "train.save_samples=64", "run.deterministic=true"]


def weights(folder) -> dict[str, torch.Tensor]:
    return load_file(str(folder / "model.safetensors"))


def metric_rows(run_dir) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items()
             if k != "time" and not k.startswith("perf/")}
            for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory):
    """A 4-step run, and the same run stopped after step 2 and resumed."""
    out = tmp_path_factory.mktemp("policies")
    whole = train(load_config(None, run_overrides(out / "whole", 4)))
    train(load_config(None, run_overrides(out / "parts", 2)))
    resumed = train(load_config(None, run_overrides(out / "parts", 4)),
                    resume=out / "parts" / "run")
    return whole, resumed


def test_each_policy_trains_on_its_own_agent_only(runs) -> None:
    whole, _ = runs
    step = whole.run_dir / "checkpoints" / "step_4"
    main, picker = weights(step), weights(step / "policies" / "picker")
    assert main.keys() == picker.keys()
    assert any(not torch.equal(main[k], picker[k]) for k in main)  # two models, not one
    for index in range(1, 5):
        rows = [json.loads(line) for line in
                (whole.run_dir / "samples" / f"step_{index}.jsonl").read_text().splitlines()]
        # the samples are main's batch: the speaker's turns only, never the picker's tokens
        assert rows and {(r["agent"], r["policy"]) for r in rows} == {("speaker", "main")}
    train_rows = [r for r in metric_rows(whole.run_dir) if r["phase"] == "train"]
    for row in train_rows:  # each policy's own update and rollouts
        assert row["policy/picker/loss/optimizer_steps"] > 0
        assert 0.0 <= row["policy/picker/rollout/success"] <= 1.0
        assert "loss/policy" in row and "policy/picker/loss/policy" in row
    sft = [r for r in metric_rows(whole.run_dir) if r["phase"] == "sft"]
    assert any("policy/picker/sft/loss" in r for r in sft)  # the picker's own SFT
    assert whole.after is not None
    for policy in ("main", "picker"):  # evaluation per policy
        assert 0.0 <= whole.after[f"vs_oracle/{policy}/success"] <= 1.0


def test_a_resumed_run_restores_every_policy_exactly(runs) -> None:
    whole, resumed = runs
    a, b = whole.run_dir / "checkpoints" / "step_4", resumed.run_dir / "checkpoints" / "step_4"
    for sub in ("", "policies/picker"):
        x, y = weights(a / sub), weights(b / sub)
        assert x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)
    first = torch.load(a / "optimizer.pt", weights_only=False)
    again = torch.load(b / "optimizer.pt", weights_only=False)
    assert {"policy", "policy/picker"} <= first.keys()
    for name in ("policy", "policy/picker"):
        assert first[name]["state"]  # both optimizers stepped
        for key, state in first[name]["state"].items():
            assert all(torch.equal(state[s], again[name]["state"][key][s]) for s in state
                       if isinstance(state[s], torch.Tensor))
    state = json.loads((a / "state.json").read_text())
    assert {"engine/picker", "learner/picker"} <= state["generators"].keys()
    assert state["generators"] == json.loads((b / "state.json").read_text())["generators"]
    assert [r for r in metric_rows(resumed.run_dir) if r["phase"] == "train"] == \
        [r for r in metric_rows(whole.run_dir) if r["phase"] == "train"]
