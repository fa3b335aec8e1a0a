"""The command line: listing envs, help, user errors (exit 2, one line, no traceback),
init-model and eval on a tiny model."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from turnrl.cli import main
from turnrl.models.policy import load_policy, load_tokenizer

SMALL_MODEL_ARGS = ["--hidden-size", "32", "--num-layers", "1", "--num-heads", "2",
                    "--num-kv-heads", "1", "--intermediate-size", "64"]


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from an empty dir (relative runs/ go there) with a wide terminal for rich tables."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1, err
    return errors[0]


def test_envs_lists_the_builtin_envs(capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # one table row per env
    assert main(["envs"]) == 0
    out = capsys.readouterr().out
    for env_id in ("arithmetic-v0", "dataset-v0", "frozenlake-v0", "guess-v0", "search-qa-v0",
                   "sokoban-v0"):
        assert env_id in out
    row = next(line for line in out.splitlines() if "search-qa-v0" in line)
    assert "search, answer" in row and "6" in row  # tools and max turns


def test_envs_keeps_ids_whole_on_a_narrow_terminal(capsys, monkeypatch) -> None:
    from turnrl import envs

    monkeypatch.setenv("COLUMNS", "80")  # a pipe's width: the descriptions wrap, not the ids
    assert main(["envs"]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80
    for env_id in envs.registered_ids():
        assert f"{env_id}: {envs.spec(env_id).description[:20]}" in out, env_id  # after the table
        assert f"│ {env_id} " in out, env_id  # a whole id in its table row
    assert "search, answer" in out


def test_train_help_lists_the_config_keys(capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["train", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for key in ("--resume", "train.steps", "algo.preset", "model.tiny.hidden_size",
                "rollout.max_new_tokens", "sft.random_action_prob", "eval.pass_k"):
        assert key in out, key


@pytest.mark.parametrize("columns", [80, 100])
def test_every_help_fits_the_terminal_width(columns: int, capsys, monkeypatch) -> None:
    from turnrl.cli import COMMANDS

    monkeypatch.setenv("COLUMNS", str(columns))
    for command in ["", *(c.__name__.rsplit(".", 1)[-1] for c in COMMANDS)]:
        name = {"evaluate": "eval", "check_env": "check-env", "init_model": "init-model"}.get(
            command, command)
        with pytest.raises(SystemExit):
            main([name, "--help"] if name else ["--help"])
        out = capsys.readouterr().out
        wide = [line for line in out.splitlines() if len(line) > columns]
        assert out and not wide, (name, wide[:3])


def test_bad_override_is_one_error_line_naming_the_key(capsys) -> None:
    assert main(["train", "train.stepz=1"]) == 2
    line = one_error_line(capsys)
    assert "stepz" in line and "did you mean 'steps'" in line
    assert not Path("runs").exists()


def test_bad_override_value_is_one_error_line(capsys) -> None:
    assert main(["train", "train.group_size=0"]) == 2
    line = one_error_line(capsys)
    assert "train.group_size" in line and ">= 1" in line


def test_missing_config_file_is_one_error_line(capsys) -> None:
    assert main(["train", "missing.yaml", "train.steps=1"]) == 2
    line = one_error_line(capsys)
    assert "missing.yaml" in line and "not found" in line


def test_unknown_env_id_in_a_config_file_suggests_the_closest(tmp_path: Path, capsys) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("run:\n  out_dir: out\nenv:\n  id: frozenlak-v0\n")
    assert main(["train", str(config)]) == 2
    line = one_error_line(capsys)
    assert f"{config}:4" in line  # file and line of the key
    assert "did you mean 'frozenlake-v0'" in line
    assert not (tmp_path / "out").exists()  # rejected before any run dir or model is made


def test_resume_without_a_run_dir_is_a_usage_error(tmp_path: Path, capsys) -> None:
    assert main(["train", "--resume", str(tmp_path / "nope")]) == 2
    assert "config.yaml" in one_error_line(capsys)


def test_bad_sft_dataset_is_one_error_line_with_file_and_line(tmp_path: Path, capsys) -> None:
    data = tmp_path / "demos.jsonl"
    good = {"messages": [{"role": "user", "content": "1+1="},
                         {"role": "assistant", "content": "2"}]}
    data.write_text(json.dumps(good) + "\n{oops\n")
    argv = ["train", "sft.source=jsonl", f"sft.path={data}", "run.out_dir=out", "run.threads=1",
            "log.progress=false", "log.tensorboard=false", "model.path=tiny-random",
            *[f"model.tiny.{k}={v}" for k, v in (("hidden_size", 32), ("num_layers", 1),
                                                   ("num_heads", 2), ("num_kv_heads", 1),
                                                   ("intermediate_size", 64))]]
    assert main(argv) == 2
    line = one_error_line(capsys)
    assert f"{data}:2: not valid JSON" in line


def test_eval_of_a_missing_model_dir_is_one_error_line(tmp_path: Path, capsys) -> None:
    assert main(["eval", str(tmp_path / "nowhere"), "--env", "arithmetic-v0",
                 "--episodes", "2", "--out-dir", "out"]) == 2
    line = one_error_line(capsys)
    assert "nowhere" in line and "does not exist" in line


def test_init_model_writes_a_loadable_model(tmp_path: Path, capsys) -> None:
    out_dir = tmp_path / "model"
    assert main(["init-model", str(out_dir), "--random", *SMALL_MODEL_ARGS, "--seed", "5"]) == 0
    assert str(out_dir) in capsys.readouterr().out
    tokenizer = load_tokenizer(out_dir)
    model = load_policy(out_dir, dtype=torch.float32, device=torch.device("cpu"))
    assert model.config.hidden_size == 32 and model.config.num_hidden_layers == 1
    assert model.config.vocab_size == len(tokenizer)
    assert json.loads((out_dir / "turnrl_tiny.json").read_text())["seed"] == 5
    ids = torch.tensor([tokenizer.encode("<|im_start|>user\nhi", add_special_tokens=False)])
    assert torch.isfinite(model(ids).logits).all()


def test_eval_of_a_model_dir_prints_a_table_with_success(tiny_model_dir: Path, tmp_path: Path,
                                                         capsys) -> None:
    rc = main(["eval", str(tiny_model_dir), "--env", "arithmetic-v0", "--episodes", "4",
               "--out-dir", str(tmp_path / "out"), "--temperature", "0"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "success" in out and "reward" in out and "pass@1" in out
    assert re.search(r"success\W+\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]", out)  # value [95% CI]
    assert re.search(r"episodes\W+4\W", out)
    run_dir = tmp_path / "out" / "eval-arithmetic-v0"
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["phase"] == "eval" and records[-1]["eval/episodes"] == 4.0
    assert 0.0 <= records[-1]["eval/success"] <= 1.0


def test_an_interrupted_eval_leaves_no_run_dir_and_a_long_one_is_printed_whole(
        tiny_model_dir: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    import turnrl.train.setup as setup

    out = tmp_path / ("a_long_folder_name_" * 6) / "out"
    argv = ["eval", str(tiny_model_dir), "--env", "arithmetic-v0", "--episodes", "2",
            "--out-dir", str(out)]

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(setup, "evaluate_run", interrupted)
        assert main(argv) != 0  # "interrupted"
    assert not out.exists() or not any(out.iterdir())  # nothing half-written is left
    assert main(argv) == 0
    assert [p.name for p in out.iterdir()] == ["eval-arithmetic-v0"]  # no -2 suffix
    printed = capsys.readouterr().out
    assert f"run dir: {out / 'eval-arithmetic-v0'}" in printed  # on one line, never cut


def test_unknown_env_kwarg_is_one_error_line_before_any_work(capsys) -> None:
    assert main(["train", "env.kwargs.hole_probb=0.3"]) == 2
    line = one_error_line(capsys)
    assert "env.kwargs" in line and "hole_probb" in line and "hole_prob" in line
    assert "override 'env.kwargs.hole_probb=0.3'" in line  # points at where it was set
    assert not Path("runs").exists()


def test_group_estimator_with_group_size_one_is_rejected(capsys) -> None:
    assert main(["train", "train.group_size=1", "train.mini_batch_size=16",
                 "train.micro_batch_size=16"]) == 2
    line = one_error_line(capsys)
    assert "train.group_size" in line and "'grpo'" in line and ">= 2" in line
    assert not Path("runs").exists()


def test_missing_model_dir_fails_before_a_run_dir_is_made(capsys) -> None:
    assert main(["train", "model.path=./no-such-model"]) == 2
    line = one_error_line(capsys)
    assert "model.path" in line and "no-such-model" in line and "init-model" in line
    assert not Path("runs").exists()


def test_algos_lists_presets_with_their_bundles(capsys) -> None:
    assert main(["algos"]) == 0
    out = capsys.readouterr().out
    for name in ("grpo", "dr_grpo", "rloo", "reinforce_pp", "ppo", "ppo_clip", "gae",
                 "seq_mean_token_sum_norm", "k3"):
        assert name in out, name
    assert "norm_std=False" in out  # dr_grpo's bundle is shown


@pytest.mark.parametrize("preset", ["trloo", "gigpo", "reinforce_pp_baseline"])
def test_every_group_estimator_rejects_group_size_one(preset: str, capsys) -> None:
    assert main(["train", f"algo.preset={preset}", "train.group_size=1",
                 "train.mini_batch_size=16", "train.micro_batch_size=16"]) == 2
    assert "train.group_size" in one_error_line(capsys)


@pytest.mark.parametrize(("args", "expected"), [
    (["algo.preset=ppo", "critic.shared=true", "critic.privileged=true"],
     ["critic.privileged", "critic.shared=false"]),
    (["algo.preset=grpo", "critic.shared=true"], ["critic.shared=True", "'grpo'", "ppo"]),
    (["algo.preset=rloo", "critic.warmup_steps=2"], ["critic.warmup_steps=2", "no critic"]),
    (["algo.preset=ppo", "critic.privileged=true", "env.id=arithmetic-v0", "env.kwargs={}"],
     ["critic.privileged", "'arithmetic-v0'", "privileged_info"]),
])
def test_bad_critic_settings_are_config_errors(args: list[str], expected: list[str],
                                               capsys) -> None:
    assert main(["train", *args]) == 2
    line = one_error_line(capsys)
    assert all(part in line for part in expected), line
    assert not Path("runs").exists()


def test_status_shows_the_newest_step_and_the_ray_workers(tmp_path, capsys) -> None:
    run = tmp_path / "runs" / "r"
    run.mkdir(parents=True)
    steps = [{"step": s, "phase": "train", "reward/mean": 0.1 * s, "perf/step_s": 2.0,
              "perf/policy_version": float(s), "perf/staleness_0": 3.0, "perf/staleness_1": 5.0,
              "perf/dropped_stale": 1.0, "perf/worker_restarts": 0.0,
              "perf/rollout-0/episodes_per_s": 4.5, "perf/rollout-0/tokens_per_s": 900.0,
              "perf/rollout-0/busy_frac": 0.75, "perf/rollout-1/episodes_per_s": 3.25,
              "perf/rollout-1/tokens_per_s": 700.0, "perf/rollout-1/busy_frac": 0.5}
             for s in (1, 2)]
    lines = [json.dumps({"step": 0, "phase": "eval", "eval/success": 0.1}),
             *map(json.dumps, steps), '{"step": 3, "phase": "tr']  # a live run's half line
    (run / "metrics.jsonl").write_text("\n".join(lines))
    assert main(["status", str(run)]) == 0
    out = capsys.readouterr().out
    assert "step 2" in out and "policy version" in out
    assert re.search(r"rollout-0\s*│\s*4\.50\s*│\s*900\s*│\s*75%", out)
    assert re.search(r"rollout-1\s*│\s*3\.25\s*│\s*700\s*│\s*50%", out)
    assert re.search(r"│\s*1\s*│\s*5\s*│", out)  # 5 groups one update behind
    assert re.search(r"dropped stale groups\s*│\s*1", out)
    assert "finished" not in out
    (run / "eval.json").write_text(json.dumps({"before": {"success": 0.1},
                                               "after": {"success": 0.4}, "wall_time_s": 61}))
    assert main(["status", str(run)]) == 0
    assert ("r finished after step 2: 61 s, held-out success 0.100 -> 0.400"
            in capsys.readouterr().out)


def test_algos_at_80_columns_cut_no_word(capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["algos"]) == 0
    out = capsys.readouterr().out
    assert max(map(len, out.splitlines())) <= 80
    assert "aggregatio\n" not in out and "  aggregation  token_mean" in out
    assert "Yu et al. 2025, DAPO, arXiv:2503.14476" in out  # a paper on one line


def test_a_closed_pipe_ends_quietly() -> None:
    import subprocess
    import sys

    # stdout is a pipe whose reader is gone (`turnrl play ... | head` once head has quit)
    script = ("import os, sys; r, w = os.pipe(); os.close(r); os.dup2(w, 1); "
              "from turnrl.cli import main; sys.exit(main(['play', 'frozenlake-v0', "
              "'--oracle']))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 141, done.stderr
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr


def test_status_of_something_that_is_not_a_run(tmp_path, capsys) -> None:
    assert main(["status", str(tmp_path / "nope")]) == 2
    assert "not a directory; pass a run dir" in one_error_line(capsys)
    assert main(["status", str(tmp_path)]) == 2
    assert "no metrics.jsonl" in one_error_line(capsys)
