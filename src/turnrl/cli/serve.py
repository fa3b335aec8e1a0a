"""``turnrl serve``: a run or model on an OpenAI-compatible endpoint until Ctrl-C."""

from __future__ import annotations

import argparse
import signal
import tempfile
import time
from pathlib import Path

from turnrl.cli.common import AddParser, UsageError, model_target


def add_parser(add: AddParser) -> None:
    p = add("serve", help="serve a run or model on an OpenAI-compatible endpoint",
                       description="Serve /v1/chat/completions, /v1/completions and /v1/models "
                       "on HOST:PORT with the run's newest checkpoint (or a model dir, hub id "
                       "or 'tiny'): for evaluation, demos, or pointing an agent at it. A run "
                       "with separate policies (multi.policies) serves each under its own "
                       "name too.")
    p.add_argument("model", metavar="RUN_OR_MODEL",
                   help="a run dir (its newest checkpoint), a model dir, a hub id, 'tiny' (the "
                   "built-in base) or 'tiny-random'")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0: a free one)")
    p.add_argument("--engine", choices=("hf", "vllm"), default="hf", help="sampling engine")
    p.add_argument("--model-name", help="the model id clients use (default: the dir's name)")
    p.add_argument("--max-tokens", type=int, default=256,
                   help="most new tokens per call (larger requests are clamped)")
    p.add_argument("--max-context-tokens", type=int, default=2048,
                   help="longest prompt plus reply")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:

    from turnrl.agents.protocol import Limits
    from turnrl.agents.server import ModelServer
    from turnrl.config import load_config
    from turnrl.config.checks import validate
    from turnrl.train.checkpoint import POLICIES
    from turnrl.train.setup import check_inputs, load_model, model_source, setup_torch

    target = model_target(args.model)
    cfg = load_config(None, [f"model.path={target}", f"rollout.engine={args.engine}",
                             f"rollout.max_new_tokens={args.max_tokens}",
                             f"rollout.max_context_tokens={args.max_context_tokens}",
                             "sft.enabled=false"])
    validate(cfg)
    check_inputs(cfg, resume=None)
    with tempfile.TemporaryDirectory(prefix="turnrl-serve-") as scratch:
        device = setup_torch(cfg)
        model = load_model(cfg, model_source(cfg, Path(scratch)), device, fresh_lora=False)
        name = args.model_name or Path(str(args.model)).name or "policy"
        folder = Path(str(target)) / POLICIES  # a run's separate policies, served by name
        policies = {p.name: load_model(cfg, p, device, fresh_lora=False)
                    for p in sorted(folder.iterdir()) if p.is_dir()} if folder.is_dir() else {}
        server = ModelServer(model.engine, model.tokenizer, model_name=name,
                             limits=Limits(max_tokens=args.max_tokens),
                             max_context_tokens=args.max_context_tokens, host=args.host,
                             port=args.port, open_access=True,
                             engines={n: m.engine for n, m in policies.items()})
        try:
            server.start()
        except OSError as error:
            raise UsageError(str(error)) from None
        # Ctrl-C and SIGTERM stop it, even where the caller left SIGINT ignored (a shell's
        # background job does)
        previous = {sig: signal.signal(sig, _stop_serving)
                    for sig in (signal.SIGINT, signal.SIGTERM)}
        served = "".join(f", {n!r}" for n in policies)
        print(f"serving {args.model} as {name!r}{served} at {server.url()} (Ctrl-C stops)\n"
              f"  OpenAI SDKs: base_url={server.url()}; Anthropic's SDK: "
              f"base_url={server.url().removesuffix('/v1')}; schema: "
              f"{server.url().removesuffix('/v1')}/openapi.json", flush=True)
        try:  # wake up now and then: a signal the kernel gives another thread (the server's,
            # torch's) only sets a flag, which the main thread reads when it next runs
            while True:
                time.sleep(0.2)
        except KeyboardInterrupt:
            pass
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            server.close()
            for loaded in [model, *policies.values()]:
                loaded.engine.close()
    print("stopped", flush=True)
    return 0


def _stop_serving(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt
