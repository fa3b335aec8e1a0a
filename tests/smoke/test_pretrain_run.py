"""`turnrl pretrain` for seconds: it learns, writes a loadable model dir with its card, resumes
to the same weights bit for bit, and refuses bad input before any run dir exists."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from turnrl.cli import main
from turnrl.models.policy import load_policy, load_tokenizer

SMALL = ["model.hidden_size=32", "model.num_layers=1", "model.num_heads=2",
         "model.num_kv_heads=1", "model.intermediate_size=64", "corpus.seq_len=256",
         "optim.batch_size=2", "optim.warmup_steps=2", "probe.examples=2", "run.threads=1",
         "log.tensorboard=false", "log.progress=false", "corpus.short_steps=0"]


def train_records(run: Path) -> list[dict]:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["phase"] == "train"]


def test_pretrain_learns_and_writes_a_model_with_its_card(tmp_path: Path, capsys) -> None:
    argv = ["pretrain", *SMALL, "optim.steps=40", "optim.lr=1e-2", "checkpoint.every=20",
            "corpus.shares={arithmetic: 1, count_compare: 1}", f"run.out_dir={tmp_path}"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    run = tmp_path / "pretrain"
    assert "| copy@1024 | accuracy |" in out and str(run / "model") in out
    losses = [r["pretrain/loss"] for r in train_records(run)]
    assert len(losses) == 40 and sum(losses[-5:]) / 5 < 0.6 * sum(losses[:5]) / 5
    model_dir = run / "model"
    card = (model_dir / "README.md").read_text()
    for fact in ("40 of 2 rows", "seed 0", "1 threads", "arithmetic 1", "| tool_call | valid |",
                 "loss_arithmetic", "`turnrl pretrain configs/pretrain.yaml ",
                 "model.hidden_size=32", "optim.steps=40"):
        assert fact in card, fact
    assert json.loads((model_dir / "probes.json").read_text())["copy@64"]["n"] == 2
    tokenizer = load_tokenizer(model_dir)
    model = load_policy(model_dir, dtype=torch.float32, device=torch.device("cpu"))
    assert model.config.hidden_size == 32 and tokenizer.chat_template
    assert model.generation_config.eos_token_id == tokenizer.eos_token_id
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step_20", "step_40"]


def test_a_resumed_pretraining_equals_one_that_never_stopped(tmp_path: Path) -> None:
    common = [*SMALL, "checkpoint.every=3", "corpus.short_steps=4", "corpus.short_seq_len=128",
              "corpus.short_shares={echo: 1}", "corpus.context_weight=0.5"]
    assert main(["pretrain", *common, "optim.steps=6", f"run.out_dir={tmp_path / 'a'}"]) == 0
    assert main(["pretrain", *common, "optim.steps=6", f"run.out_dir={tmp_path / 'b'}",
                 "probe.every=2"]) == 0  # stop "by hand": resume b from its step 3 below
    b = tmp_path / "b" / "pretrain"
    shutil.rmtree(b / "checkpoints" / "step_6")
    assert main(["pretrain", "--resume", str(b)]) == 0
    a = tmp_path / "a" / "pretrain"
    first = load_file(str(a / "model" / "model.safetensors"))
    second = load_file(str(b / "model" / "model.safetensors"))
    assert first.keys() == second.keys()
    assert all(torch.equal(first[k], second[k]) for k in first)
    assert [r["step"] for r in train_records(b)] == [1, 2, 3, 4, 5, 6]
    assert [r["pretrain/loss"] for r in train_records(a)] == \
        [r["pretrain/loss"] for r in train_records(b)]


def test_bad_pretrain_input_is_one_line_before_any_run_dir(tmp_path: Path, capsys) -> None:
    cases = [(["corpus.shares={copy: 1, teleport: 2}"],
              ["corpus.shares", "'teleport'", "lookup"]),
             (["corpus.seq_len=4096"], ["corpus.seq_len", "4096", "2048"]),
             (["optim.stepz=3"], ["optim", "'stepz'", "steps"])]
    for overrides, words in cases:
        assert main(["pretrain", *overrides, f"run.out_dir={tmp_path}"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error:") and "\n" not in err
        assert all(w in err for w in words), (err, words)
    assert not any(tmp_path.iterdir())
    assert main(["pretrain", "--resume", str(tmp_path / "nothing")]) == 2
    assert "no config.yaml" in capsys.readouterr().err


def test_probe_scores_models_side_by_side(tmp_path: Path, capsys) -> None:
    assert main(["pretrain", *SMALL, "optim.steps=2", f"run.out_dir={tmp_path}"]) == 0
    capsys.readouterr()
    run = tmp_path / "pretrain"
    out = tmp_path / "probes"
    assert main(["probe", str(run), "tiny-random", "--examples", "2", "--threads", "1",
                 "--out", str(out)]) == 0
    table = capsys.readouterr().out
    assert f"| probe | measure | {run} | tiny-random |" in table
    results = json.loads((out / "probes.json").read_text())
    assert set(results) == {str(run), "tiny-random"}
    assert results[str(run)]["tool_call"]["n"] == 2 and (out / "probes.md").read_text()
    assert main(["probe", str(tmp_path / "nothing-here")]) == 2
    assert "is not a model" in capsys.readouterr().err


@pytest.mark.slow
def test_two_ray_learners_pretrain_as_one_process(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    common = [*SMALL, "optim.steps=4", "optim.batch_size=4", "probe.examples=1"]
    assert main(["pretrain", *common, f"run.out_dir={tmp_path / 'one'}"]) == 0
    assert main(["pretrain", *common, f"run.out_dir={tmp_path / 'two'}",
                 "distributed.backend=ray", "distributed.num_learners=2"]) == 0
    one, two = (tmp_path / name / "pretrain" for name in ("one", "two"))
    first = load_file(str(one / "model" / "model.safetensors"))
    second = load_file(str(two / "model" / "model.safetensors"))
    assert all(torch.allclose(first[k], second[k], atol=1e-5) for k in first)
    losses = [[r["pretrain/loss"] for r in train_records(run)] for run in (one, two)]
    assert losses[0] == pytest.approx(losses[1], rel=1e-4)
