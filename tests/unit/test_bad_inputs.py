"""Bad input, end to end through the CLI: every mistake below is caught before any heavy work
and reported as ``error: ...`` on one screen, naming the file, key or value and the fix, with
exit status 2 and no traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from turnrl.cli import main


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> dict[str, Path]:
    """Broken files for the cases below."""
    import shutil

    root = tmp_path_factory.mktemp("bad_inputs")
    (root / "bad.yaml").write_text("train:\n  steps: 3\n   lr: 1\n")  # bad indentation
    (root / "typo.yaml").write_text("run:\n  seed: 1\n\ntrain:\n  stpes: 3\n")
    (root / "list.yaml").write_text("- just\n- a list\n")
    (root / "sft_bad.jsonl").write_text(
        '{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", '
        '"content": "ok"}]}\n{not json}\n')
    (root / "sft_role.jsonl").write_text(
        '{"messages": [{"role": "wizard", "content": "hi"}]}\n')
    (root / "qa.jsonl").write_text(json.dumps({"question": "2+2?", "solution": "4"}) + "\n")
    no_template = root / "no_template_model"
    shutil.copytree(tiny_model_dir, no_template)
    (no_template / "chat_template.jinja").unlink(missing_ok=True)
    config = json.loads((no_template / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (no_template / "tokenizer_config.json").write_text(json.dumps(config))
    (root / "not_a_model").mkdir()
    (root / "not_a_model" / "README.txt").write_text("nothing here\n")
    return {p.name: p for p in root.iterdir()}


# (case, argv after "turnrl", substrings the one-line error must contain)
CASES = [
    ("unknown top-level key", ["train", "trian.steps=3"],
     ["unknown key 'trian'", "did you mean 'train'"]),
    ("unknown nested key", ["train", "train.stpes=3"], ["train.stpes", "did you mean 'steps'"]),
    ("misspelt env id", ["train", "env.id=frozenlak-v0"], ["frozenlak-v0", "frozenlake-v0"]),
    ("wrong type", ["train", "train.steps=many"], ["train.steps", "many"]),
    ("negative batch", ["train", "train.n_groups=-4"], ["train.n_groups", "-4"]),
    ("zero group size", ["train", "train.group_size=0"], ["train.group_size"]),
    ("group size 1 with a group estimator", ["train", "train.group_size=1",
                                              "train.mini_batch_size=16"],
     ["group_size", "grpo"]),
    ("micro batch above mini batch", ["train", "train.micro_batch_size=128"],
     ["micro_batch_size", "mini_batch_size"]),
    ("bad choice", ["train", "run.device=tpu"], ["run.device", "tpu", "cpu"]),
    ("bad dtype choice", ["train", "model.dtype=fp8"], ["model.dtype", "bfloat16"]),
    ("negative temperature", ["train", "rollout.temperature=-1"], ["rollout.temperature"]),
    ("top_p out of range", ["train", "rollout.top_p=1.5"], ["rollout.top_p"]),
    ("eval seeds not held out", ["train", "env.eval_seed_start=0"],
     ["eval_seed_start", "held out"]),
    ("unknown preset", ["train", "algo.preset=grpoo"], ["grpoo", "grpo"]),
    ("unknown advantage estimator", ["train", "algo.advantage=gea"], ["gea", "gae"]),
    ("unknown policy loss", ["train", "algo.policy_loss=ppoclip"], ["ppoclip", "ppo_clip"]),
    ("critic keys on a critic-free preset", ["train", "critic.shared=true"], ["critic"]),
    ("kl_target without a coefficient", ["train", "algo.kl_target=0.1"], ["kl_target"]),
    ("unknown env kwarg", ["train", "env.kwargs={sise: 4}"], ["sise", "frozenlake-v0"]),
    ("unknown reward function", ["train", "reward.terms=[{name: exact_mach}]"],
     ["exact_mach", "exact_match"]),
    ("reward path that does not import",
     ["train", "reward.terms=[{name: 'no_such_pkg.rewards:score'}]"], ["no_such_pkg"]),
    ("missing model directory", ["train", "model.path=/no/such/model"], ["/no/such/model"]),
    ("override without '='", ["train", "train.steps=3", "steps"], ["steps"]),
    ("timeout of zero", ["train", "env.step_timeout_s=0"], ["env.step_timeout_s"]),
    ("unknown alarm action", ["train", "alarms.on_alarm=explode"],
     ["alarms.on_alarm", "rollback"]),
    ("unknown env for play", ["play", "sokobn-v0"], ["sokobn-v0", "sokoban-v0"]),
    ("resume without a run dir", ["train", "--resume", "/no/such/run"], ["--resume"]),
]

FILE_CASES = [
    ("missing config file", ["train", "{tmp}/absent.yaml"], ["absent.yaml"]),
    ("invalid YAML", ["train", "{bad.yaml}"], ["bad.yaml", "line"]),
    ("unknown key in a file, with its line", ["train", "{typo.yaml}"],
     ["typo.yaml:5", "stpes", "did you mean 'steps'"]),
    ("config that is not a mapping", ["train", "{list.yaml}"], ["list.yaml"]),
    ("unreadable SFT dataset", ["train", "sft.source=jsonl", "sft.path={tmp}/absent.jsonl"],
     ["absent.jsonl"]),
    ("SFT dataset with a bad line", ["train", "sft.source=jsonl", "sft.path={sft_bad.jsonl}"],
     ["sft_bad.jsonl:2"]),
    ("SFT dataset with an unknown role", ["train", "sft.source=jsonl",
                                          "sft.path={sft_role.jsonl}"], ["wizard"]),
    ("dataset without the answer column",
     ["train", "env.id=dataset-v0", "env.kwargs={path: '{qa.jsonl}'}"],
     ["answer", "solution"]),
    ("model directory without a model", ["train", "model.path={not_a_model}"],
     ["not_a_model"]),
    ("tokenizer without a chat template", ["train", "model.path={no_template_model}",
                                           "train.steps=1", "sft.enabled=false",
                                           "eval.before_training=false"],
     ["chat template"]),
]


def run_cli(argv: list[str], capsys) -> tuple[int, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.err


@pytest.mark.parametrize(("case", "argv", "expected"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_clear_error(case, argv, expected, tmp_path, capsys,
                                      monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # nothing may be written before the error
    code, err = run_cli([*argv, f"run.out_dir={tmp_path / 'runs'}"]
                        if argv[0] == "train" and "--resume" not in argv else argv, capsys)
    assert code == 2, err
    assert err.startswith("error: ") and "Traceback" not in err
    for text in expected:
        assert text in err, (case, err)
    assert not (tmp_path / "runs").exists()  # caught before a run directory was made


@pytest.mark.parametrize(("case", "argv", "expected"), FILE_CASES,
                         ids=[c[0] for c in FILE_CASES])
def test_bad_file_is_one_clear_error(case, argv, expected, files, tmp_path, capsys,
                                     monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    for name, path in files.items():
        argv = [a.replace("{" + name + "}", str(path)) for a in argv]
    code, err = run_cli([*argv, f"run.out_dir={tmp_path / 'runs'}"], capsys)
    assert code == 2, err
    assert err.startswith("error: ") and "Traceback" not in err
    for text in expected:
        assert text in err, (case, err)
    assert not (tmp_path / "runs").exists()  # caught before a run directory was made


def test_there_are_at_least_25_distinct_bad_inputs() -> None:
    assert len({c[0] for c in CASES + FILE_CASES}) >= 25
