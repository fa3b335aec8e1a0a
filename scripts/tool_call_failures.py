"""Where a base model's tool calls fail: the ``tool_call`` probe's examples, split by call
format (compact or JSON), tool-list style and request kind, and each failure's kind.

    python scripts/tool_call_failures.py [MODEL_DIR] [--examples 128]

A failure is ``malformed`` (not one well-formed call), ``wrong_args`` (the right tool, an
argument copied wrongly) or ``wrong_tool`` (``first``: the first listed tool, ``listed``:
another listed one, ``invented``: a name not in the list). docs/pretraining.md quotes its
output for the shipped base.
"""

from __future__ import annotations

import argparse
import collections

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from turnrl.models.base import shipped_base_dir
from turnrl.pretrain import probes


def listed_names(system: str) -> list[str]:
    """The tool names of a probe's system message, in order (any of the three list styles)."""
    names = []
    for line in system.split("\n"):
        if '"name": "' in line:
            names.append(line.split('"name": "')[1].split('"')[0])
        elif line.startswith("- "):
            names.append(line[2:].split("(")[0])
        elif "[<" in line:
            names.append(line.split("[<")[0])
    return names


def classify(model, tokenizer, item: probes.Item) -> tuple[str, str, str, str]:
    """(call format, list style, request kind, outcome) of one probe example."""
    prompt = probes._generation_prompt(tokenizer, item.messages[:-1])
    length = len(tokenizer.encode(item.target, add_special_tokens=False))
    out = model.generate(input_ids=torch.tensor([prompt]), max_new_tokens=length + 16,
                         do_sample=False, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    reply = tokenizer.decode(out[0, len(prompt):], skip_special_tokens=True)
    gold = probes._call_of(item.target, probes._AnyName())
    written = probes._call_of(reply, probes._AnyName())
    system = item.messages[0]["content"]
    names = listed_names(system)
    if probes._call_of(reply, {gold[0]}) == gold:
        outcome = "ok"
    elif written[0] is None:
        outcome = "malformed"
    elif written[0] == gold[0]:
        outcome = "wrong_args"
    else:
        where = "first" if names and written[0] == names[0] else \
            "listed" if written[0] in names else "invented"
        outcome = f"wrong_tool_{where}"
    call = "json" if item.target.startswith("<tool_call>") else "compact"
    first_entry = system.split("\n")[1]  # after the header line: the list's first line
    style = "schema" if first_entry == "<tools>" else \
        "bracket" if "[<" in first_entry else "signature"
    kind = "explicit" if item.messages[-2]["content"].startswith(("Call", "Use")) else "field"
    return call, style, kind, outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", default=str(shipped_base_dir()))
    parser.add_argument("--examples", type=int, default=128)
    args = parser.parse_args()
    torch.set_num_threads(2)
    model = AutoModelForCausalLM.from_pretrained(args.model).eval()
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    counts: collections.Counter = collections.Counter()
    with torch.no_grad():
        for item in probes.items("tool_call", args.examples, probes._first_call):
            call, style, kind, outcome = classify(model, tokenizer, item)
            counts[outcome] += 1
            counts[(call, style, "valid" if outcome == "ok" else "not valid")] += 1
            counts[(call, style, kind, outcome)] += 1
    for key, value in sorted(counts.items(), key=str):
        print(key, value)


if __name__ == "__main__":
    main()
