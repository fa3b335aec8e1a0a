"""A tool-calling agent with the plain ``openai`` SDK: a ``calculator`` tool for arithmetic.

Tasks are ``{"question": "12+7", "answer": "19"}``. The agent calls the model with
``tools=[calculator]``; when the reply has ``tool_calls`` it evaluates each expression (with
an ``ast``-based evaluator that accepts numbers, ``+ - * /`` and parentheses, nothing else),
appends the assistant message as the SDK returned it and a ``tool`` message per call
(``tool_call_id``), and calls again. The first reply without a tool call is the answer:
reward 1.0 when it equals the gold answer. ``info`` carries ``answer`` (the gold) and
``final_answer`` (the reply), which the reward terms of :mod:`turnrl.rewards` read.

How the tools reach the model: the endpoint parses tool calls written as
``<tool_call>{"name": "calculator", "arguments": {"expression": "12+7"}}</tool_call>`` (the
format tool-aware templates such as Qwen's and Hermes' teach) into OpenAI ``tool_calls``. The
tiny model's ChatML template ignores ``tools``, so this agent also writes a short system prompt
(:data:`SYSTEM_PROMPT`) that shows the call format; a tool-aware template shows the schemas
as well. ChatML writes an echoed tool call back as the ``<tool_call>`` text the model
sampled, so a run stays one token segment (``agent/segments_per_episode`` is 1).

::

    python examples/agents/calculator_agent.py    # writes data/calculator_*.jsonl if missing
    PYTHONPATH=examples/agents turnrl train agent.entry_point=calculator_agent:solve \\
        agent.tasks=examples/agents/data/calculator_tasks.jsonl \\
        agent.eval_tasks=examples/agents/data/calculator_eval_tasks.jsonl \\
        sft.source=jsonl sft.path=examples/agents/data/calculator_sft.jsonl \\
        rollout.max_new_tokens=96

``oracle_transcripts`` gives the ideal conversations for ``sft.source=jsonl``: the tool call in
the text form the model writes, the tool's result, then the answer.
"""

from __future__ import annotations

import ast
import json
import operator
import random
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from example_data import DATA, data_main, write_jsonl_files

from turnrl.agents.runner import AgentResult

MODEL = "policy"  # the model id the endpoint serves (agent.model_name)
MAX_CALLS = 4  # model calls per task: room for a tool call, a retry and the answer
MAX_EXPRESSION_CHARS = 200

TOOLS = [{
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression: numbers, + - * / and parentheses.",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string", "description": "e.g. (12+7)*3"}},
            "required": ["expression"],
        },
    },
}]
SYSTEM_PROMPT = ('Reply with the number only. To compute, call the calculator: <tool_call>'
                 '{"name": "calculator", "arguments": {"expression": "(2+3)*4"}}</tool_call>')


def solve(client: Any, task: dict[str, Any]) -> AgentResult:
    """Answer ``task["question"]`` with the model behind ``client``, running its tool calls."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_PROMPT},
                                      {"role": "user", "content": task["question"]}]
    answer, tool_calls = "", 0
    for _ in range(MAX_CALLS):
        reply = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))  # echoed as returned
        if not message.tool_calls:
            answer = (message.content or "").strip()
            break
        for call in message.tool_calls:  # every call gets its result, in order
            tool_calls += 1
            messages.append({"role": "tool", "tool_call_id": call.id,
                             "content": run_tool(call.function.name, call.function.arguments)})
    gold = str(task["answer"])
    return AgentResult(reward=float(answer == gold),
                       info={"answer": gold, "final_answer": answer, "tool_calls": tool_calls})


def run_tool(name: str, arguments: str) -> str:
    """The result of a tool call as the tool message's text (an error says what was wrong)."""
    if name != "calculator":
        return f"error: there is no tool {name!r}; the only tool is calculator"
    try:
        expression = json.loads(arguments).get("expression")
    except (ValueError, AttributeError):
        expression = None
    if not isinstance(expression, str):
        return 'error: call calculator with {"expression": "<arithmetic>"}'
    return calculator(expression)


def calculator(expression: str) -> str:
    """The value of ``expression`` as text (``"19"``, ``"3.5"``), or ``"error: ..."``."""
    try:
        value = evaluate(expression)
    except CalculatorError as error:
        return f"error: {error}"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.10g}" if isinstance(value, float) else str(value)


class CalculatorError(ValueError):
    """The expression is not plain arithmetic (or divides by zero)."""


OPERATORS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}
SIGNS: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos, ast.USub: operator.neg,
}


def evaluate(expression: str) -> int | float:
    """Evaluate numbers, ``+ - * /``, unary signs and parentheses; anything else (names,
    calls, attributes, ``**``, strings, booleans) raises :class:`CalculatorError`. Nothing is
    executed: the expression is parsed with :mod:`ast` and its tree walked."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise CalculatorError(f"the expression is longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, ValueError):  # ValueError: a null byte
        raise CalculatorError(f"{expression!r} is not an arithmetic expression") from None
    return _value(tree.body)


def _value(node: ast.expr) -> int | float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in SIGNS:
        return SIGNS[type(node.op)](_value(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
        left, right = _value(node.left), _value(node.right)
        if isinstance(node.op, ast.Div) and right == 0:
            raise CalculatorError("division by zero")
        return OPERATORS[type(node.op)](left, right)
    raise CalculatorError(f"only numbers, + - * / and parentheses are allowed, not "
                          f"{ast.unparse(node)[:40]!r}")


# ------------------------------------------------------------------ tasks and demonstrations

def make_tasks(seeds: Iterable[int]) -> list[dict[str, str]]:
    """One question per seed: ``a op b`` (two thirds) or ``(a op b) op c``, with ``a, b`` in
    0..99, ``c`` in 2..9 and ``op`` one of ``+ - *``; the answer is an integer."""
    tasks = []
    for seed in seeds:
        rng = random.Random(seed)
        a, b = rng.randint(0, 99), rng.randint(0, 99)
        question = f"{a}{rng.choice('+-*')}{b}"
        if rng.random() < 1 / 3:
            question = f"({question}){rng.choice('+-*')}{rng.randint(2, 9)}"
        tasks.append({"question": question, "answer": calculator(question)})
    return tasks


def tool_call_text(expression: str) -> str:
    """A calculator call as the model writes it (and the endpoint parses it)."""
    call = {"name": "calculator", "arguments": {"expression": expression}}
    return f"<tool_call>{json.dumps(call)}</tool_call>"


def oracle_transcripts(tasks: Iterable[dict[str, Any]]) -> list[list[dict[str, str]]]:
    """The ideal conversation of each task: the calculator called on the question, its
    result, then the result as the answer."""
    return [[{"role": "system", "content": SYSTEM_PROMPT},
             {"role": "user", "content": task["question"]},
             {"role": "assistant", "content": tool_call_text(task["question"])},
             {"role": "tool", "content": calculator(task["question"])},
             {"role": "assistant", "content": str(task["answer"])}]
            for task in tasks]


def write_data(out: Path = DATA, *, force: bool = False) -> list[Path]:
    """Write the training tasks (200), held-out tasks (50, other seeds) and the SFT
    transcripts of the training tasks under ``out`` (each only if missing, unless
    ``force``); returns the files written."""
    train, held_out = make_tasks(range(200)), make_tasks(range(1_000_000, 1_000_050))
    files = {"calculator_tasks.jsonl": train, "calculator_eval_tasks.jsonl": held_out,
             "calculator_sft.jsonl": [{"messages": m} for m in oracle_transcripts(train)]}
    return write_jsonl_files(out, files, force=force)


def main(argv: list[str]) -> None:
    data_main("Write the calculator agent's tasks and SFT data.", write_data, argv)


if __name__ == "__main__":
    main(sys.argv[1:])
