"""The built-in base model: pretraining time, reproduction of the shipped weights, probes.

Runs ``turnrl pretrain`` with the shipped recipe (``configs/pretrain.yaml``, the threads and
seed it names) into a scratch dir, timing it; compares the weights it wrote with the ones
shipped in ``turnrl/models/base_model`` (equal bit for bit, or the largest difference); and
probes the new model, the shipped base (``tiny``) and the random init (``tiny-random``) on
the same held-out examples, side by side.

    python bench/base_model.py                  # the whole check (about 40 minutes, 2 cores)
    python bench/base_model.py --probes-only    # the shipped base and the random init only

Targets (issue 40): pretraining within 45 minutes on 2 idle cores; copy accuracy >= 0.95 at
every probed distance; valid tool calls with exact arguments >= 0.9 on unseen schemas; the
random init near 0. Writes ``bench/results/base_model.{json,md}``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from common import RESULTS, write_results

TARGETS = {"copy@64": 0.95, "copy@256": 0.95, "copy@1024": 0.95, "tool_call": 0.9}


def pretrain_shipped_recipe(out: Path) -> tuple[Path, float]:
    from turnrl.cli import main

    start = time.perf_counter()
    code = main(["pretrain", "--quiet", f"run.out_dir={out}"])
    if code != 0:
        sys.exit(f"turnrl pretrain failed with exit code {code}")
    return out / "pretrain" / "model", time.perf_counter() - start


def compare_weights(a: Path, b: Path) -> dict[str, object]:
    """Equal bit for bit, else the largest absolute difference and the tensor it is in."""
    import torch
    from safetensors.torch import load_file

    first = load_file(str(a / "model.safetensors"))
    second = load_file(str(b / "model.safetensors"))
    if first.keys() != second.keys():
        return {"equal": False, "reason": "different tensors"}
    worst = max(((float((first[k] - second[k]).abs().max()), k) for k in first), default=(0, ""))
    return {"equal": all(torch.equal(first[k], second[k]) for k in first),
            "max_abs_diff": worst[0], "worst_tensor": worst[1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probes-only", action="store_true",
                        help="probe the shipped base and the random init, without pretraining")
    parser.add_argument("--examples", type=int, default=128, help="examples per probe")
    parser.add_argument("--results-dir", default=str(RESULTS))
    args = parser.parse_args()

    import torch

    from turnrl.models.base import builtin_model_dir, shipped_base_dir
    from turnrl.models.policy import load_policy, load_tokenizer
    from turnrl.pretrain.probes import headline, markdown, run_probes

    torch.set_num_threads(2)
    result: dict[str, object] = {"examples": args.examples}
    models = {"tiny (shipped)": shipped_base_dir(), "tiny-random": builtin_model_dir("tiny-random")}
    if not args.probes_only:
        scratch = Path(tempfile.mkdtemp(prefix="turnrl-base-model-"))
        model_dir, wall = pretrain_shipped_recipe(scratch)
        result["pretrain_wall_s"] = round(wall, 1)
        result["reproduces_shipped"] = compare_weights(model_dir, shipped_base_dir())
        models = {"pretrained now": model_dir, **models}
    probes = {}
    for label, path in models.items():
        assert path is not None
        policy = load_policy(path, dtype=torch.float32, device=torch.device("cpu"))
        probes[label] = run_probes(policy, load_tokenizer(path), args.examples)
    result["probes"] = probes
    shipped = headline(probes["tiny (shipped)"])
    result["targets_met"] = {name: shipped[name] >= target for name, target in TARGETS.items()}
    lines = ["# The built-in base model", "",
             f"`python bench/base_model.py{' --probes-only' if args.probes_only else ''}`, "
             f"{args.examples} held-out examples per probe.", ""]
    if "pretrain_wall_s" in result:
        same = result["reproduces_shipped"]
        lines += [f"- pretraining with `configs/pretrain.yaml`: "
                  f"{result['pretrain_wall_s'] / 60:.1f} min (target <= 45)",
                  f"- the weights it wrote equal the shipped ones bit for bit: {same}", ""]
    lines += [markdown(probes), "Targets on the shipped base: " + ", ".join(
        f"{name} >= {target} ({'met' if result['targets_met'][name] else 'NOT met'})"
        for name, target in TARGETS.items()) + "."]
    write_results(args.results_dir, "base_model", result, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
