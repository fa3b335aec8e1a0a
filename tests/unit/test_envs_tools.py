"""Env tools: JSON schemas of typed callables, parsing both call formats, errors as text."""

from __future__ import annotations

import functools
import json
from enum import Enum
from typing import Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers.utils import get_json_schema

from turnrl.envs.tools import (
    ERROR_KINDS,
    Toolbox,
    ToolCall,
    ToolCallError,
    ToolSchemaError,
    tool_schema,
    tool_schemas,
)


def search(query: str, k: int = 3) -> str:
    """Search the corpus.

    Args:
        query: What to look for.
        k: How many passages to return.
    """
    if not query.strip():
        raise ValueError("empty query")
    return f"{k} hits for {query}"


def answer(text: str) -> str:
    """Give the final answer and end the episode."""
    return f"answered {text}"


def scale(x: float, times: int, exact: bool = False, unit: str | None = None) -> dict:
    """Scale a number.

    Args:
        x: The number.
        times: The factor.
        exact: Whether to round.
        unit: An optional unit.

    Returns:
        The scaled value.
    """
    return {"value": x * times, "exact": exact, "unit": unit}


def finish() -> None:
    """End the episode."""


KEYS = {"tool_name", "tool_calls", "tool_error", "tool_error_kind", "tool_calls_ignored"}


def _kind(result: ToolCall | ToolCallError) -> str | None:
    return result.kind if isinstance(result, ToolCallError) else None


@pytest.fixture
def toolbox() -> Toolbox:
    return Toolbox([search, answer])


# --------------------------------------------------------------------------- schemas


def test_schema_types_required_and_descriptions():
    schema = tool_schema(scale)
    assert schema["type"] == "function"
    function = schema["function"]
    assert function["name"] == "scale"
    assert function["description"] == "Scale a number."
    params = function["parameters"]
    assert params["type"] == "object"
    assert params["required"] == ["x", "times"]  # the parameters without defaults
    props = params["properties"]
    assert props["x"] == {"type": "number", "description": "The number."}
    assert props["times"] == {"type": "integer", "description": "The factor."}
    assert props["exact"] == {"type": "boolean", "description": "Whether to round."}
    assert props["unit"] == {"type": "string", "nullable": True, "description": "An optional unit."}


def test_schema_is_transformers_own_for_google_docstrings():
    for fn in (search, scale):
        assert tool_schema(fn) == get_json_schema(fn)


def test_plain_docstring_gives_description_without_parameter_descriptions():
    function = tool_schema(answer)["function"]
    assert function["description"] == "Give the final answer and end the episode."
    assert function["parameters"]["properties"] == {"text": {"type": "string"}}
    assert function["parameters"]["required"] == ["text"]


def test_plain_docstring_with_returns_section():
    def lookup(key: str) -> str:
        """Look a key up.

        Returns:
            The value.
        """
        return key

    function = tool_schema(lookup)["function"]
    assert function["description"] == "Look a key up."
    assert function["parameters"]["properties"] == {"key": {"type": "string"}}
    assert function["return"] == {"type": "string", "description": "The value."}


class Color(Enum):
    RED = "red"
    BLUE = "blue"


def test_schema_of_choices():
    def paint(color: Color, finish: Literal["matte", "gloss"] = "matte") -> str:
        """Paint the wall."""
        return f"{color.value} {finish}"

    props = tool_schema(paint)["function"]["parameters"]["properties"]
    assert props["color"] == {"type": "string", "enum": ["red", "blue"]}
    assert props["finish"] == {"type": "string", "enum": ["matte", "gloss"]}
    box = Toolbox([paint])
    assert box.call('paint[blue]')[0] == "blue matte"
    assert box.call('{"name": "paint", "arguments": {"color": "red", "finish": "gloss"}}')[0] \
        == "red gloss"
    text, info = box.call('{"name": "paint", "arguments": {"color": "green"}}')
    assert info["tool_error_kind"] == "bad_arguments"
    assert """must be one of ["red", "blue"], got 'green'""" in text


def test_tool_schemas_of_a_mapping_renames():
    schemas = tool_schemas({"find": search, "answer": answer})
    assert [s["function"]["name"] for s in schemas] == ["find", "answer"]
    assert tool_schemas([search]) == [tool_schema(search)]


def test_bound_method_leaves_out_self():
    class Counter:
        def __init__(self) -> None:
            self.total = 0

        def add(self, amount: int) -> int:
            """Add to the counter.

            Args:
                amount: How much to add.
            """
            self.total += amount
            return self.total

    counter = Counter()
    params = tool_schema(counter.add)["function"]["parameters"]
    assert list(params["properties"]) == ["amount"]
    box = Toolbox([counter.add])
    assert box.call("add[4]")[0] == "4"
    assert box.call('{"name": "add", "arguments": {"amount": 3}}')[0] == "7"


def test_schema_errors_name_the_function_and_the_fix():
    def no_doc(query: str) -> str:
        return query

    def no_hint(query) -> str:
        """Search."""
        return query

    def undocumented(query: str, k: int) -> str:
        """Search.

        Args:
            query: What to look for.
        """
        return query

    def misspelled(query: str) -> str:
        """Search.

        Args:
            qeury: What to look for.
        """
        return query

    def star(*queries: str) -> str:
        """Search."""
        return ""

    class Local:
        pass

    def unresolved(item: Local) -> str:
        """Use a locally defined type (a string annotation that cannot be resolved)."""
        return ""

    cases = [
        (no_doc, "has no docstring"),
        (no_hint, "missing a type hint"),
        (undocumented, "no description for the argument 'k'"),
        (misspelled, "describes 'qeury', which is not a parameter; did you mean 'query'?"),
        (star, "no *args"),
        (unresolved, "cannot resolve its type hints (NameError: name 'Local' is not defined)"),
        (functools.partial(search, k=2), "must be a function or a bound method"),
    ]
    for fn, expected in cases:
        with pytest.raises(ToolSchemaError, match=r"^tool ") as error:
            tool_schema(fn)
        assert expected in str(error.value), (fn, str(error.value))


def test_toolbox_construction_errors():
    with pytest.raises(ToolSchemaError, match="not a valid tool name"):
        Toolbox({"web search": search})
    with pytest.raises(ToolSchemaError, match="two tools are named 'search'"):
        Toolbox([search, search])
    with pytest.raises(ToolSchemaError, match="needs 2 arguments, but the compact format"):
        Toolbox([scale], format="compact")
    with pytest.raises(ValueError, match="did you mean 'compact'"):
        Toolbox([search], format="compakt")  # type: ignore[arg-type]


def test_toolbox_names_schemas_and_hints(toolbox):
    assert toolbox.names == ["search", "answer"]
    assert "search" in toolbox and len(toolbox) == 2
    assert toolbox.schemas() == tool_schemas([search, answer])
    toolbox.schemas()[0]["function"]["name"] = "changed"  # a copy each time
    assert toolbox.names == ["search", "answer"]
    assert toolbox.describe() == ("search[<query>]: Search the corpus.\n"
                                  "answer[<text>]: Give the final answer and end the episode.")
    hint = Toolbox([search], format="json").format_hint()
    assert hint == ('Call a tool as <tool_call>{"name": "search", "arguments": '
                    '{"query": "..."}}</tool_call>.')
    assert Toolbox([search], format="compact").format_hint("search") == \
        "Call a tool as search[<query>]."


TOOLS_TEMPLATE = (
    "{% if tools %}<|im_start|>system\nTools:\n{% for tool in tools %}"
    "{{ tool.function.name }}: {{ tool.function.description }} {{ tool | tojson }}\n"
    "{% endfor %}<|im_end|>\n{% endif %}"
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def test_schemas_render_through_a_chat_template():
    """The tiny tokenizer's ChatML template ignores tools, so render a tool-aware one; the
    schemas must give the same prompt as handing transformers the functions themselves."""
    from turnrl.models.tiny import build_tokenizer

    tokenizer = build_tokenizer()
    messages = [{"role": "user", "content": "Where is Paris?"}]
    toolbox = Toolbox([search, scale])
    text = tokenizer.apply_chat_template(messages, tools=toolbox.schemas(),
                                         chat_template=TOOLS_TEMPLATE, tokenize=False,
                                         add_generation_prompt=True)
    assert isinstance(text, str)
    assert "search: Search the corpus." in text
    assert json.dumps(toolbox.schemas()[0]["function"]["parameters"]["properties"]["query"]) \
        in text
    from_functions = tokenizer.apply_chat_template(messages, tools=[search, scale],
                                                   chat_template=TOOLS_TEMPLATE, tokenize=False,
                                                   add_generation_prompt=True)
    assert text == from_functions


# --------------------------------------------------------------------------- valid calls


@pytest.mark.parametrize("text", [
    '<tool_call>{"name": "search", "arguments": {"query": "capital of France"}}</tool_call>',
    'Let me look.\n<tool_call>\n{"name": "search", "arguments": {"query": "capital of France"}}'
    "\n</tool_call>",
    '<tool_call>{"name": "search", "arguments": {"query": "capital of France"}}',  # unclosed
    '<tool_call>```json\n{"name": "search", "arguments": {"query": "capital of France"}}\n```'
    "</tool_call>",
    '{"name": "search", "arguments": {"query": "capital of France"}}',
    'I will call {"name": "search", "parameters": {"query": "capital of France"}} now',
    '{"name": "search", "arguments": "{\\"query\\": \\"capital of France\\"}"}',
    '{"type": "function", "function": {"name": "search", "arguments": '
    '{"query": "capital of France"}}}',
])
def test_json_calls(toolbox, text):
    assert toolbox.parse(text) == ToolCall("search", {"query": "capital of France"})
    observation, info = toolbox.call(text)
    assert observation == "3 hits for capital of France"
    assert info == {"tool_name": "search", "tool_calls": 1, "tool_error": False,
                    "tool_error_kind": None, "tool_calls_ignored": 0}


@pytest.mark.parametrize("text", [
    "search[capital of France]",
    "Thought: I need facts.\nAction: search[capital of France]",
    'search["capital of France"]',
    "search[ capital of France ]",
])
def test_compact_calls(toolbox, text):
    assert toolbox.parse(text) == ToolCall("search", {"query": "capital of France"})


def test_compact_arguments_nest_brackets_and_convert_types():
    box = Toolbox([search, answer, finish, scale])
    assert box.parse("search[list [1, 2] items]") == ToolCall("search",
                                                                {"query": "list [1, 2] items"})
    assert box.parse("answer[42]") == ToolCall("answer", {"text": "42"})
    assert box.parse("finish[]") == ToolCall("finish", {})
    assert box.call("finish[]")[0] == "(no output)"
    assert box.parse("scale[2.5]").name == "scale"  # first parameter only; times is missing
    assert _kind(box.parse("scale[2.5]")) == "bad_arguments"


def test_json_arguments_are_converted_to_the_annotated_types():
    box = Toolbox([scale])
    call = box.parse('{"name": "scale", "arguments": {"x": 2, "times": "3", "exact": "yes",'
                     ' "unit": null}}')
    assert call == ToolCall("scale", {"x": 2.0, "times": 3, "exact": True, "unit": None})
    assert isinstance(call, ToolCall) and isinstance(call.arguments["x"], float)
    assert box.call('{"name": "scale", "arguments": {"x": "1.5", "times": 2.0}}')[0] == \
        '{"value": 3.0, "exact": false, "unit": null}'


def test_format_restricts_what_is_read():
    json_only = Toolbox([search], format="json")
    compact_only = Toolbox([search], format="compact")
    json_call = '{"name": "search", "arguments": {"query": "x"}}'
    assert _kind(json_only.parse("search[x]")) == "no_call"
    assert json_only.parse(json_call) == ToolCall("search", {"query": "x"})
    assert _kind(compact_only.parse(json_call)) == "no_call"
    assert compact_only.parse("search[x]") == ToolCall("search", {"query": "x"})


def test_auto_takes_the_call_that_starts_first(toolbox):
    text = 'answer[Paris] then {"name": "search", "arguments": {"query": "x"}}'
    assert toolbox.parse(text) == ToolCall("answer", {"text": "Paris"})
    text = '{"name": "search", "arguments": {"query": "answer[Paris]"}}'  # inside the JSON
    assert toolbox.parse_all(text) == [ToolCall("search", {"query": "answer[Paris]"})]


@pytest.mark.parametrize("text", [
    'search[d = {"name": "Bob"}]',
    'search[{"name": "answer", "arguments": {"text": "x"}}]',
    'search[<tool_call>{"name": "answer", "arguments": {"text": "x"}}</tool_call>]',
])
def test_auto_json_inside_a_compact_call_is_its_argument(toolbox, text):
    argument = text[len("search["):-1]
    assert toolbox.parse_all(text) == [ToolCall("search", {"query": argument})]
    observation, info = toolbox.call(text)
    assert observation == f"3 hits for {argument}"  # no "(Note: ... ignored)"
    assert info["tool_calls_ignored"] == 0


@pytest.mark.parametrize("format", ["json", "auto"])
def test_json_strings_may_hold_literal_newlines(format):
    box = Toolbox([search, answer], format=format)
    code = "x = 1\n\tprint(x)"
    for text in (f'<tool_call>{{"name": "search", "arguments": {{"query": "{code}"}}}}'
                 "</tool_call>",
                 f'{{"name": "search", "arguments": {{"query": "{code}"}}}}',
                 f'{{"name": "search", "arguments": "{{\\"query\\": \\"{code}\\"}}"}}'):
        assert "\n" in text  # a raw newline, which strict JSON refuses
        assert box.parse(text) == ToolCall("search", {"query": code}), text


def nest(items: list[int]) -> str:
    """Take a list.

    Args:
        items: Some numbers.
    """
    return str(items)


DEEP = "[" * 5000 + "]" * 5000


@pytest.mark.parametrize("format", ["json", "auto"])
@pytest.mark.parametrize(("text", "kind"), [
    ("<tool_call>" + "[" * 1000 + "</tool_call>", "malformed"),
    ("<tool_call>" + DEEP + "</tool_call>", "malformed"),
    ('<tool_call>{"name": "search", "arguments": {"query": ' + DEEP + "}}</tool_call>",
     "malformed"),
    ('{"name": "search", "arguments": {"query": ' + DEEP + "}}", "malformed"),
    ('{"name": "search", "arguments": "{\\"query\\": ' + "[" * 5000 + '}"}', "malformed"),
    ('Thinking {"name":' + "[" * 100_000, "malformed"),
    ('{"name": "search", "arguments": ' + '{"a": ' * 3000 + "1" + "}" * 3001, "malformed"),
    ('{"name": "search", "arguments": {"query": ' + "1" * 5000 + "}}", "malformed"),
    ('{"x": ' + DEEP + '} {"name": "search", "arguments": {"query": 3}}', "no_call"),
])
def test_deeply_nested_calls_are_malformed_not_a_crash(format, text, kind):
    box = Toolbox([search, answer], format=format)
    observation, info = _error(box, text)
    assert info["tool_error_kind"] == kind
    if kind == "malformed":
        assert "not valid JSON" in observation


def test_deeply_nested_arguments_are_bad_arguments_not_a_crash():
    box = Toolbox([nest], format="auto")
    observation, info = _error(box, "nest[" + DEEP + "]")
    assert info["tool_error_kind"] == "bad_arguments"
    assert "must be a JSON array nested less deeply" in observation
    deep_but_readable = "[" * 900 + "]" * 900  # decodes, but deeper than json.dumps can go
    observation, info = _error(
        box, '{"name": "nest", "arguments": {"items": [' + deep_but_readable + "]}}")
    assert info["tool_error_kind"] == "bad_arguments"


def test_format_call_refuses_tools_without_parameters_and_unknown_names():
    for format in ("json", "compact", "auto"):
        box = Toolbox([search, finish], format=format)
        with pytest.raises(ValueError, match="tool 'finish' takes no parameters"):
            box.format_call("finish", "now")
        with pytest.raises(ValueError, match=r"'serch' is not a tool.*did you mean 'search'"):
            box.format_call("serch", "x")
        assert box.parse(box.format_call("search", "a [b")) == ToolCall(
            "search", {"query": "a [b" if format != "compact" else "a b"})


# --------------------------------------------------------------------------- errors


def _error(toolbox: Toolbox, text: str) -> tuple[str, dict]:
    observation, info = toolbox.call(text)
    assert set(info) == KEYS
    assert info["tool_error"] is True and info["tool_calls"] == 0
    assert info["tool_error_kind"] in ERROR_KINDS
    assert observation.startswith("Error: ")
    assert "Call a tool as" in observation  # every error shows the expected format
    return observation, info


def test_no_call(toolbox):
    observation, info = _error(toolbox, "The answer is Paris.")
    assert info["tool_error_kind"] == "no_call"
    assert observation.startswith("Error: no tool call found.")
    assert isinstance(toolbox.parse("hello"), ToolCallError)


@pytest.mark.parametrize(("text", "expected"), [
    ('<tool_call>{"name": "search", "arguments": {"query": "x"}</tool_call>',
     "inside <tool_call>...</tool_call> is not valid JSON (Expecting ',' delimiter at line 1 "
     "column 47)"),
    ('{"name": "search", "arguments": {"query": "x"}', "the tool call is not valid JSON"),
    ("<tool_call></tool_call>", "the <tool_call> block is empty"),
    ('<tool_call>["search", "x"]</tool_call>', 'must be a JSON object with "name" and '
     '"arguments", got a JSON list'),
    ('<tool_call>{"arguments": {"query": "x"}}</tool_call>', 'needs a "name" string'),
    ('<tool_call>{"name": "search", "query": "x"}</tool_call>',
     "unexpected key(s) 'query'; put the tool's arguments inside \"arguments\""),
    ('<tool_call>{"name": "search", "arguments": ["x"]}</tool_call>',
     '"arguments" must be a JSON object'),
    ('{"name": "search", "arguments": "{query: x}"}', '"arguments" is a string that is not '
     "valid JSON"),
    ("search[capital of France", "the call search[... has no closing ']'"),
])
def test_malformed_calls(toolbox, text, expected):
    observation, info = _error(toolbox, text)
    assert info["tool_error_kind"] == "malformed"
    assert expected in observation, observation


@pytest.mark.parametrize("text", [
    '<tool_call>{"name": "serch", "arguments": {"query": "x"}}</tool_call>',
    "serch[x]",
])
def test_unknown_tool_suggests_the_closest(toolbox, text):
    observation, info = _error(toolbox, text)
    assert info["tool_error_kind"] == "unknown_tool" and info["tool_name"] == "serch"
    assert observation.startswith("Error: unknown tool 'serch'; did you mean 'search'? "
                                  "Available tools: search, answer.")


def test_unknown_tool_without_a_close_name(toolbox):
    observation, _ = _error(toolbox, '{"name": "weather", "arguments": {}}')
    assert observation.startswith("Error: unknown tool 'weather'. Available tools:")


@pytest.mark.parametrize(("text", "expected"), [
    ('{"name": "search", "arguments": {}}',
     "tool 'search' is missing required argument(s) 'query'."),
    ("search[]", "is missing required argument(s) 'query'."),
    ('{"name": "search", "arguments": {"qeury": "x"}}',
     "tool 'search' got an unexpected argument 'qeury'; did you mean 'query'? "
     "Tool 'search' takes: query (string, required), k (integer, optional)."),
    ('{"name": "search", "arguments": {"query": "x", "k": "many"}}',
     "argument 'k' of tool 'search' must be an integer, got 'many'."),
    ('{"name": "search", "arguments": {"query": "x", "k": 2.5}}',
     "argument 'k' of tool 'search' must be an integer, got 2.5."),
    ('{"name": "search", "arguments": {"query": "x", "k": true}}',
     "argument 'k' of tool 'search' must be an integer, got true."),
    ('{"name": "search", "arguments": {"query": {"text": "x"}}}',
     "argument 'query' of tool 'search' must be a string, got {\"text\": \"x\"}."),
    ('{"name": "finish", "arguments": {"now": true}}',
     "tool 'finish' got an unexpected argument 'now'. Tool 'finish' takes no arguments."),
    ("finish[now]", "tool 'finish' takes no argument, got 'now'; call it as finish[]."),
    ('{"name": "scale", "arguments": {"x": 1, "times": 2, "exact": "maybe"}}',
     "argument 'exact' of tool 'scale' must be a boolean (true or false), got 'maybe'."),
    ('{"name": "scale", "arguments": {"x": "one", "times": 2}}',
     "argument 'x' of tool 'scale' must be a number, got 'one'."),
    ('{"name": "scale", "arguments": {"x": 1, "times": 2, "unit": [5]}}',
     "argument 'unit' of tool 'scale' must be a string or null"),
])
def test_bad_arguments(text, expected):
    box = Toolbox([search, finish, scale])
    observation, info = _error(box, text)
    assert info["tool_error_kind"] == "bad_arguments"
    assert expected in observation, observation


def test_a_tool_exception_becomes_an_observation(toolbox):
    text = '{"name": "search", "arguments": {"query": "  "}}'  # search raises on blanks
    observation, info = toolbox.call(text)
    assert observation == "Error: tool 'search' raised ValueError: empty query"
    assert info == {"tool_name": "search", "tool_calls": 1, "tool_error": True,
                    "tool_error_kind": "tool_exception", "tool_calls_ignored": 0}


def test_multiple_calls_run_the_first_and_say_so(toolbox):
    observation, info = toolbox.call("search[a] search[b] answer[c]")
    assert observation == ("3 hits for a\n(Note: only the first tool call was run; 2 more "
                           "calls were ignored. Make one tool call per turn.)")
    assert info["tool_calls"] == 1 and info["tool_calls_ignored"] == 2
    assert not info["tool_error"]
    assert len(toolbox.parse_all("search[a] answer[c]")) == 2
    # tagged JSON: each block is a call
    text = ('<tool_call>{"name": "search", "arguments": {"query": "a"}}</tool_call>'
            '<tool_call>{"name": "answer", "arguments": {"text": "b"}}</tool_call>')
    observation, info = toolbox.call(text)
    assert observation.startswith("3 hits for a\n(Note: only the first tool call was run; 1 "
                                  "more call was ignored.")


def test_an_invalid_first_call_is_reported_and_the_rest_ignored(toolbox):
    observation, info = toolbox.call("serch[a] search[b]")
    # only known names count as compact calls when one is present
    assert observation == "3 hits for b" and info["tool_calls_ignored"] == 0
    observation, info = toolbox.call('{"name": "serch", "arguments": {}} search[b]')
    assert info["tool_error_kind"] == "unknown_tool" and info["tool_calls_ignored"] == 1
    assert info["tool_calls"] == 0


def test_results_that_are_not_strings_are_json():
    box = Toolbox([scale])
    assert json.loads(box.call('{"name": "scale", "arguments": {"x": 1, "times": 2}}')[0]) == \
        {"value": 2.0, "exact": False, "unit": None}


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet='{}[]<>/"\':,. abcdefghijklmnopqrstuvwxyz_0123456789\n', max_size=80))
def test_call_never_raises_on_arbitrary_replies(text):
    box = Toolbox([search, answer, finish, scale])
    for candidate in (text, "search[" + text, '{"name": "search", "arguments": ' + text,
                      "<tool_call>" + text):
        observation, info = box.call(candidate)
        assert isinstance(observation, str) and observation
        assert set(info) == KEYS
        assert info["tool_error_kind"] in (None, *ERROR_KINDS)


def test_tool_use_counts_attempts_valid_calls_and_each_tool(toolbox):
    """A reply without a call is no attempt; a malformed, unknown or badly argued call is one,
    and so is a call whose tool raised; only a call that ran cleanly is valid."""
    from turnrl.eval.tool_use import count_tool_use, tool_metrics
    from turnrl.types import EpisodeCounts

    first, second = EpisodeCounts(), EpisodeCounts()
    raising = '<tool_call>{"name": "search", "arguments": {"query": " "}}</tool_call>'
    for reply in ("just text", "search[cats]", "serch[cats]", "search[ ]", raising,
                  "answer[yes]"):
        count_tool_use(first, toolbox.call(reply)[1])
    count_tool_use(second, toolbox.call("search[dogs]")[1])
    # no call, unknown tool, bad arguments and the raising search are errors; 3 calls ran
    assert (first.tool_calls, first.tool_errors) == (3, 4)
    assert (first.tool_attempts, first.valid_tool_calls) == (5, 2)
    assert first.tool_uses == {"search": 2, "answer": 1}
    metrics = tool_metrics([first, second])
    assert metrics["valid_call_rate"] == pytest.approx(3 / 6)
    assert metrics["tool_calls/search"] == pytest.approx(1.5)
    assert metrics["tool_calls/answer"] == pytest.approx(0.5)
    assert metrics["tool_call_rate"] == 1.0 and tool_metrics([]) == {}
