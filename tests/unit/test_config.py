"""The config tree: defaults, YAML + overrides, round trip, and the user-facing errors."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from turnrl.config import (
    Config,
    ConfigError,
    config_help,
    dump_config,
    load_config,
    save_config,
    validate_names,
)

REPO = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str, name: str = "x.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def error_of(path: Path | None, overrides: tuple[str, ...] = ()) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_config(path, overrides)
    return info.value


# ---------------------------------------------------------------- defaults and round trip


def test_defaults_are_valid_and_match_the_brief() -> None:
    cfg = Config()
    assert cfg == load_config(None)
    assert cfg.model.path == "tiny"
    assert cfg.env.id == "frozenlake-v0"
    assert cfg.algo.preset == "grpo" and cfg.algo.advantage is None
    assert cfg.sft.source == "oracle" and cfg.sft.random_action_prob == 0.5
    assert cfg.train.mini_batch_size <= cfg.train.n_groups * cfg.train.group_size
    assert cfg.model.lora.target_modules == ["q_proj", "k_proj", "v_proj", "o_proj"]
    assert cfg.eval.pass_k == [1]


def test_default_yaml_spells_out_the_defaults() -> None:
    # every key as in Config(), except the default job's sparser FrozenLake holes
    expected = Config()
    expected.env.kwargs = {"hole_prob": 0.1}
    assert load_config(REPO / "configs" / "default.yaml") == expected


def test_yaml_and_overrides_round_trip(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        run:
          name: exp1
        train:
          steps: 5
          lr: 1.0e-4
        env:
          kwargs: {size: 4}
        """,
    )
    cfg = load_config(
        path,
        [
            "train.group_size=4",
            "train.mini_batch_size=32",
            "eval.samples_per_task=4",
            "eval.pass_k=[1,2,4]",
            "algo.adv_kwargs.gamma=0.9",
            "algo.kl_coef=0.01",
        ],
    )
    assert cfg.run.name == "exp1" and cfg.train.steps == 5 and cfg.train.lr == 1e-4
    assert cfg.env.kwargs == {"size": 4}
    assert cfg.algo.adv_kwargs == {"gamma": 0.9}
    saved = tmp_path / "out" / "config.yaml"
    save_config(cfg, saved)
    assert saved.read_text() == dump_config(cfg)
    assert load_config(saved) == cfg
    assert [p.name for p in saved.parent.iterdir()] == ["config.yaml"]  # no temp file left


def test_dump_keeps_declaration_order() -> None:
    top = [line.split(":")[0] for line in dump_config(Config()).splitlines() if line[:1].isalpha()]
    assert top == ["run", "model", "env", "agent", "multi", "rollout", "sft", "reward", "algo",
                   "critic", "train", "eval", "alarms", "distributed", "log"]


def test_overrides_parse_types() -> None:
    cfg = load_config(
        None,
        [
            "train.lr=1e-4",  # YAML 1.1 reads 1e-4 as a string; pydantic makes it a float
            "log.wandb=false",
            "eval.samples_per_task=2",
            "eval.pass_k=[1,2]",
            "env.kwargs.max_turns=12",
            "run.name=2024",  # a str field keeps the text
            "sft.path=demos.jsonl",
            "train.norm_len=null",
        ],
    )
    assert cfg.train.lr == pytest.approx(1e-4)
    assert cfg.log.wandb is False
    assert cfg.eval.pass_k == [1, 2]
    assert cfg.env.kwargs == {"max_turns": 12}
    assert cfg.run.name == "2024"
    assert cfg.sft.path == "demos.jsonl"
    assert cfg.train.norm_len is None


def test_later_override_wins(tmp_path: Path) -> None:
    path = write(tmp_path, "train:\n  steps: 3\n")
    assert load_config(path, ["train.steps=4", "train.steps=5"]).train.steps == 5


def test_empty_file_gives_defaults(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, "# nothing\n")) == Config()


# ---------------------------------------------------------------- errors from YAML


def test_bound_error_names_file_line_key_and_value(tmp_path: Path) -> None:
    path = write(tmp_path, "run:\n  seed: 1\ntrain:\n  steps: 3\n  group_size: 0\n")
    err = error_of(path)
    assert str(err) == f"{path}:5: train.group_size: must be >= 1, got 0"
    assert err.issues[0].key == "train.group_size" and err.issues[0].line == 5


def test_unknown_top_level_key(tmp_path: Path) -> None:
    path = write(tmp_path, "run:\n  seed: 1\n\ntrian:\n  steps: 3\n")
    message = str(error_of(path))
    assert message.startswith(f"{path}:4: unknown key 'trian' at top level; did you mean 'train'?")
    assert ("Valid keys: agent, alarms, algo, critic, distributed, env, eval, log, model, "
            "multi, reward, rollout, run, sft, train" in message)


def test_unknown_nested_key(tmp_path: Path) -> None:
    path = write(tmp_path, "train:\n  steps: 3\n  lrr: 0.1\n")
    message = str(error_of(path))
    assert message.startswith(f"{path}:3: unknown key 'lrr' in 'train'; did you mean 'lr'?")
    assert "Valid keys:" in message and "micro_batch_size" in message


def test_wrong_type(tmp_path: Path) -> None:
    path = write(tmp_path, "train:\n  steps: ten\n")
    assert str(error_of(path)) == f"{path}:2: train.steps: expected an integer, got 'ten' (str)"


def test_wrong_choice_lists_valid_choices(tmp_path: Path) -> None:
    path = write(tmp_path, "sft:\n  source: jsnl\n")
    message = str(error_of(path))
    assert message.startswith(f"{path}:2: sft.source: unknown value 'jsnl'; did you mean 'jsonl'?")
    assert "Valid choices: oracle, jsonl" in message


def test_section_that_is_not_a_mapping(tmp_path: Path) -> None:
    path = write(tmp_path, "run:\n  seed: 1\ntrain: 5\n")
    assert str(error_of(path)).startswith(f"{path}:3: train: expected a mapping")


def test_every_problem_is_reported_in_file_order(tmp_path: Path) -> None:
    path = write(tmp_path, "train:\n  steps: -1\n  lr: 0\nrun:\n  threads: 0\n")
    err = error_of(path)
    assert [issue.line for issue in err.issues] == [2, 3, 5]
    assert [issue.key for issue in err.issues] == ["train.steps", "train.lr", "run.threads"]
    assert len(str(err).splitlines()) == 3


def test_jsonl_source_needs_a_path(tmp_path: Path) -> None:
    path = write(tmp_path, "sft:\n  enabled: true\n  source: jsonl\n")
    message = str(error_of(path))
    assert message.startswith(f"{path}:3: sft.path: required when sft.source is 'jsonl'")
    assert "set sft.path" in message
    assert load_config(path, ["sft.path=demos.jsonl"]).sft.path == "demos.jsonl"


def test_pass_k_larger_than_samples_per_task(tmp_path: Path) -> None:
    path = write(tmp_path, "eval:\n  samples_per_task: 2\n  pass_k: [1, 4]\n")
    err = error_of(path)
    message = str(err)
    assert message.startswith(f"{path}:3: eval.pass_k: pass@4 needs at least 4 samples")
    assert "raise eval.samples_per_task to >= 4" in message
    assert err.issues[0].key == "eval.pass_k"


def test_micro_batch_larger_than_mini_batch(tmp_path: Path) -> None:
    path = write(tmp_path, "train:\n  mini_batch_size: 8\n  micro_batch_size: 16\n")
    message = str(error_of(path))
    assert message.startswith(
        f"{path}:3: train.micro_batch_size: must be <= train.mini_batch_size (8), got 16"
    )
    assert "lower micro_batch_size or raise mini_batch_size" in message


def test_mini_batch_larger_than_a_step(tmp_path: Path) -> None:
    path = write(tmp_path, "train:\n  n_groups: 2\n  group_size: 4\n  mini_batch_size: 64\n")
    message = str(error_of(path))
    assert message.startswith(f"{path}:4: train.mini_batch_size: must be <= train.n_groups")
    assert "= 8 trajectories per step, got 64" in message


@pytest.mark.parametrize(("overrides", "sizes"), [
    ([], (64, 16)),  # the default job: 128 trajectories a step
    (["train.n_groups=8", "train.group_size=4"], (32, 16)),
    (["train.n_groups=2", "train.group_size=4"], (8, 8)),
    (["train.n_groups=2", "train.group_size=4", "train.micro_batch_size=2"], (8, 2)),
    (["train.n_groups=64", "train.mini_batch_size=256"], (256, 16)),
])
def test_batch_sizes_not_set_follow_the_batch(overrides: list[str], sizes: tuple) -> None:
    train = load_config(REPO / "configs" / "default.yaml", overrides).train
    assert (train.mini_batch_size, train.micro_batch_size) == sizes


def test_a_conflict_names_what_the_user_typed_not_the_default_file(tmp_path: Path) -> None:
    path = write(tmp_path, "train:\n  mini_batch_size: 64\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path, ["train.n_groups=2"])
    assert str(caught.value).startswith("override 'train.n_groups=2': train.mini_batch_size: "
                                        "must be <= train.n_groups")


def test_tiny_heads_must_divide(tmp_path: Path) -> None:
    path = write(tmp_path, "model:\n  tiny:\n    num_heads: 3\n")
    message = str(error_of(path))
    assert message.startswith(f"{path}:3: model.tiny.hidden_size: must be divisible by")
    message = str(error_of(None, ("model.tiny.num_kv_heads=3",)))
    assert "model.tiny.num_kv_heads: must divide model.tiny.num_heads (4), got 3" in message


def test_eval_seeds_must_be_held_out(tmp_path: Path) -> None:
    path = write(tmp_path, "env:\n  train_seed_start: 10\n  eval_seed_start: 10\n")
    assert str(error_of(path)).startswith(f"{path}:3: env.eval_seed_start: must be > ")


# ---------------------------------------------------------------- file-level errors


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    assert str(error_of(path)) == f"{path}: config file not found; check the path " + (
        "(try configs/default.yaml)"
    )


def test_invalid_yaml_names_the_parser_line(tmp_path: Path) -> None:
    path = write(tmp_path, "train:\n  steps: 3\n  pass_k: [1\n  lr: 2\n")
    message = str(error_of(path))
    assert message.startswith(f"{path}:4: invalid YAML:")


def test_top_level_not_a_mapping(tmp_path: Path) -> None:
    path = write(tmp_path, "- 1\n- 2\n")
    assert str(error_of(path)).startswith(f"{path}:1: the top level must be a mapping")


def test_duplicate_key(tmp_path: Path) -> None:
    path = write(tmp_path, "train:\n  lr: 1.0\n  lr: 2.0\n")
    assert str(error_of(path)) == f"{path}:3: train.lr: duplicate key (first at line 2); " + (
        "keep only one"
    )


# ---------------------------------------------------------------- errors from overrides


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("train", "override 'train': expected key.sub=value"),
        ("=3", "override '=3': expected key.sub=value"),
        (
            "trian.steps=3",
            "override 'trian.steps=3': unknown key 'trian' at top level; did you mean 'train'?",
        ),
        ("train.lrr=1", "override 'train.lrr=1': unknown key 'lrr' in 'train'; did you mean 'lr'?"),
        ("train.lr.x=1", "override 'train.lr.x=1': 'train.lr' is a value, not a section"),
        (
            "train.group_size=0",
            "override 'train.group_size=0': train.group_size: must be >= 1, got 0",
        ),
        ("train.lr=[1", "override 'train.lr=[1': train.lr: cannot parse value '[1'"),
    ],
)
def test_override_errors_name_the_override(override: str, expected: str) -> None:
    assert str(error_of(None, (override,))).startswith(expected)


def test_override_beats_the_file_in_error_location(tmp_path: Path) -> None:
    path = write(tmp_path, "train:\n  group_size: 4\n")
    message = str(error_of(path, ("train.group_size=0",)))
    assert message == "override 'train.group_size=0': train.group_size: must be >= 1, got 0"


def test_free_form_kwargs_accept_any_key() -> None:
    cfg = load_config(None, ["env.kwargs.map.size=4", "algo.loss_kwargs.clip_eps=0.2"])
    assert cfg.env.kwargs == {"map": {"size": 4}}
    assert cfg.algo.loss_kwargs == {"clip_eps": 0.2}


# ---------------------------------------------------------------- registry names


CHOICES = {
    "algo.preset": ["dapo", "dr_grpo", "grpo", "ppo", "rloo"],
    "algo.advantage": ["gae", "grpo", "rloo"],
    "algo.loss_agg": ["seq_mean_token_mean", "token_mean"],
    "env.id": ["frozenlake-v0", "wordle-v0"],
}


def test_validate_names_accepts_known_and_unset_names() -> None:
    validate_names(Config(), CHOICES)  # advantage/loss_agg are None: the preset decides


def test_validate_names_did_you_mean(tmp_path: Path) -> None:
    path = write(tmp_path, "env:\n  id: frozenlake-v0\nalgo:\n  preset: gpro\n")
    cfg = load_config(path, ["env.id=frozenlak-v0"])
    with pytest.raises(ConfigError) as info:
        validate_names(cfg, CHOICES)
    first, second = str(info.value).splitlines()
    assert first.startswith(f"{path}:4: algo.preset: unknown preset 'gpro'; did you mean 'grpo'?")
    assert "Valid choices: dapo, dr_grpo, grpo, ppo, rloo" in first
    assert second.startswith("override 'env.id=frozenlak-v0': env.id: unknown env 'frozenlak-v0'")
    assert "did you mean 'frozenlake-v0'?" in second


def test_validate_names_rejects_a_non_key() -> None:
    with pytest.raises(ValueError, match="not a config key"):
        validate_names(Config(), {"algo.nope": ["x"]})


def test_origin_of() -> None:
    cfg = load_config(None, ["train.lr=0.1"])
    assert cfg.origin_of("train.lr") == "override 'train.lr=0.1'"
    assert cfg.origin_of("train.steps") is None


# ---------------------------------------------------------------- help


def _leaf_keys(data: dict, prefix: str = "") -> list[str]:
    keys = []
    for name, value in data.items():
        if isinstance(value, dict) and name not in ("kwargs",):
            keys += _leaf_keys(value, f"{prefix}{name}.")
        else:
            keys.append(f"{prefix}{name}")
    return keys


def test_help_lists_every_key_with_type_default_and_description() -> None:
    text = config_help()
    for key in _leaf_keys(Config().model_dump()):
        assert f"  {key} (" in text, key
    assert "  train.group_size (int, >= 1) = 8\n      Episodes sampled per task." in text
    assert "  sft.source (oracle|jsonl) = oracle" in text
    for name, info in Config.model_fields.items():
        assert info.description, name


# ---------------------------------------------------------------- strict numbers, run names


def _number_keys(model: type = Config, prefix: str = "") -> list[tuple[str, str]]:
    """``(dotted key, "scalar" | "list")`` of every int/float key of the tree (algo too)."""
    from pydantic import BaseModel

    from turnrl.config.sections import list_item, number_kind

    keys = []
    for name, info in model.model_fields.items():
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            keys += _number_keys(annotation, f"{prefix}{name}.")
        elif number_kind(annotation):
            keys.append((f"{prefix}{name}", "scalar"))
        elif number_kind(list_item(annotation)):
            keys.append((f"{prefix}{name}", "list"))
    return keys


def test_every_number_key_is_found() -> None:
    keys = dict(_number_keys())
    assert {"train.steps", "train.lr", "run.seed", "model.tiny.hidden_size", "algo.kl_coef",
            "algo.overlong_cache", "distributed.num_cpus", "env.step_timeout_s"} <= set(keys)
    assert keys["eval.pass_k"] == "list"
    assert "log.wandb" not in keys and "algo.bootstrap_truncated" not in keys  # bools
    assert "env.kwargs" not in keys  # free form: the env checks its own arguments


@pytest.mark.parametrize(("key", "shape"), _number_keys())
def test_a_boolean_is_never_a_number(key: str, shape: str) -> None:
    # pydantic alone reads true as 1: train.steps=true would run one step
    value = "[true]" if shape == "list" else "true"
    error = error_of(None, (f"{key}={value}",))
    assert f"{key}: expected " in str(error) and "true" in str(error)
    assert len(error.issues) == 1 and error.issues[0].key == key


def test_numbers_as_yaml_and_overrides_give_them_still_load(tmp_path: Path) -> None:
    path = write(tmp_path, """
        train:
          lr: 1e-4
          steps: '3'
          max_grad_norm: 1
        eval:
          pass_k: [1, 2]
          samples_per_task: 2
        """)
    cfg = load_config(path, ["run.seed=7", "algo.kl_coef=0", "model.tiny.hidden_size=64"])
    assert cfg.train.lr == 1e-4 and cfg.train.steps == 3 and cfg.train.max_grad_norm == 1.0
    assert cfg.eval.pass_k == [1, 2] and cfg.run.seed == 7 and cfg.algo.kl_coef == 0.0
    assert load_config(None, ["algo.bootstrap_truncated=true"]).algo.bootstrap_truncated


def test_a_boolean_in_yaml_names_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, """
        train:
          steps: yes
        """)
    assert str(error_of(path)).startswith(f"{path}:2: train.steps: expected an integer, got true")


@pytest.mark.parametrize("name", ["../../x", "a/b", "a\\b", ".hidden", "..", "", " "])
def test_run_name_is_a_name_not_a_path(name: str) -> None:
    error = error_of(None, (f"run.name='{name}'",))
    assert "run.name: must be a plain name" in str(error) and "run.out_dir" in str(error)


@pytest.mark.parametrize("name", ["exp1", "2024", "lr3e-4_seed-1", "a.b", "gym:CartPole-v1"])
def test_run_names_that_are_names_load(name: str) -> None:
    assert load_config(None, [f"run.name={name}"]).run.name == name


def test_switching_env_drops_the_files_kwargs_of_the_other_env() -> None:
    default = REPO / "configs" / "default.yaml"
    assert load_config(default).env.kwargs == {"hole_prob": 0.1}  # frozenlake's
    assert load_config(default, ["env.id=arithmetic-v0"]).env.kwargs == {}
    assert load_config(default, ["env.id=arithmetic-v0",
                                 "env.kwargs.max_value=3"]).env.kwargs == {"max_value": 3}
    assert load_config(default, ["env.id=frozenlake-v0"]).env.kwargs == {"hole_prob": 0.1}
    assert load_config(default, ["env.kwargs={hole_prob: 0.3}"]).env.kwargs == {
        "hole_prob": 0.3}


def test_evaluation_kwargs_take_the_envs_defaults_then_the_users() -> None:
    from turnrl.config.checks import env_kwargs

    dataset = load_config(None, ["env.id=dataset-v0"])
    assert env_kwargs(dataset) == {} and env_kwargs(dataset, evaluation=True) == {
        "subset": "test"}  # dataset-v0's held-out rows (its spec's eval_kwargs)
    mine = load_config(None, ["env.id=dataset-v0", "env.kwargs.subset=all"])
    assert env_kwargs(mine, evaluation=True) == {"subset": "all"}  # the user's choice stands
    other = load_config(None, ["env.id=dataset-v0", "env.eval_kwargs={test_fraction: 0.5}"])
    assert env_kwargs(other, evaluation=True) == {"subset": "test", "test_fraction": 0.5}
    assert env_kwargs(load_config(None), evaluation=True) == {}  # frozenlake: none


def test_bad_evaluation_kwargs_are_config_errors() -> None:
    with pytest.raises(ConfigError, match=r"^override 'env.eval_kwargs=\{subset: dev\}': "
                       r"env.eval_kwargs for 'dataset-v0' \(held-out evaluation\): .*'dev'"):
        validate_env(load_config(None, ["env.id=dataset-v0", "env.eval_kwargs={subset: dev}"]))


def validate_env(cfg: Config) -> None:
    from turnrl.config.checks import check_env_kwargs

    check_env_kwargs(cfg)


def test_rollout_max_turns_is_a_cap_or_a_curriculum():
    from turnrl.config import load_config

    assert load_config(None).rollout.turn_cap(5) is None
    assert load_config(None, ["rollout.max_turns=4"]).rollout.turn_cap(99) == 4
    rollout = load_config(None, ["rollout.max_turns=[[0, 4], [10, 8], [20, 16]]"]).rollout
    assert [rollout.turn_cap(s) for s in (0, 9, 10, 19, 20, 500)] == [4, 4, 8, 8, 16, 16]


@pytest.mark.parametrize(("value", "expected"), [
    ("0", "must be >= 1"),
    ("[[1, 4]]", "steps increasing from 0"),
    ("[[0, 4], [5, 8], [5, 9]]", "steps increasing from 0"),
    ("[[0, 0]]", "every cap must be >= 1"),
])
def test_bad_rollout_max_turns_says_what_it_takes(value, expected):
    from turnrl.config import ConfigError, load_config

    with pytest.raises(ConfigError, match=re.escape(expected)) as error:
        load_config(None, [f"rollout.max_turns={value}"])
    assert "rollout.max_turns" in str(error.value)


def test_a_curriculum_needs_the_local_backend():
    from turnrl.config import ConfigError, load_config
    from turnrl.config.checks import check_distributed

    cfg = load_config(None, ["rollout.max_turns=[[0, 4], [10, 8]]", "distributed.backend=ray"])
    with pytest.raises(ConfigError, match=re.escape("needs distributed.backend=none")):
        check_distributed(cfg)
