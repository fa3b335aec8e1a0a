"""The family chat-template fixtures render every case and extend conversations as their table
says (the capture's append-only check), with tools, JSON tool calls and EOS turn ends."""

from __future__ import annotations

import json
from typing import Any

import chat_templates
import pytest
from chat_templates import (
    CALC,
    CASES,
    EXPECTED,
    TEMPLATES,
    TOOLS,
    sampled_text,
    tokenizer_with,
)
from jinja2 import TemplateError

CELLS = [(template, case) for template in TEMPLATES for case in CASES]
RENDERED = [(template, case) for template, case in CELLS if EXPECTED[template][case] != "raises"]


def render(template: str, messages: list[dict[str, Any]], tools: list[dict] | None = None, *,
           add_generation_prompt: bool = True, **kwargs: Any) -> str:
    """The rendering by template ``template`` (a :data:`TEMPLATES` key), as the capture asks."""
    text = tokenizer_with(TEMPLATES[template]).apply_chat_template(
        messages, tools=tools, tokenize=False, add_generation_prompt=add_generation_prompt,
        **kwargs)
    assert isinstance(text, str)
    return text


def extends(template: str, before: list[dict[str, Any]], reply: dict[str, Any],
            after: list[dict[str, Any]], tools: list[dict] | None = None, *,
            sampled: dict[str, Any] | None = None, **kwargs: Any) -> bool:
    """The capture's check: the shorter conversation's prompt followed by the text the model
    sampled (for the message ``sampled``, by default the echoed ``reply``) is a prefix of the
    next call's prompt."""
    prompt = render(template, before, tools, **kwargs)
    text = sampled_text(template, sampled or reply)
    return render(template, [*before, reply, *after], tools, **kwargs).startswith(prompt + text)


def test_docstring_table_is_expected():
    lines = (chat_templates.__doc__ or "").splitlines()
    rules = [i for i, line in enumerate(lines) if line.startswith("=====")]
    header = lines[rules[0] + 1].split()
    rows = {line.split()[0]: line.split()[1:] for line in lines[rules[1] + 1:rules[2]]}
    assert header == ["template", *CASES]
    assert rows == {t: [EXPECTED[t][c] for c in CASES] for t in TEMPLATES}


@pytest.mark.parametrize(("template", "case"), CELLS)
def test_renders_every_case(template: str, case: str):
    c = CASES[case]
    render(template, c.before, c.tools)
    if EXPECTED[template][case] == "raises":
        with pytest.raises(TemplateError, match="single tool-calls"):
            render(template, c.longer, c.tools)
        return
    for add_generation_prompt in (True, False):
        assert render(template, c.longer, c.tools,
                      add_generation_prompt=add_generation_prompt)


@pytest.mark.parametrize(("template", "case"), RENDERED)
def test_append_only_as_the_table_says(template: str, case: str):
    c = CASES[case]
    expected = EXPECTED[template][case] == "yes"
    assert extends(template, c.before, c.reply, c.after, c.tools) == expected


def test_generation_prompts():
    ask = [CASES["plain"].before[0]]
    assert render("qwen3", ask).endswith("<|im_end|>\n<|im_start|>assistant\n")
    assert render("llama3", ask).endswith(
        "<|im_end|><|start_header_id|>assistant<|end_header_id|>\n\n")
    assert render("mistral", ask) == render("mistral", ask, add_generation_prompt=False)
    assert render("mistral", ask).endswith("[/INST]")
    assert render("chatml", ask).endswith("<|im_start|>assistant\n")


@pytest.mark.parametrize("template", TEMPLATES)
def test_assistant_turns_end_with_eos(template: str):
    tokenizer = tokenizer_with(TEMPLATES[template])
    assert tokenizer.eos_token == "<|im_end|>"
    c = CASES["plain"]
    text = render(template, c.longer, c.tools)
    assert sampled_text(template, c.reply).endswith(tokenizer.eos_token)
    assert "4" + tokenizer.eos_token in text
    assert tokenizer.encode("4" + tokenizer.eos_token, add_special_tokens=False) == [
        tokenizer.convert_tokens_to_ids("4"), tokenizer.eos_token_id]


@pytest.mark.parametrize(("template", "indent"), [("qwen3", None), ("llama3", 4),
                                                  ("mistral", None)])
def test_tool_schemas_are_in_the_prompt(template: str, indent: int | None):
    text = render(template, CASES["tool_call"].before, TOOLS)
    for tool in TOOLS:
        assert json.dumps(tool, indent=indent) in text


def test_chatml_ignores_tools_and_writes_tool_calls_as_the_model_does():
    c = CASES["tool_call"]
    text = render("chatml", c.longer, c.tools)
    assert "description" not in text  # the schemas are not rendered
    assert ('<|im_start|>assistant\n<tool_call>{"name": "calculator", "arguments": '
            '{"expression": "2 + 2"}}</tool_call><|im_end|>\n<|im_start|>tool\n4<|im_end|>\n'
            ) in text


def test_tool_calls_render_arguments_as_json():
    c = CASES["parallel_calls"]
    qwen3 = render("qwen3", c.longer, c.tools)
    assert ('<|im_start|>assistant\n<tool_call>\n{"name": "calculator", "arguments": '
            '{"expression": "2 + 2"}}\n</tool_call>\n<tool_call>\n{"name": "search", '
            '"arguments": {"query": "capital of France", "k": 3}}\n</tool_call><|im_end|>\n'
            '<|im_start|>user\n<tool_response>\n4\n</tool_response>\n<tool_response>\nParis\n'
            '</tool_response><|im_end|>\n') in qwen3
    mistral = render("mistral", c.longer, c.tools)
    assert ('[/INST][TOOL_CALLS] [{"name": "calculator", "arguments": {"expression": "2 + 2"}, '
            '"id": "calc00001"}, {"name": "search", "arguments": {"query": "capital of France", '
            '"k": 3}, "id": "srch00002"}]<|im_end|>[TOOL_RESULTS] {"content": 4, "call_id": '
            '"calc00001"}[/TOOL_RESULTS][TOOL_RESULTS] {"content": Paris, "call_id": '
            '"srch00002"}[/TOOL_RESULTS]') in mistral
    c = CASES["tool_call"]
    llama3 = render("llama3", c.longer, c.tools)
    assert ('<|start_header_id|>assistant<|end_header_id|>\n\n{"name": "calculator", '
            '"parameters": {"expression": "2 + 2"}}<|im_end|><|start_header_id|>ipython'
            '<|end_header_id|>\n\n"4"<|im_end|>') in llama3


def test_tool_arguments_as_a_json_string_are_encoded_again_by_llama3_and_mistral():
    """The OpenAI wire format's ``arguments`` is a JSON string; templates expect a dict.
    Qwen3 writes a string verbatim, Llama 3.1 and Mistral quote it as a JSON string."""
    wire = {**CALC, "function": {**CALC["function"], "arguments": '{"expression": "2 + 2"}'}}
    c = CASES["tool_call"]
    reply = {**c.reply, "tool_calls": [wire]}
    assert extends("qwen3", c.before, reply, c.after, c.tools, sampled=c.reply)
    for template in ("llama3", "mistral"):
        text = render(template, [*c.before, reply, *c.after], c.tools)
        assert r'"{\"expression\": \"2 + 2\"}"' in text
        assert not extends(template, c.before, reply, c.after, c.tools, sampled=c.reply)


def test_qwen3_strips_thinking_before_the_last_user_query():
    c = CASES["thinking"]
    text = render("qwen3", c.longer)
    assert "<think>" not in text
    assert "<|im_start|>assistant\n4<|im_end|>\n<|im_start|>user\nAnd 3 + 3?" in text
    # the same with the reasoning parsed out into reasoning_content (a reasoning parser)
    reply = {"role": "assistant", "content": "4", "reasoning_content": "Add 2 and 2."}
    assert sampled_text("qwen3", reply) == sampled_text("qwen3", c.reply)
    assert not extends("qwen3", c.before, reply, c.after)
    # while the reply is the last turn, its thinking stays
    assert render("qwen3", [*c.before, reply], add_generation_prompt=False).startswith(
        render("qwen3", c.before) + sampled_text("qwen3", reply))


def test_qwen3_keeps_thinking_within_a_tool_chain():
    c = CASES["tool_call"]
    reply = {**c.reply, "reasoning_content": "Use the calculator."}
    assert sampled_text("qwen3", reply).startswith(
        "<think>\nUse the calculator.\n</think>\n\n<tool_call>\n")
    assert extends("qwen3", c.before, reply, c.after, c.tools)
    # ... until the next user query
    final = {"role": "assistant", "content": "4"}
    later = [*c.longer, final, CASES["plain"].after[0]]
    assert "<think>" not in render("qwen3", later, c.tools)


def test_qwen3_without_thinking_drops_the_empty_think_block():
    """``enable_thinking=False`` prompts with an empty think block that is not re-rendered."""
    c = CASES["plain"]
    assert render("qwen3", c.before, enable_thinking=False).endswith(
        "<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert not extends("qwen3", c.before, c.reply, c.after, enable_thinking=False)


def test_mistral_moves_tools_and_system_to_the_last_user_message():
    c = CASES["tools_user"]
    text = render("mistral", c.longer, c.tools)
    assert text.count("[AVAILABLE_TOOLS]") == 1
    assert text.index("[AVAILABLE_TOOLS]") > text.index("[INST] What is 2 + 2?[/INST] 4")
    c = CASES["system_user"]
    assert render("mistral", c.before).endswith("[INST] Answer briefly.\n\nWhat is 2 + 2?[/INST]")
    assert render("mistral", c.longer).endswith(
        "<s>[INST] What is 2 + 2?[/INST] 4<|im_end|>[INST] Answer briefly.\n\nAnd 3 + 3?[/INST]")


def test_mistral_refuses_openai_style_call_ids():
    c = CASES["tool_call"]
    reply = {**c.reply, "tool_calls": [{**CALC, "id": "call_0123456789abcdef01234567"}]}
    with pytest.raises(TemplateError, match="length 9"):
        render("mistral", [*c.before, reply], c.tools)
