"""Loading policies, tokenizers, LoRA adapters and critics from Hugging Face model dirs.

``model.path`` may be a local Hugging Face causal-LM directory or a hub id; the built-in tiny
model is such a directory too, so there is one loading path for every model.
"""

from __future__ import annotations

import copy
import inspect
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor, nn
from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer, PreTrainedModel
from transformers import PreTrainedTokenizerBase as Tokenizer

from turnrl.config import LoraConfig

if TYPE_CHECKING:
    from peft import PeftModel


class ModelLoadError(ValueError):
    """A model or tokenizer that cannot be used, with the reason and the fix."""


def resolve_device(name: str) -> torch.device:
    """``auto`` is CUDA when available, else CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ModelLoadError("run.device is 'cuda' but no CUDA device is visible; use 'cpu'")
    return torch.device(name)


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    """``auto`` is fp32 on CPU (bf16 matmuls are slow there) and bf16 on GPUs."""
    if name == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def check_model_path(path: str) -> None:
    """A clear error for a local path that is not a model dir (hub ids pass through)."""
    local = Path(path).expanduser()
    looks_local = path.startswith((".", "/", "~")) or local.exists() or path.count("/") > 1
    is_model_dir = (local / "config.json").is_file() or (local / "adapter_config.json").is_file()
    if looks_local and not is_model_dir:
        what = "does not exist" if not local.exists() else "has no config.json"
        raise ModelLoadError(
            f"model.path {path!r} {what}; give a Hugging Face model directory (with "
            "config.json), a hub id, or 'tiny' for the built-in model "
            "(`turnrl init-model DIR` writes one)"
        )


def load_tokenizer(path: str | Path) -> Tokenizer:
    """The model's tokenizer; it must have a chat template. A missing pad token becomes EOS."""
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    if tokenizer.chat_template is None:
        raise ModelLoadError(
            f"the tokenizer in {str(path)!r} has no chat template; turnrl renders "
            "conversations with it. Use a chat/instruct model or add `chat_template` to "
            "its tokenizer_config.json"
        )
    if tokenizer.eos_token_id is None:
        raise ModelLoadError(f"the tokenizer in {str(path)!r} has no eos_token; set one")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def peft_lora_kwargs(lora: LoraConfig) -> dict[str, Any]:
    """``model.lora.*`` as keyword arguments of ``peft.LoraConfig``."""
    return {"r": lora.r, "lora_alpha": lora.alpha, "lora_dropout": lora.dropout,
            "target_modules": list(lora.target_modules)}


def load_policy(path: str | Path, *, dtype: torch.dtype, device: torch.device,
                lora: dict | None = None) -> PreTrainedModel | PeftModel:
    """A causal LM from ``path``; with ``lora`` (peft LoraConfig kwargs) a peft model.

    LoRA keeps the base weights frozen and trains adapters on ``target_modules``. A peft
    adapter dir (a LoRA checkpoint) loads its base model and the adapters, trainable.
    """
    adapter_config = Path(path) / "adapter_config.json"
    if adapter_config.is_file():
        from peft import PeftModel

        base_path = json.loads(adapter_config.read_text())["base_model_name_or_path"]
        base = AutoModelForCausalLM.from_pretrained(base_path, dtype=dtype).to(device)
        return PeftModel.from_pretrained(base, str(path), is_trainable=True)
    model: PreTrainedModel | PeftModel = AutoModelForCausalLM.from_pretrained(
        str(path), dtype=dtype).to(device)
    if lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(task_type="CAUSAL_LM", **lora))
    return model


def share_frozen_weights(source: nn.Module, target: nn.Module) -> int:
    """Point every frozen parameter of ``target`` at ``source``'s parameter of the same name
    when both are frozen and equal, so two models of one base (e.g. separate LoRA adapters
    on it) hold its frozen weights once in memory. Frozen weights are never written in
    place, so sharing them changes no result. Returns how many were shared."""
    own = dict(source.named_parameters())
    shared = 0
    for name, param in target.named_parameters():
        other = own.get(name)
        if other is None or param.requires_grad or other.requires_grad or \
                other.shape != param.shape or other.dtype != param.dtype or \
                other.device != param.device or not torch.equal(other, param):
            continue
        param.data = other.data
        shared += 1
    return shared


def token_logprobs(model: nn.Module, input_ids: Tensor, attention_mask: Tensor, *,
                   temperature: float = 1.0, with_entropy: bool = False
                   ) -> tuple[Tensor, Tensor | None]:
    """Log-prob of every token given its prefix, aligned with ``input_ids``.

    Args:
        input_ids, attention_mask: (B, T), right-padded.
    Returns:
        see :func:`logprobs_from_logits`.
    """
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
    return logprobs_from_logits(logits, input_ids, temperature=temperature,
                                with_entropy=with_entropy)


def logprobs_from_logits(logits: Tensor, input_ids: Tensor, *, temperature: float = 1.0,
                         with_entropy: bool = False) -> tuple[Tensor, Tensor | None]:
    """Logits (B, T, V) of a forward pass over ``input_ids`` (B, T) → log-probs (B, T) with
    ``logprobs[:, t] = log π(x_t | x_<t)`` under ``softmax(logits / temperature)`` and
    ``logprobs[:, 0] = 0``; entropy (B, T) of the distribution each token was drawn from
    (same alignment), if asked."""
    logits = logits[:, :-1].float()
    if temperature not in (0.0, 1.0):
        logits = logits / temperature
    logp_all = torch.log_softmax(logits, -1)
    picked = logp_all.gather(-1, input_ids[:, 1:, None])[..., 0]
    logprobs = torch.nn.functional.pad(picked, (1, 0))
    entropy = None
    if with_entropy:
        ent = -(logp_all.exp() * logp_all).sum(-1)
        entropy = torch.nn.functional.pad(ent, (1, 0))
    return logprobs, entropy


def cache_kwarg(model: nn.Module) -> str:
    """The name of the KV-cache argument of ``model.forward`` (through a peft wrapper):
    ``cache`` in transformers ≥ 5.x, ``past_key_values`` before."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    parameters = inspect.signature(base.forward).parameters
    return "cache" if "cache" in parameters else "past_key_values"


def decoder_body(policy: nn.Module) -> nn.Module:
    """The transformer body under a causal LM's head (through a peft wrapper, LoRA included)."""
    model = policy.get_base_model() if hasattr(policy, "get_base_model") else policy
    return model.base_model


class ValueModel(nn.Module):
    """A critic: a transformer body plus a scalar head.

    The body is a separate copy of the policy's (default) or, with ``shared=True``, the
    policy's own body (a value head on the policy: one model, trained by a joint loss).
    ``forward`` returns values (B, T): ``values[:, t]`` is V(state after ``tokens[: t + 1]``).
    A privileged critic reads an extra per-row prefix (the env's ``privileged_info``) before
    the tokens; the values are still aligned with ``input_ids``.
    """

    HEAD_FILE = "value_head.safetensors"

    def __init__(self, body: nn.Module, *, hidden_size: int, shared: bool = False) -> None:
        super().__init__()
        self.shared = shared
        # a shared body is the policy's: keep it out of this module's parameters and state
        if shared:
            object.__setattr__(self, "body", body)
        else:
            self.body = body
        self.head = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    @classmethod
    def from_pretrained(cls, path: str | Path, *, dtype: torch.dtype,
                        device: torch.device) -> ValueModel:
        body = AutoModel.from_pretrained(str(path), dtype=dtype)
        critic = cls(body, hidden_size=body.config.hidden_size).to(device)
        critic.load_head(path)
        return critic

    @classmethod
    def from_policy(cls, policy: nn.Module, *, source: str | Path | None = None,
                    shared: bool = False) -> ValueModel:
        """A critic whose body is a copy of the policy's body, or the body itself if ``shared``.

        With ``source`` (a checkpoint dir) holding ``critic/``, that critic is loaded instead
        (for a shared critic: only its head).
        """
        param = next(policy.parameters())
        saved = Path(source) / "critic" if source is not None else None
        hidden_size = decoder_body(policy).config.hidden_size
        if shared:
            critic = cls(decoder_body(policy), hidden_size=hidden_size, shared=True)
            critic.head.to(device=param.device)
            if saved is not None and saved.is_dir():
                critic.load_head(saved)
            return critic
        if saved is not None and saved.is_dir():
            return cls.from_pretrained(saved, dtype=param.dtype, device=param.device)
        unwrapped = copy.deepcopy(policy)
        if hasattr(unwrapped, "merge_and_unload"):  # a peft policy: fold the adapters in
            unwrapped = unwrapped.merge_and_unload()
        body = unwrapped.base_model.requires_grad_(True)
        return cls(body, hidden_size=hidden_size).to(device=param.device)

    def values_from_hidden(self, hidden: Tensor) -> Tensor:
        """(B, T, H) final hidden states → (B, T) float values."""
        return self.head(hidden.to(self.head.weight.dtype))[..., 0].float()

    def forward(self, input_ids: Tensor, attention_mask: Tensor, *,
                prefix_ids: Tensor | None = None, prefix_mask: Tensor | None = None,
                detach_body: bool = False) -> Tensor:
        """Values (B, T) of ``input_ids``; ``prefix_ids``/``prefix_mask`` (B, P), left-padded,
        are read first (positions count real tokens only, so padding never shifts them).
        ``detach_body`` trains the head alone."""
        width = input_ids.shape[1]
        if prefix_ids is not None:
            assert prefix_mask is not None
            input_ids = torch.cat([prefix_ids, input_ids], dim=1)
            attention_mask = torch.cat([prefix_mask.to(attention_mask.dtype), attention_mask],
                                       dim=1)
        position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
        with torch.set_grad_enabled(torch.is_grad_enabled() and not detach_body):
            hidden = self.body(input_ids=input_ids, attention_mask=attention_mask,
                               position_ids=position_ids).last_hidden_state
        return self.values_from_hidden(hidden[:, -width:])

    def load_head(self, path: str | Path) -> None:
        head_file = Path(path) / self.HEAD_FILE
        if head_file.is_file():
            self.head.load_state_dict(load_file(str(head_file)))

    def save_pretrained(self, path: str | Path) -> None:
        """The body (unless shared: it is saved as the policy) and ``value_head.safetensors``."""
        Path(path).mkdir(parents=True, exist_ok=True)
        if not self.shared:
            self.body.save_pretrained(str(path))
        save_file({k: v.contiguous() for k, v in self.head.state_dict().items()},
                  str(Path(path) / self.HEAD_FILE))
