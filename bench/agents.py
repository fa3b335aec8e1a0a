"""``guess-v0`` as an env vs as an agent program through the endpoint: episodes/s.

The same game on the same tiny model, the same tasks and the same sampling, played two ways:

- **env**: turnrl's own runner (``turnrl.rollout.runner.Runner`` with an ``HFEngine``) plays
  ``guess-v0`` episodes;
- **agent**: the guess agent program (``examples/agents/guess_agent.py``, the plain
  ``openai`` SDK holding a ``guess-v0`` env as its user simulator) plays them through the
  OpenAI-compatible endpoint (``AgentRunner`` + ``ModelServer`` over its own ``HFEngine``),
  in ``--workers`` worker processes as ``agent.workers`` runs it (0: threads of this
  process): every turn is an HTTP request, a JSON reply and a token-exact capture.

Each round plays ``--groups`` tasks x ``--group-size`` episodes both ways, in turn (the
order flips every round, so drifts of the machine hit both), ``--repeats`` rounds; medians
are reported, and the ratio agent / env of episodes/s and of turns/s (target >= 0.8x: the
endpoint must not be the bottleneck). The model is the default tiny model after a quick SFT
on the env's oracle transcripts (``--sft-epochs``; 0 keeps the random model, whose replies
are invalid and run to ``--reply-tokens`` tokens, so every game lasts its 10 turns).

Both ways do the same engine work (the same prompts, cached and prefilled tokens); what
differs is each call's Python work (the ``openai`` client building the request and reading
the reply, HTTP, the capture) and its latency: a request that arrives while the engine
steps joins a later step, so the engine runs more, smaller prefills. A tiny model's turn
takes milliseconds, so that work weighs here; a real model's turn takes far longer.

    python bench/agents.py                                     # 16 x 4 episodes, 5 rounds
    python bench/agents.py --groups 8 --repeats 3            # quicker (SFT: ~35 s idle)

Then one more agent round plays while a client streams calls beside it: the time to each
one's first token against the engine's step period at that load (``streaming_probe``;
target: at most 2 decoding steps). ``bench/streaming.py`` measures it for a lone request.

Writes ``bench/results/agents.json`` and ``agents.md``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import RESULTS, ROOT, write_results

sys.path.insert(0, str(ROOT / "examples" / "agents"))


def sft_model(args: argparse.Namespace, model, tokenizer) -> dict:
    """Fine-tune ``model`` in place on the guess oracle's transcripts; what was done."""
    import guess_agent

    from turnrl.train import sft

    conversations = guess_agent.oracle_transcripts(range(args.sft_conversations),
                                                   random_action_prob=0.0)
    trajectories = sft.conversations_to_trajectories(tokenizer, conversations)
    start, loss = time.perf_counter(), float("nan")
    for metrics in sft.sft_steps(model, trajectories, pad_token_id=tokenizer.pad_token_id,
                                 epochs=args.sft_epochs, batch_size=16, lr=args.sft_lr,
                                 max_grad_norm=1.0):
        loss = metrics["sft/loss"]
    model.eval()
    return {"conversations": len(conversations), "epochs": args.sft_epochs,
            "final_loss": loss, "wall_s": time.perf_counter() - start}


def summary(trajectories, episodes: int, wall: float) -> dict:
    """Throughput and what was played (the agent's segments are counted once per run)."""
    turns = sum(t.num_turns for t in trajectories)
    return {"wall_s": wall, "episodes": episodes, "episodes_per_s": episodes / wall,
            "turns_per_s": turns / wall, "mean_turns": turns / episodes,
            "success": sum(bool(t.success) for t in trajectories) / len(trajectories),
            "sampled_tokens_per_episode": sum(sum(t.loss_mask) for t in trajectories)
            / episodes,
            "failed": sum(t.error is not None for t in trajectories)}


def cpu_seconds(pids: list[int]) -> tuple[float, float]:
    """CPU seconds used so far by this process and by the worker processes ``pids``."""
    ticks = os.sysconf("SC_CLK_TCK")
    workers = 0.0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        workers += (int(fields[11]) + int(fields[12])) / ticks  # utime + stime
    own = os.times()
    return own.user + own.system, workers


def work(stats: dict, before: dict, cpu: tuple, cpu_after: tuple) -> dict:
    """The engine's steps over a round and the CPU seconds each process spent in it."""
    return {"prefills": stats["prefills"] - before["prefills"],
            "decode_steps": stats["decode_steps"] - before["decode_steps"],
            "cpu_s_trainer": cpu_after[0] - cpu[0], "cpu_s_workers": cpu_after[1] - cpu[1]}


def measure(args: argparse.Namespace) -> dict:
    import guess_agent
    import torch

    from turnrl import envs
    from turnrl.agents.protocol import Limits
    from turnrl.agents.runner import AgentRunner
    from turnrl.agents.server import ModelServer
    from turnrl.agents.workers import AgentWorkers
    from turnrl.models.policy import load_policy, load_tokenizer
    from turnrl.models.tiny import init_tiny_model
    from turnrl.rollout.engine import SamplingParams
    from turnrl.rollout.hf import HFEngine
    from turnrl.rollout.runner import Runner

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    path = init_tiny_model(Path(tempfile.mkdtemp(prefix="turnrl-agents-")) / "tiny")
    tokenizer = load_tokenizer(path)
    model = load_policy(path, dtype=torch.float32, device=torch.device("cpu"))
    trained = sft_model(args, model, tokenizer) if args.sft_epochs > 0 else None
    model.eval()

    def engine() -> HFEngine:
        return HFEngine(model, eos_token_id=tokenizer.eos_token_id,
                        pad_token_id=tokenizer.pad_token_id, seed=0)

    seeds = list(range(args.seed_start, args.seed_start + args.groups))
    episodes = args.groups * args.group_size
    make_env = functools.partial(envs.make, guess_agent.ENV_ID)
    env_runner = Runner(engine(), tokenizer,
                        SamplingParams(max_new_tokens=args.reply_tokens, temperature=1.0,
                                       top_p=1.0),
                        max_context_tokens=args.max_context_tokens)
    server = ModelServer(engine(), tokenizer, model_name=guess_agent.MODEL,
                         limits=Limits(max_tokens=args.reply_tokens),
                         max_context_tokens=args.max_context_tokens, max_calls=16).start()
    workers = (AgentWorkers("guess_agent:solve", args.workers) if args.workers > 0
               else None)
    agent_runner = AgentRunner(server, guess_agent.solve, guess_agent.make_tasks(seeds),
                               name="guess-agent", timeout_s=600, sampling=(1.0, 1.0),
                               workers=workers)
    play = {"env": lambda n: env_runner.collect(make_env, seeds[:n], args.group_size),
            "agent": lambda n: agent_runner.collect(None, list(range(n)), args.group_size)}
    samples: dict[str, list[dict]] = {"env": [], "agent": []}
    streamed: dict = {}
    try:
        for name in play:  # warm-up: the first batches, the HTTP client, the threads
            play[name](min(2, args.groups))
        engines = {"env": env_runner.engine, "agent": server.engine}
        pids = [w.process.pid for w in workers._workers] if workers is not None else []
        for round_ in range(args.repeats):
            for name in (("env", "agent") if round_ % 2 == 0 else ("agent", "env")):
                before, cpu = dict(engines[name].stats), cpu_seconds(pids)
                start = time.perf_counter()
                trajectories = play[name](args.groups)
                samples[name].append({**summary(trajectories, episodes,
                                                time.perf_counter() - start),
                                      **work(engines[name].stats, before, cpu,
                                             cpu_seconds(pids))})
                print(json.dumps({"round": round_, "mode": name, **samples[name][-1]}),
                      flush=True)
        streamed = streaming_probe(server, lambda: play["agent"](args.groups), args.probes) \
            if args.probes > 0 else {}
        print(json.dumps({"streaming": streamed}), flush=True)
    finally:
        agent_runner.close()
        if workers is not None:
            workers.close()
        server.close()
    modes = {name: {key: statistics.median(s[key] for s in runs) for key in runs[0]}
             for name, runs in samples.items()}
    return {"machine": platform.processor() or platform.machine(), "threads": args.threads,
            "torch": torch.__version__, "model": "tiny (default shape)",
            "workers": args.workers,
            "sft": trained, "groups": args.groups, "group_size": args.group_size,
            "reply_tokens": args.reply_tokens, "repeats": args.repeats, "modes": modes,
            "rounds": samples,
            "agent_over_env_episodes_per_s": modes["agent"]["episodes_per_s"]
            / modes["env"]["episodes_per_s"],
            "agent_over_env_turns_per_s": modes["agent"]["turns_per_s"]
            / modes["env"]["turns_per_s"], "streaming": streamed}


def streaming_probe(server, play_round, probes: int) -> dict:
    """Time to the first streamed token under load: while one more agent round plays, a
    client streams ``probes`` calls one after another (raw HTTP, each in a session of its
    own, hanging up after the first content piece: the rest is cancelled), each timed from
    sending to that piece; the engine's step period over the round (its wall time over its
    prefill and decoding steps) is one decoding step at that load. Target: median TTFT at
    most 2 steps."""
    import threading

    import guess_agent
    import httpx

    engine, ttft, done = server.engine, [], threading.Event()

    def probe() -> None:
        with httpx.Client(timeout=60) as http:
            for i in range(probes):
                if done.is_set():
                    return
                key, _ = server.open_session()
                body = {"model": guess_agent.MODEL, "stream": True, "max_tokens": 8, "seed": i,
                        "messages": [{"role": "user", "content": "Guess my number (1-100)."}]}
                start = time.perf_counter()
                with http.stream("POST", server.url(key) + "/chat/completions",
                                 json=body) as reply:
                    for line in reply.iter_lines():
                        if line.startswith("data: {") and '"content":"' in line \
                                and '"content":""' not in line:
                            ttft.append(time.perf_counter() - start)
                            break
                server.close_session(key)
                time.sleep(0.02)

    before = dict(engine.stats)
    thread = threading.Thread(target=probe, daemon=True)
    start = time.perf_counter()
    thread.start()
    play_round()
    wall = time.perf_counter() - start
    done.set()
    thread.join(60)
    steps = sum(engine.stats[k] - before[k] for k in ("decode_steps", "prefills"))
    step_s = wall / max(steps, 1)
    median = statistics.median(ttft) if ttft else float("nan")
    return {"probes": len(ttft), "ttft_s_median": median, "step_s": step_s,
            "ttft_over_step": median / step_s, "engine_steps": steps, "round_s": wall}


def markdown(result: dict) -> str:
    sft = result["sft"]
    model = (f"the default tiny model after SFT on {sft['conversations']} oracle transcripts "
             f"({sft['epochs']} epochs, final loss {sft['final_loss']:.3f})" if sft
             else "the default tiny model, random (untrained)")
    lines = [f"`guess-v0`, {result['groups']} tasks x {result['group_size']} episodes per "
             f"round, replies up to {result['reply_tokens']} tokens, temperature 1; {model}; "
             f"torch {result['torch']}, {result['threads']} threads; the agent in "
             f"{result['workers'] or 'no'} worker process(es) (agent.workers); medians of "
             f"{result['repeats']} rounds", "",
             "| played as | episodes/s | turns/s | mean turns | success | sampled tokens "
             "/ episode | failed | prefills | decoding steps | CPU s (trainer + agents) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    labels = {"env": "env (Runner)", "agent": "agent program (endpoint)"}
    for name, m in result["modes"].items():
        lines.append(f"| {labels[name]} | {m['episodes_per_s']:.2f} | {m['turns_per_s']:.1f} | "
                     f"{m['mean_turns']:.2f} | {m['success']:.2f} | "
                     f"{m['sampled_tokens_per_episode']:.1f} | {m['failed']:.0f} | "
                     f"{m['prefills']:.0f} | {m['decode_steps']:.0f} | "
                     f"{m['cpu_s_trainer']:.2f} + {m['cpu_s_workers']:.2f} |")
    lines += ["", f"agent / env: {result['agent_over_env_episodes_per_s']:.2f}x episodes/s, "
              f"{result['agent_over_env_turns_per_s']:.2f}x turns/s (target >= 0.8x)"]
    streamed = result.get("streaming")
    if streamed:
        lines += ["", f"Streaming under this load (one more agent round, {streamed['probes']} "
                  f"streamed calls beside it): time to the first token "
                  f"{1000 * streamed['ttft_s_median']:.1f} ms (median), one engine step "
                  f"{1000 * streamed['step_s']:.1f} ms: {streamed['ttft_over_step']:.2f}x a "
                  "decoding step (target <= 2x)"]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--groups", type=int, default=16, help="tasks per round")
    parser.add_argument("--group-size", type=int, default=4, help="episodes per task")
    parser.add_argument("--repeats", type=int, default=5, help="rounds (medians reported)")
    parser.add_argument("--reply-tokens", type=int, default=16)
    parser.add_argument("--max-context-tokens", type=int, default=2048)
    parser.add_argument("--seed-start", type=int, default=1_000_000, help="first task seed")
    parser.add_argument("--sft-epochs", type=int, default=4, help="0: the random model")
    parser.add_argument("--sft-conversations", type=int, default=1024)
    parser.add_argument("--sft-lr", type=float, default=5e-3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--probes", type=int, default=40,
                        help="streamed calls timed during one more agent round (TTFT)")
    parser.add_argument("--workers", type=int, default=1,
                        help="agent worker processes (agent.workers; 0: threads)")
    parser.add_argument("--results-dir", default=str(RESULTS))
    args = parser.parse_args(argv)
    result = measure(args)
    write_results(args.results_dir, "agents", result, markdown(result))


if __name__ == "__main__":
    main(sys.argv[1:])
