"""Checks of a run's inputs against the config, before the run dir exists.

:func:`~turnrl.config.checks.validate` checks the config against itself and the
registries; this module checks it against what the run will read (called from
:func:`turnrl.train.setup.check_inputs`):

- :func:`check_model`: the model dir is whole (``config.json`` parses, every safetensors
  file holds all its tensors: :mod:`turnrl.models.files`), ``rollout.max_context_tokens``
  fits the model's ``max_position_embeddings``, and every ``model.lora.target_modules``
  entry names layers of the model (peft's rule: the module name, or its last dotted parts).
  The built-in models are checked without writing them: ``tiny-random`` from
  ``model.tiny.*``, ``tiny`` from its shipped ``config.json`` (and ``model.tiny.*`` must not
  reshape it: :func:`check_base_shape`). On
  ``--resume``, :func:`check_resumed_context` checks the context against the resumed model.
- :func:`check_rewards`: the env serves what the reward terms read: a term that compares
  against a reference answer (``needs_reference``) needs an env whose reset info carries
  ``answer`` (one reset, only when such a term is configured).

- :func:`reply_budget_warning`: the env's oracle replies fit ``rollout.max_new_tokens``
  (a few oracle episodes, tokenised by the model's tokenizer); a warning, not an error.

Each failure is a :class:`~turnrl.config.ConfigError` (or a
:class:`~turnrl.models.policy.ModelLoadError`) naming the key, the file and the fix.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformers import AutoConfig, PretrainedConfig

from turnrl import envs
from turnrl.config import Config, ConfigError
from turnrl.models.base import shipped_base_dir, shipped_shape
from turnrl.models.chat import encode
from turnrl.models.files import adaptable_modules, check_weights, is_adapter_dir, read_config
from turnrl.models.policy import check_model_path
from turnrl.models.tiny import build_tokenizer, llama_config
from turnrl.rewards import CombinedReward
from turnrl.train.checkpoint import latest_checkpoint
from turnrl.wording import did_you_mean


def check_model(cfg: Config) -> None:
    """The model of ``model.path`` (or ``model.tiny``) can be loaded and fits the config."""
    path = cfg.model.path
    if path == "tiny-random":
        config: PretrainedConfig | None = llama_config(len(build_tokenizer()), cfg.model.tiny)
        source = "model.tiny.max_position_embeddings"
    elif path == "tiny":
        check_base_shape(cfg)
        config = read_config(str(shipped_base_dir()))
        source = "max_position_embeddings of the built-in base (model.path=tiny)"
    else:
        check_model_path(path)
        config = read_config(path)
        if config is not None and Path(path).expanduser().is_dir():
            check_weights(path)
        source = f"max_position_embeddings in {path}/config.json"
    if config is None:  # a LoRA checkpoint: its base model was checked when it was trained
        return
    check_context(cfg, config, source)
    if cfg.model.lora.enabled and not is_adapter_dir(path):
        check_lora_targets(cfg, config)


def check_base_shape(cfg: Config) -> None:
    """``model.tiny.*`` shapes the random init; with ``model.path=tiny`` (the pretrained base,
    whose shape is fixed) a changed shape is a mistake, said with the fix."""
    shipped = shipped_shape()
    changed = [key for key in type(shipped).model_fields
               if getattr(cfg.model.tiny, key) != getattr(shipped, key)]
    if changed:
        key = changed[0]
        where = cfg.origin_of(f"model.tiny.{key}")
        raise ConfigError(
            f"{where + ': ' if where else ''}model.tiny.{key}={getattr(cfg.model.tiny, key)} "
            f"shapes the random init (model.path=tiny-random), but model.path=tiny is the "
            f"pretrained base, whose {key} is {getattr(shipped, key)}; set "
            "model.path=tiny-random to train a model of this shape, or leave model.tiny as it is")


def check_resumed_context(cfg: Config, run_dir: Path) -> None:
    """On ``--resume``, ``rollout.max_context_tokens`` (an override may raise it) fits the
    positions of the model the run resumes: its newest checkpoint's ``config.json`` (a LoRA
    checkpoint has none: its base model was checked when the run started). Without a
    checkpoint the run starts over from ``model.path``: :func:`check_model`."""
    checkpoint = latest_checkpoint(run_dir)
    if checkpoint is None:
        check_model(cfg)
        return
    try:  # config.json alone: a damaged checkpoint is named by the checkpoint's own checks
        config = AutoConfig.from_pretrained(str(checkpoint))
    except (OSError, ValueError, KeyError, TypeError):
        return
    check_context(cfg, config, f"max_position_embeddings in {checkpoint}/config.json")


def check_context(cfg: Config, config: PretrainedConfig, source: str) -> None:
    """``rollout.max_context_tokens`` is at most the model's ``max_position_embeddings``."""
    limit = getattr(config, "max_position_embeddings", None)
    budget = cfg.rollout.max_context_tokens
    if isinstance(limit, int) and not isinstance(limit, bool) and budget > limit:
        where = cfg.origin_of("rollout.max_context_tokens")
        raise ConfigError(
            f"{where + ': ' if where else ''}rollout.max_context_tokens: {budget} tokens is "
            f"more than the model's {limit} positions ({source}); set "
            f"rollout.max_context_tokens <= {limit}")


def check_lora_targets(cfg: Config, config: PretrainedConfig) -> None:
    """Every ``model.lora.target_modules`` entry matches a layer LoRA can adapt: a module whose
    full name is the entry or ends with ``.<entry>`` (how peft matches a list)."""
    names = adaptable_modules(config)
    if names is None:
        return
    targets = cfg.model.lora.target_modules
    unmatched = [t for t in targets if not any(n == t or n.endswith("." + t) for n in names)]
    if not unmatched and targets:
        return
    layers = sorted({name.rsplit(".", 1)[-1] for name in names})
    where = cfg.origin_of("model.lora.target_modules")
    model = "the tiny model" if cfg.model.path in ("tiny", "tiny-random") \
        else repr(cfg.model.path)
    what = (f": {unmatched[0]!r} matches no layer of {model}"
            f"{did_you_mean(unmatched[0], layers, otherwise='.')}" if unmatched
            else " is empty, so LoRA would train nothing.")
    raise ConfigError(
        f"{where + ': ' if where else ''}model.lora.target_modules{what} Layers LoRA can "
        f"adapt: {', '.join(layers)} (e.g. model.lora.target_modules=[q_proj,v_proj])")


def check_rewards(cfg: Config, rewards: CombinedReward | None) -> None:
    """The env gives every reward term what it reads: a reference answer in its reset info
    for the terms that compare against one (``RewardTerm.needs_reference``)."""
    needing = [(i, term) for i, term in enumerate(rewards.terms if rewards else ())
               if term.needs_reference]
    if not needing:
        return
    env = envs.make(cfg.env.id, **cfg.env.kwargs)
    try:
        _, info = env.reset(seed=cfg.env.train_seed_start)
    except Exception:  # a broken env fails its episodes, with their own errors, in the run
        return
    finally:
        env.close()
    if isinstance(info, dict) and info.get("answer") is not None:
        return
    index, term = needing[0]
    where = cfg.origin_of("reward.terms")
    raise ConfigError(
        f"{where + ': ' if where else ''}reward.terms[{index}] ({term.name}): compares the "
        f"final answer with a reference, but env {cfg.env.id!r} gives none (its reset info "
        "has no 'answer'); use an env with reference answers (dataset-v0, search-qa-v0), "
        f"give the reference as kwargs: {{answer: ...}}, or drop the term")


ORACLE_EPISODES = 4  # played to measure the oracle's replies


def reply_budget_warning(cfg: Config, tokenizer: Any) -> str | None:
    """A warning when the env's oracle, over :data:`ORACLE_EPISODES` training tasks, writes
    a reply longer than ``rollout.max_new_tokens`` (its tokens plus the end of the turn):
    such replies are cut and cannot succeed. None when they fit, or without an oracle."""
    spec = envs.spec(cfg.env.id)
    if not spec.has_oracle or cfg.agent.entry_point is not None:
        return None
    longest, reply = 0, ""
    for seed in range(cfg.env.train_seed_start, cfg.env.train_seed_start + ORACLE_EPISODES):
        env = envs.make(cfg.env.id, **cfg.env.kwargs)
        try:
            env.reset(seed=seed)
            for _ in range(spec.max_turns or 64):
                action = env.oracle_action()
                if action is None:
                    break
                size = len(encode(tokenizer, action)) + 1  # and the end of the turn
                if size > longest:
                    longest, reply = size, action
                result = env.step(action)
                if (not env.agents) if spec.agents else (result.terminated or result.truncated):
                    break  # a multi-agent env is over when no agent is left
        except Exception:  # a broken env fails its episodes, with their own errors, in the run
            return None
        finally:
            env.close()
    budget = cfg.rollout.max_new_tokens
    if longest <= budget:
        return None
    shown = reply if len(reply) <= 60 else reply[:57] + "..."
    return (f"rollout.max_new_tokens={budget} is shorter than the oracle's replies on "
            f"{cfg.env.id}: {shown!r} takes {longest} tokens with the end of its turn, and a "
            f"reply cut at {budget} cannot succeed; raise it, e.g. "
            f"rollout.max_new_tokens={max(longest, 2 * budget)}")
