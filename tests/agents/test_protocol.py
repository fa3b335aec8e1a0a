"""The OpenAI wire format: request checks, message normal form, replies read by the openai SDK.

The SDK checks run the real ``openai`` client against an in-process fake server
(``httpx.MockTransport``): the bodies it parses are the ones ``client.chat.completions.create``
really sends, and the replies are read by the SDK's own response and stream parsers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types import Completion, Model
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from pydantic import ValidationError

from turnrl.agents.protocol import (
    ChatRequest,
    Choice,
    CompletionRequest,
    Limits,
    OpenAIError,
    Usage,
    chat_chunks,
    chat_completion,
    completion,
    completion_chunks,
    models_list,
    parse_chat_request,
    parse_completion_request,
)
from turnrl.agents.protocol.bodies import ChatCompletionBody, CompletionBody

LIMITS = Limits(max_tokens=256, max_n=4, max_top_logprobs=5)
USER = {"role": "user", "content": "What is 2 + 2?"}
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]},
    },
}
SEARCH_TOOL = {"type": "function", "function": {"name": "search-web_2"}}
HEADER = {"id": "chatcmpl-1", "model": "policy", "created": 1_700_000_000}


def chat_body(**params: Any) -> dict[str, Any]:
    return {"model": "policy", "messages": [USER], **params}


def completion_body(**params: Any) -> dict[str, Any]:
    return {"model": "policy", "prompt": "Once upon a time", **params}


def refused(parse: Callable[[object, Limits], object], body: object,
            limits: Limits = LIMITS) -> OpenAIError:
    """The error ``parse`` raises on ``body``, checked to be a 400 invalid_request_error."""
    with pytest.raises(OpenAIError) as caught:
        parse(body, limits)
    error = caught.value
    assert error.status == 400
    assert error.type == "invalid_request_error"
    assert str(error) == error.message
    return error


def chat_refused(**params: Any) -> OpenAIError:
    return refused(parse_chat_request, chat_body(**params))


def completion_refused(**params: Any) -> OpenAIError:
    return refused(parse_completion_request, completion_body(**params))


def messages_of(*messages: object) -> list[dict[str, Any]]:
    return parse_chat_request(chat_body(messages=list(messages)), LIMITS).messages


def message_refused(*messages: object) -> OpenAIError:
    return chat_refused(messages=list(messages))


# --------------------------------------------------------------------------------------------
# OpenAIError and Limits
# --------------------------------------------------------------------------------------------


def test_error_body_is_openais_shape():
    error = OpenAIError("bad", param="n", code="invalid_value")
    assert error.body() == {"error": {"message": "bad", "type": "invalid_request_error",
                                      "param": "n", "code": "invalid_value"}}
    other = OpenAIError("gone", status=404, type="not_found_error")
    assert (other.status, other.param, other.code) == (404, None, None)
    assert other.body()["error"]["type"] == "not_found_error"


@pytest.mark.parametrize("fields", [{"max_tokens": 0}, {"max_tokens": 8, "max_n": 0},
                                    {"max_tokens": 8, "max_top_logprobs": -1},
                                    {"max_tokens": True}, {"max_tokens": 8.0}])
def test_limits_refuse_impossible_values(fields):
    with pytest.raises(ValueError, match="Limits"):
        Limits(**fields)


# --------------------------------------------------------------------------------------------
# Chat requests: defaults and parameters
# --------------------------------------------------------------------------------------------


def test_chat_defaults():
    request = parse_chat_request(chat_body(), LIMITS)
    assert request == ChatRequest(
        model="policy", messages=[USER], tools=None, tool_choice=None, temperature=1.0,
        top_p=1.0, max_tokens=256, stop=(), seed=None, n=1, logprobs=False, top_logprobs=0,
        stream=False, include_usage=False, clamped=())


def test_chat_parameters_are_read():
    request = parse_chat_request(chat_body(
        temperature=0, top_p=0.5, max_tokens=10, stop=["\n", "END"], seed=-3, n=4,
        logprobs=True, top_logprobs=5, stream=True, stream_options={"include_usage": True},
    ), LIMITS)
    assert (request.temperature, request.top_p, request.max_tokens) == (0.0, 0.5, 10)
    assert isinstance(request.temperature, float)
    assert (request.stop, request.seed, request.n) == (("\n", "END"), -3, 4)
    assert (request.logprobs, request.top_logprobs) == (True, 5)
    assert (request.stream, request.include_usage, request.clamped) == (True, True, ())


def test_null_parameters_count_as_not_given():
    request = parse_chat_request(chat_body(
        temperature=None, top_p=None, max_tokens=None, max_completion_tokens=None, stop=None,
        seed=None, n=None, logprobs=None, top_logprobs=None, stream=None, stream_options=None,
        tools=None, tool_choice=None, frequency_penalty=None, logit_bias=None,
        response_format=None, functions=None, reasoning_effort=None, user=None,
    ), LIMITS)
    assert request == parse_chat_request(chat_body(), LIMITS)


def test_single_stop_string_becomes_a_tuple():
    assert parse_chat_request(chat_body(stop="###"), LIMITS).stop == ("###",)
    assert parse_chat_request(chat_body(stop=[]), LIMITS).stop == ()


def test_accepted_and_ignored_parameters():
    request = parse_chat_request(chat_body(
        user="u-1", metadata={"run": "a"}, store=False, parallel_tool_calls=False,
        frequency_penalty=0, presence_penalty=0.0, logit_bias={},
        response_format={"type": "text"},
    ), LIMITS)
    assert request == parse_chat_request(chat_body(), LIMITS)


@pytest.mark.parametrize(("given", "clamped", "expected"), [
    ({"max_tokens": 1000}, ("max_tokens",), 256),
    ({"max_completion_tokens": 1000}, ("max_completion_tokens",), 256),
    ({"max_completion_tokens": 256}, (), 256),
    ({"max_completion_tokens": 7, "max_tokens": 7}, (), 7),
    ({"max_completion_tokens": 1}, (), 1),
])
def test_max_tokens_is_clamped_to_the_runs_cap(given, clamped, expected):
    request = parse_chat_request(chat_body(**given), LIMITS)
    assert (request.max_tokens, request.clamped) == (expected, clamped)


def test_max_completion_tokens_wins_and_contradiction_is_refused():
    request = parse_chat_request(chat_body(max_completion_tokens=5, max_tokens=None), LIMITS)
    assert request.max_tokens == 5
    error = chat_refused(max_completion_tokens=5, max_tokens=6)
    assert error.param == "max_completion_tokens"
    assert "'max_tokens' = 6" in error.message and "only one" in error.message


# (params, the param the error names, fragments its message must contain)
BAD_CHAT_PARAMS = [
    ({"temperature": 2.5}, "temperature", ["2.5", "out of range", "from 0 to 2"]),
    ({"temperature": -0.1}, "temperature", ["out of range"]),
    ({"temperature": "0.5"}, "temperature", ['"0.5" (a JSON string)', "a number"]),
    ({"temperature": True}, "temperature", ["true (a JSON boolean)"]),
    ({"temperature": float("nan")}, "temperature", ["a number"]),
    ({"top_p": 0}, "top_p", ["out of range", "above 0 and at most 1"]),
    ({"top_p": 1.01}, "top_p", ["at most 1"]),
    ({"top_p": [1]}, "top_p", ["(a JSON array)"]),
    ({"max_tokens": 0}, "max_tokens", ["0 is out of range", ">= 1", "clamped", "256"]),
    ({"max_completion_tokens": -5}, "max_completion_tokens", ["out of range"]),
    ({"max_tokens": 10.0}, "max_tokens", ["an integer", "10.0 (a JSON number)"]),
    ({"max_tokens": "10"}, "max_tokens", ['"10" (a JSON string)']),
    ({"max_tokens": False}, "max_tokens", ["(a JSON boolean)"]),
    ({"n": 5}, "n", ["5 is out of range", "from 1 to 4", "limit"]),
    ({"n": 0}, "n", ["out of range"]),
    ({"n": 2.0}, "n", ["an integer"]),
    ({"seed": 1.5}, "seed", ["64-bit signed integer", "1.5 (a JSON number)"]),
    ({"seed": True}, "seed", ["(a JSON boolean)"]),
    ({"seed": 2**70}, "seed", ["out of range", "64-bit"]),
    ({"stop": ["a", "b", "c", "d", "e"]}, "stop", ["5 stop strings", "up to 4"]),
    ({"stop": ""}, "stop", ["non-empty"]),
    ({"stop": ["ok", ""]}, "stop", ['""']),
    ({"stop": ["ok", 3]}, "stop", ["3 (a JSON integer)"]),
    ({"stop": 3}, "stop", ["3 (a JSON integer)"]),
    ({"logprobs": 1}, "logprobs", ["a boolean", "1 (a JSON integer)"]),
    ({"logprobs": "true"}, "logprobs", ["a boolean"]),
    ({"top_logprobs": 2}, "top_logprobs", ["'logprobs' is true"]),
    ({"logprobs": False, "top_logprobs": 0}, "top_logprobs", ["'logprobs' is true"]),
    ({"logprobs": True, "top_logprobs": 6}, "top_logprobs", ["out of range", "0 to 5"]),
    ({"logprobs": True, "top_logprobs": -1}, "top_logprobs", ["out of range"]),
    ({"stream": "yes"}, "stream", ["a boolean"]),
    ({"stream_options": {"include_usage": True}}, "stream_options", ["'stream' is true"]),
    ({"stream": False, "stream_options": {}}, "stream_options", ["'stream' is true"]),
    ({"stream": True, "stream_options": {"include_usage": 1}}, "stream_options.include_usage",
     ["a boolean"]),
    ({"stream": True, "stream_options": {"chunk_size": 1}}, "stream_options.chunk_size",
     ["include_usage"]),
    ({"stream": True, "stream_options": True}, "stream_options", ["an object"]),
    ({"model": ""}, "model", ["non-empty string"]),
    ({"model": 3}, "model", ["3 (a JSON integer)"]),
    ({"user": 5}, "user", ["a string"]),
    ({"store": "no"}, "store", ["a boolean"]),
    ({"parallel_tool_calls": 0}, "parallel_tool_calls", ["a boolean"]),
    ({"metadata": []}, "metadata", ["an object"]),
]


@pytest.mark.parametrize(("params", "param", "fragments"), BAD_CHAT_PARAMS,
                         ids=[f"{case[1]}-{i}" for i, case in enumerate(BAD_CHAT_PARAMS)])
def test_bad_chat_parameters_are_refused_naming_the_param(params, param, fragments):
    error = chat_refused(**params)
    assert error.param == param
    assert f"'{param}'" in error.message
    for fragment in fragments:
        assert fragment in error.message
    assert error.code in ("invalid_type", "invalid_value", "unsupported_parameter")


def test_missing_model_and_messages():
    for missing in ("model", "messages"):
        body = chat_body()
        del body[missing]
        error = refused(parse_chat_request, body)
        assert (error.param, error.code) == (missing, "missing_required_parameter")
    assert "/v1/models" in refused(parse_chat_request, {"messages": [USER]}).message


@pytest.mark.parametrize("body", [[USER], "text", None, 3])
def test_a_body_that_is_not_an_object_is_refused(body):
    error = refused(parse_chat_request, body)
    assert error.param is None
    assert "JSON object" in error.message


@pytest.mark.parametrize("param", ["top_k", "min_p", "reasoning_effort", "modalities",
                                   "prediction", "service_tier", "audio", "echo"])
def test_unknown_parameters_are_refused_with_the_accepted_list(param):
    error = chat_refused(**{param: 1})
    assert (error.param, error.code) == (param, "unsupported_parameter")
    assert f"Unsupported parameter '{param}'" in error.message
    assert "/v1/chat/completions accepts" in error.message
    assert "max_completion_tokens" in error.message and "extra_body" in error.message


@pytest.mark.parametrize(("param", "value", "fix"), [
    ("functions", [{"name": "f"}], "'tools'"),
    ("function_call", "auto", "'tool_choice'"),
])
def test_deprecated_function_calling_points_to_tools(param, value, fix):
    error = chat_refused(**{param: value})
    assert error.param == param
    assert "deprecated" in error.message and fix in error.message


@pytest.mark.parametrize(("param", "value", "fragment"), [
    ("frequency_penalty", 0.5, "penalties are not supported"),
    ("presence_penalty", -1, "set it to 0"),
    ("logit_bias", {"50256": -100}, "logit bias is not supported"),
    ("response_format", {"type": "json_object"}, "structured outputs"),
    ("response_format", {"type": "json_schema", "json_schema": {"name": "x"}}, "in the prompt"),
])
def test_sampling_changes_are_refused_with_the_reason(param, value, fragment):
    error = chat_refused(**{param: value})
    assert (error.param, error.code) == (param, "unsupported_value")
    assert fragment in error.message
    assert "logprobs" in error.message  # the reason: training uses the sampling logprobs


@pytest.mark.parametrize(("param", "value"), [
    ("frequency_penalty", "0"), ("presence_penalty", True), ("logit_bias", []),
    ("response_format", "text"),
])
def test_sampling_change_params_are_type_checked(param, value):
    error = chat_refused(**{param: value})
    assert (error.param, error.code) == (param, "invalid_type")


# --------------------------------------------------------------------------------------------
# Messages: normal form
# --------------------------------------------------------------------------------------------


def test_plain_messages_are_kept():
    messages = [{"role": "system", "content": "Be brief."}, USER,
                {"role": "assistant", "content": "4"}, {"role": "user", "content": ""}]
    assert messages_of(*messages) == messages


def test_developer_becomes_system():
    assert messages_of({"role": "developer", "content": "Rules."}, USER)[0] == {
        "role": "system", "content": "Rules."}


def test_text_parts_are_joined_without_separator():
    parts = [{"type": "text", "text": "Hello, "}, {"type": "text", "text": "world"}]
    assert messages_of({"role": "user", "content": parts}) == [
        {"role": "user", "content": "Hello, world"}]
    assert messages_of({"role": "user", "content": []}) == [{"role": "user", "content": ""}]
    assert messages_of({"role": "tool", "tool_call_id": "c", "content": parts})[0][
        "content"] == "Hello, world"


def test_assistant_tool_calls_are_normalised_with_parsed_arguments():
    message = {
        "role": "assistant", "content": None, "refusal": None, "annotations": [],
        "audio": None, "function_call": None,
        "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "get_weather", "arguments": '{"city": "Paris", "days": [1, 2]}'}}],
    }
    assert messages_of(USER, message)[1] == {
        "role": "assistant", "content": "",
        "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2]}}}],
    }


def test_tool_call_without_type_is_a_function_call():
    message = {"role": "assistant", "content": "Let me look.",
               "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}]}
    assert messages_of(message)[0]["tool_calls"] == [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": {}}}]


def test_empty_tool_calls_are_dropped():
    assert messages_of({"role": "assistant", "content": "hi", "tool_calls": []}) == [
        {"role": "assistant", "content": "hi"}]
    assert messages_of({"role": "assistant", "content": "hi", "tool_calls": None}) == [
        {"role": "assistant", "content": "hi"}]


def test_tool_messages_keep_call_id_and_name():
    message = {"role": "tool", "tool_call_id": "call_1", "name": "get_weather",
               "content": "sunny"}
    assert messages_of(message) == [message]


def test_names_and_reasoning_are_kept_other_keys_dropped():
    messages = messages_of(
        {"role": "system", "content": "s", "name": "rules", "extra": 1},
        {"role": "user", "content": "u", "name": "alice", "tool_call_id": "x"},
        {"role": "assistant", "content": "a", "reasoning_content": "thinking...",
         "refusal": None, "annotations": [], "audio": None, "function_call": None,
         "reasoning": "other"},
        {"role": "user", "content": "u", "reasoning_content": "not for users",
         "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}]},
    )
    assert messages == [
        {"role": "system", "content": "s", "name": "rules"},
        {"role": "user", "content": "u", "name": "alice"},
        {"role": "assistant", "content": "a", "reasoning_content": "thinking..."},
        {"role": "user", "content": "u"},
    ]


def test_normal_form_is_deterministic_and_independent_of_the_input():
    raw = [{"role": "developer", "content": [{"type": "text", "text": "x"}]},
           {"role": "assistant", "content": None, "tool_calls": [
               {"id": "c", "type": "function",
                "function": {"name": "f", "arguments": '{"b": 1, "a": {"c": [1]}}'}}]}]
    snapshot = json.dumps(raw)
    first, second = messages_of(*raw), messages_of(*json.loads(snapshot))
    assert first == second
    assert json.dumps(first) == json.dumps(second)
    assert json.dumps(raw) == snapshot  # the input is not modified
    first[1]["tool_calls"][0]["function"]["arguments"]["a"]["c"].append(2)
    assert json.dumps(raw) == snapshot  # and shares nothing with the output


def test_a_normalised_history_normalises_to_itself_once_arguments_are_re_encoded():
    history = messages_of(
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"x":1}'}}]})
    resent = [{**m, "tool_calls": [{**call, "function": {
        **call["function"], "arguments": json.dumps(call["function"]["arguments"])}}
        for call in m["tool_calls"]]} for m in history]
    assert messages_of(*resent) == history


# (messages, the param the error names, fragments its message must contain)
BAD_MESSAGES = [
    (["hello"], "messages[0]", ["a message object", '"hello" (a JSON string)']),
    ([USER, None], "messages[1]", ["null"]),
    ([{"content": "x"}], "messages[0].role", ["needs a role", "system, user, assistant, tool"]),
    ([{"role": "function", "content": "x", "name": "f"}], "messages[0].role",
     ['"function"', "system, user, assistant, tool", "developer"]),
    ([{"role": "bot", "content": "x"}], "messages[0].role", ['"bot"']),
    ([{"role": 1, "content": "x"}], "messages[0].role", ["1 (a JSON integer)"]),
    ([{"role": "user"}], "messages[0].content", ["tool_calls", '""']),
    ([{"role": "user", "content": None}], "messages[0].content", ["tool_calls"]),
    ([{"role": "assistant", "content": None}], "messages[0].content", ["tool_calls"]),
    ([{"role": "assistant", "content": None, "tool_calls": []}], "messages[0].content",
     ["tool_calls"]),
    ([{"role": "user", "content": 7}], "messages[0].content", ["a string or an array"]),
    ([{"role": "user", "content": [{"type": "text", "text": "hi"},
                                   {"type": "image_url", "image_url": {"url": "http://x"}}]}],
     "messages[0].content", ["only text is supported", "'image_url'", "content[1]"]),
    ([{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}],
     "messages[0].content", ["only text", "'input_audio'"]),
    ([{"role": "user", "content": [{"type": "file", "file": {}}]}], "messages[0].content",
     ["only text"]),
    ([{"role": "user", "content": ["hi"]}], "messages[0].content", ['"hi" (a JSON string)']),
    ([{"role": "user", "content": [{"type": "text", "text": 3}]}],
     "messages[0].content[0].text", ["a string"]),
    ([{"role": "user", "content": "x", "name": 3}], "messages[0].name", ["a string"]),
    ([{"role": "tool", "content": "x"}], "messages[0].tool_call_id", ["call's id"]),
    ([{"role": "tool", "content": "x", "tool_call_id": 1}], "messages[0].tool_call_id",
     ["a string"]),
    ([{"role": "assistant", "content": "x", "reasoning_content": ["t"]}],
     "messages[0].reasoning_content", ["a string"]),
    ([{"role": "assistant", "content": "x", "tool_calls": {"id": "c"}}],
     "messages[0].tool_calls", ["an array"]),
    ([{"role": "assistant", "content": "x", "tool_calls": ["c"]}], "messages[0].tool_calls[0]",
     ['"c"']),
    ([{"role": "assistant", "content": "x", "tool_calls": [
        {"type": "function", "function": {"name": "f", "arguments": "{}"}}]}],
     "messages[0].tool_calls[0].id", ["a string"]),
    ([{"role": "assistant", "content": "x", "tool_calls": [
        {"id": "c", "type": "custom", "custom": {"name": "f", "input": "x"}}]}],
     "messages[0].tool_calls[0].type", ['"custom"', '"function"']),
    ([{"role": "assistant", "content": "x", "tool_calls": [{"id": "c"}]}],
     "messages[0].tool_calls[0].function", ["an object"]),
    ([{"role": "assistant", "content": "x", "tool_calls": [
        {"id": "c", "function": {"arguments": "{}"}}]}],
     "messages[0].tool_calls[0].function.name", ["non-empty string"]),
    ([USER, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "function": {"name": "f", "arguments": "{}"}},
        {"id": "b", "function": {"name": "f", "arguments": "{city: Paris}"}}]}],
     "messages[1].tool_calls[1].function.arguments", ["not valid JSON", "object"]),
    ([{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "function": {"name": "f", "arguments": "[1, 2]"}}]}],
     "messages[0].tool_calls[0].function.arguments", ["[1, 2] (a JSON array)", "object"]),
    ([{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "function": {"name": "f", "arguments": {"x": 1}}}]}],
     "messages[0].tool_calls[0].function.arguments", ["JSON text", "(a JSON object)"]),
    ([{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "function": {"name": "f", "arguments": ""}}]}],
     "messages[0].tool_calls[0].function.arguments", ["not valid JSON"]),
]


@pytest.mark.parametrize(("messages", "param", "fragments"), BAD_MESSAGES,
                         ids=[f"{case[1]}-{i}" for i, case in enumerate(BAD_MESSAGES)])
def test_bad_messages_are_refused_naming_where(messages, param, fragments):
    error = message_refused(*messages)
    assert error.param == param
    for fragment in fragments:
        assert fragment in error.message


@pytest.mark.parametrize("messages", [[], "hi", {"role": "user", "content": "hi"}])
def test_messages_must_be_a_non_empty_array(messages):
    error = chat_refused(messages=messages)
    assert error.param == "messages"


# --------------------------------------------------------------------------------------------
# Tools and tool_choice
# --------------------------------------------------------------------------------------------


def test_tools_are_kept_as_sent_in_a_deep_copy():
    tools = [WEATHER_TOOL, {**SEARCH_TOOL, "function": {**SEARCH_TOOL["function"],
                                                        "strict": True, "x-extra": 1}}]
    body = chat_body(tools=tools, tool_choice="auto")
    request = parse_chat_request(body, LIMITS)
    assert request.tools == tools and request.tool_choice == "auto"
    request.tools[0]["function"]["parameters"]["required"].append("days")
    assert WEATHER_TOOL["function"]["parameters"]["required"] == ["city"]


def test_empty_tools_are_no_tools():
    assert parse_chat_request(chat_body(tools=[]), LIMITS).tools is None


@pytest.mark.parametrize("choice", ["none", "auto", "required"])
def test_string_tool_choices(choice):
    assert parse_chat_request(chat_body(tools=[WEATHER_TOOL], tool_choice=choice),
                              LIMITS).tool_choice == choice


def test_none_and_auto_need_no_tools():
    assert parse_chat_request(chat_body(tool_choice="none"), LIMITS).tool_choice == "none"
    assert parse_chat_request(chat_body(tool_choice="auto"), LIMITS).tool_choice == "auto"


def test_named_tool_choice_is_normalised():
    named = {"type": "function", "function": {"name": "get_weather", "extra": 1}}
    request = parse_chat_request(chat_body(tools=[SEARCH_TOOL, WEATHER_TOOL],
                                           tool_choice=named), LIMITS)
    assert request.tool_choice == {"type": "function", "function": {"name": "get_weather"}}


BAD_TOOLS = [
    ({"tools": {"type": "function"}}, "tools", ["an array"]),
    ({"tools": ["get_weather"]}, "tools[0]", ["a tool object"]),
    ({"tools": [{"type": "custom", "custom": {"name": "x"}}]}, "tools[0].type",
     ['"custom"', '"function"']),
    ({"tools": [{"function": {"name": "x"}}]}, "tools[0].type", ["null"]),
    ({"tools": [{"type": "function", "name": "x"}]}, "tools[0].function", ["an object"]),
    ({"tools": [WEATHER_TOOL, {"type": "function", "function": {"name": "has space"}}]},
     "tools[1].function.name", ["1 to 64 letters"]),
    ({"tools": [{"type": "function", "function": {"name": "x" * 65}}]},
     "tools[0].function.name", ["1 to 64"]),
    ({"tools": [{"type": "function", "function": {"name": ""}}]}, "tools[0].function.name",
     ['""']),
    ({"tools": [{"type": "function", "function": {}}]}, "tools[0].function.name", ["null"]),
    ({"tools": [{"type": "function", "function": {"name": "f", "description": 1}}]},
     "tools[0].function.description", ["a string"]),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": "{}"}}]},
     "tools[0].function.parameters", ["a JSON schema object"]),
    ({"tools": [{"type": "function", "function": {"name": "f", "strict": "yes"}}]},
     "tools[0].function.strict", ["a boolean"]),
    ({"tools": [WEATHER_TOOL, SEARCH_TOOL, WEATHER_TOOL]}, "tools[2].function.name",
     ["'get_weather'", "twice", "unique"]),
    ({"tool_choice": "required"}, "tool_choice", ["no 'tools'"]),
    ({"tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
     "tool_choice", ["no 'tools'"]),
    ({"tools": [WEATHER_TOOL], "tool_choice": "any"}, "tool_choice",
     ["'any'", '"none", "auto", "required"']),
    ({"tools": [WEATHER_TOOL], "tool_choice": 1}, "tool_choice", ["1 (a JSON integer)"]),
    ({"tools": [WEATHER_TOOL],
      "tool_choice": {"type": "function", "function": {"name": "search"}}},
     "tool_choice", ["'search'", "get_weather"]),
    ({"tools": [WEATHER_TOOL], "tool_choice": {"type": "function", "name": "get_weather"}},
     "tool_choice", ["is not supported"]),
    ({"tools": [WEATHER_TOOL], "tool_choice": {"type": "allowed_tools", "allowed_tools": {}}},
     "tool_choice", ["is not supported"]),
]


@pytest.mark.parametrize(("params", "param", "fragments"), BAD_TOOLS,
                         ids=[f"{case[1]}-{i}" for i, case in enumerate(BAD_TOOLS)])
def test_bad_tools_are_refused_naming_where(params, param, fragments):
    error = chat_refused(**params)
    assert error.param == param
    for fragment in fragments:
        assert fragment in error.message


# --------------------------------------------------------------------------------------------
# Completion requests
# --------------------------------------------------------------------------------------------


def test_completion_defaults():
    assert parse_completion_request(completion_body(), LIMITS) == CompletionRequest(
        model="policy", prompt="Once upon a time", temperature=1.0, top_p=1.0, max_tokens=16,
        stop=(), seed=None, n=1, logprobs=None, stream=False, include_usage=False, echo=False,
        clamped=())


def test_completion_default_max_tokens_respects_a_small_cap():
    request = parse_completion_request(completion_body(), Limits(max_tokens=8))
    assert (request.max_tokens, request.clamped) == (8, ())


def test_completion_parameters_are_read():
    request = parse_completion_request(completion_body(
        max_tokens=1000, temperature=0.7, top_p=0.9, stop="\n", seed=1, n=2, logprobs=5,
        stream=True, stream_options={"include_usage": True}, echo=False, best_of=2,
        suffix="", user="u", frequency_penalty=0, presence_penalty=0, logit_bias={},
    ), LIMITS)
    assert (request.max_tokens, request.clamped) == (256, ("max_tokens",))
    assert (request.temperature, request.top_p, request.stop) == (0.7, 0.9, ("\n",))
    assert (request.seed, request.n, request.logprobs) == (1, 2, 5)
    assert (request.stream, request.include_usage) == (True, True)


@pytest.mark.parametrize(("prompt", "expected"), [
    ("Hi", "Hi"), (["Hi"], "Hi"), ([1, 2, 3], [1, 2, 3]), ([[0, 5]], [0, 5]),
])
def test_one_prompt_as_text_or_token_ids(prompt, expected):
    assert parse_completion_request(completion_body(prompt=prompt), LIMITS).prompt == expected


def test_legacy_logprobs_are_capped_by_the_run_too():
    error = refused(parse_completion_request, completion_body(logprobs=3),
                    Limits(max_tokens=8, max_top_logprobs=2))
    assert error.param == "logprobs" and "0 to 2" in error.message


BAD_COMPLETION_PARAMS = [
    ({"prompt": ["a", "b"]}, "prompt", ["2 prompts", "only one prompt per request", "'n'"]),
    ({"prompt": [[1], [2]]}, "prompt", ["only one prompt per request"]),
    ({"prompt": ""}, "prompt", ["empty"]),
    ({"prompt": []}, "prompt", ["empty"]),
    ({"prompt": [[]]}, "prompt", ["empty"]),
    ({"prompt": [1, -2]}, "prompt", ["-2", "token id"]),
    ({"prompt": [1, True]}, "prompt", ["true (a JSON boolean)"]),
    ({"prompt": [1, "a"]}, "prompt", ['"a"']),
    ({"prompt": 5}, "prompt", ["a string or an array of token ids"]),
    ({"echo": True}, "echo", ["not supported", "false"]),
    ({"echo": "no"}, "echo", ["a boolean"]),
    ({"logprobs": True}, "logprobs", ["an integer", "true (a JSON boolean)", "null"]),
    ({"logprobs": 6}, "logprobs", ["out of range", "0 to 5"]),
    ({"max_tokens": 0}, "max_tokens", ["out of range"]),
    ({"best_of": 3}, "best_of", ["best_of = n"]),
    ({"best_of": "1"}, "best_of", ["an integer"]),
    ({"suffix": "end"}, "suffix", ["not supported"]),
    ({"suffix": 1}, "suffix", ["a string"]),
    ({"n": 9}, "n", ["out of range"]),
    ({"frequency_penalty": 1}, "frequency_penalty", ["not supported"]),
    ({"stream_options": {"include_usage": True}}, "stream_options", ["'stream' is true"]),
    ({"messages": [USER]}, "messages", ["/v1/completions accepts", "prompt"]),
    ({"top_logprobs": 2}, "top_logprobs", ["Unsupported parameter"]),
    ({"max_completion_tokens": 2}, "max_completion_tokens", ["Unsupported parameter"]),
]


@pytest.mark.parametrize(("params", "param", "fragments"), BAD_COMPLETION_PARAMS,
                         ids=[f"{case[1]}-{i}" for i, case in enumerate(BAD_COMPLETION_PARAMS)])
def test_bad_completion_parameters_are_refused(params, param, fragments):
    error = completion_refused(**params)
    assert error.param == param
    for fragment in fragments:
        assert fragment in error.message


def test_missing_prompt():
    error = refused(parse_completion_request, {"model": "policy"})
    assert (error.param, error.code) == ("prompt", "missing_required_parameter")


# --------------------------------------------------------------------------------------------
# Replies, checked with the openai SDK's own types
# --------------------------------------------------------------------------------------------

CALL = {"id": "call_abc", "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
TOKENS = [("Hel", -0.1, [("Hel", -0.1), ("Hi", -2.5)]), ("lo", -0.2, [("lo", -0.2)]),
          (" é", float("-inf"), [])]
USAGE = Usage(prompt_tokens=12, completion_tokens=3, cached_tokens=8)


def events_payloads(events: list[str]) -> list[dict[str, Any]]:
    """The JSON payloads of server-sent events, checking their framing and the final [DONE]."""
    assert events[-1] == "data: [DONE]\n\n"
    for event in events:
        assert event.startswith("data: ") and event.endswith("\n\n")
        assert "\n" not in event[:-2]
    return [json.loads(event[len("data: "):]) for event in events[:-1]]


def reassemble(events: list[str]) -> ChatCompletion:
    """What the SDK's stream accumulator makes of the chunks (it is behind ``.stream()``)."""
    state: ChatCompletionStreamState[Any] = ChatCompletionStreamState()
    for payload in events_payloads(events):
        state.handle_chunk(ChatCompletionChunk.model_validate(payload))
    return state.get_final_completion()


def test_chat_completion_parses_with_the_sdk():
    choices = [Choice(index=0, text="Hello é", finish_reason="stop", logprobs=TOKENS),
               Choice(index=1, text="", finish_reason="tool_calls", tool_calls=[CALL]),
               Choice(index=2, text="Let me check.", finish_reason="tool_calls",
                      tool_calls=[CALL, {**CALL, "id": "call_2"}]),
               Choice(index=3, text="Hel", finish_reason="length")]
    body = chat_completion(**HEADER, choices=choices, usage=USAGE)
    json.dumps(body, allow_nan=False)  # a server can send it as JSON
    parsed = ChatCompletion.model_validate(body)
    assert (parsed.id, parsed.model, parsed.created, parsed.object) == (
        "chatcmpl-1", "policy", 1_700_000_000, "chat.completion")
    first, calls_only, both, cut = parsed.choices
    assert first.message.content == "Hello é" and first.message.tool_calls is None
    assert first.finish_reason == "stop" and first.message.role == "assistant"
    assert first.logprobs is not None and first.logprobs.content is not None
    hel = first.logprobs.content[0]
    assert (hel.token, hel.logprob, hel.bytes) == ("Hel", -0.1, list(b"Hel"))
    assert [(t.token, t.logprob) for t in hel.top_logprobs] == [("Hel", -0.1), ("Hi", -2.5)]
    assert first.logprobs.content[2].logprob == -9999.0  # -inf has no JSON
    assert first.logprobs.content[2].bytes == list(" é".encode())
    assert calls_only.message.content is None and calls_only.finish_reason == "tool_calls"
    assert calls_only.logprobs is None
    call = calls_only.message.tool_calls[0]
    assert (call.id, call.type, call.function.name) == ("call_abc", "function", "get_weather")
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    assert both.message.content == "Let me check."
    assert [c.id for c in both.message.tool_calls] == ["call_abc", "call_2"]
    assert (cut.message.content, cut.finish_reason) == ("Hel", "length")
    usage = parsed.usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (12, 3, 15)
    assert usage.prompt_tokens_details.cached_tokens == 8


def test_an_assistant_reply_can_be_sent_back_as_history():
    """The SDK's message, dumped as agents append it to their history, parses to normal form."""
    body = chat_completion(**HEADER, choices=[
        Choice(index=0, text="", finish_reason="tool_calls", tool_calls=[CALL])], usage=USAGE)
    message = ChatCompletion.model_validate(body).choices[0].message
    history = [USER, message.model_dump(), {"role": "tool", "tool_call_id": "call_abc",
                                            "content": "sunny"}]
    assert messages_of(*history)[1] == {
        "role": "assistant", "content": "",
        "tool_calls": [{"id": "call_abc", "type": "function",
                        "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]}


def test_chat_chunks_parse_and_reassemble_with_the_sdk():
    choices = [Choice(index=0, text="Hello é", finish_reason="stop", logprobs=TOKENS),
               Choice(index=1, text="Let me check.", finish_reason="tool_calls",
                      tool_calls=[CALL, {**CALL, "id": "call_2"}])]
    events = chat_chunks(**HEADER, choices=choices, usage=USAGE)
    payloads = events_payloads(events)
    for payload in payloads:
        chunk = ChatCompletionChunk.model_validate(payload)
        assert chunk.object == "chat.completion.chunk" and chunk.id == "chatcmpl-1"
    assert payloads[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    # one chunk per token when the tokens join to the text
    token_chunks = [p for p in payloads if p["choices"] and p["choices"][0]["logprobs"]]
    assert [p["choices"][0]["delta"]["content"] for p in token_chunks] == ["Hel", "lo", " é"]
    assert payloads[-1] == {**HEADER, "object": "chat.completion.chunk", "choices": [],
                            "usage": {"prompt_tokens": 12, "completion_tokens": 3,
                                      "total_tokens": 15,
                                      "prompt_tokens_details": {"cached_tokens": 8}}}
    assert all(p["usage"] is None for p in payloads[:-1])
    final = reassemble(events)
    assert final.usage.total_tokens == 15
    texts, calls = final.choices[0], final.choices[1]
    assert (texts.message.content, texts.finish_reason) == ("Hello é", "stop")
    assert [t.token for t in texts.logprobs.content] == ["Hel", "lo", " é"]
    assert texts.logprobs.content[0].top_logprobs[1].token == "Hi"
    assert (calls.message.content, calls.finish_reason) == ("Let me check.", "tool_calls")
    assert [(c.id, c.function.name, c.function.arguments) for c in calls.message.tool_calls] == [
        ("call_abc", "get_weather", '{"city": "Paris"}'),
        ("call_2", "get_weather", '{"city": "Paris"}')]


def test_chat_chunks_end_each_choice_with_an_empty_delta_and_the_reason():
    events = chat_chunks(**HEADER, choices=[Choice(index=0, text="4", finish_reason="length")],
                         usage=None)
    payloads = events_payloads(events)
    assert [p["choices"][0]["delta"] for p in payloads] == [
        {"role": "assistant", "content": ""}, {"content": "4"}, {}]
    assert [p["choices"][0]["finish_reason"] for p in payloads] == [None, None, "length"]
    assert all("usage" not in p for p in payloads)


def test_tool_call_chunks_carry_an_index():
    events = chat_chunks(**HEADER, choices=[
        Choice(index=0, text="", finish_reason="tool_calls", tool_calls=[CALL, CALL])],
        usage=None)
    deltas = [p["choices"][0]["delta"] for p in events_payloads(events)]
    assert deltas[1] == {"tool_calls": [{"index": 0, **CALL}]}
    assert deltas[2]["tool_calls"][0]["index"] == 1
    final = reassemble(events).choices[0]
    assert final.message.content == "" and len(final.message.tool_calls) == 2


def test_logprobs_that_do_not_join_to_the_text_go_in_one_chunk():
    """Tool-call markup removed from the text: its tokens' logprobs are still all sent."""
    tokens = [("Hi", -0.1, []), ("<tool_call>", -0.2, []), ("{}", -0.3, [])]
    choice = Choice(index=0, text="Hi", finish_reason="tool_calls", tool_calls=[CALL],
                    logprobs=tokens)
    final = reassemble(chat_chunks(**HEADER, choices=[choice], usage=None)).choices[0]
    assert final.message.content == "Hi"
    assert [t.token for t in final.logprobs.content] == ["Hi", "<tool_call>", "{}"]
    whole = ChatCompletion.model_validate(
        chat_completion(**HEADER, choices=[choice], usage=USAGE)).choices[0]
    assert whole.logprobs == final.logprobs


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.text(max_size=4), st.floats(max_value=0, allow_nan=False)),
                max_size=5),
       st.text(max_size=6), st.booleans(), st.integers(min_value=0, max_value=2))
def test_streamed_and_whole_replies_agree(tokens, other_text, joined, n_calls):
    """Property: whatever the tokens and text, the reassembled stream equals the whole reply."""
    text = "".join(token for token, _ in tokens) if joined else other_text
    logprobs = [(token, logprob, [(token, logprob)]) for token, logprob in tokens]
    calls = [{**CALL, "id": f"call_{k}"} for k in range(n_calls)] or None
    choice = Choice(index=0, text=text, finish_reason="tool_calls" if calls else "stop",
                    tool_calls=calls, logprobs=logprobs or None)
    whole = ChatCompletion.model_validate(
        chat_completion(**HEADER, choices=[choice], usage=USAGE)).choices[0]
    streamed = reassemble(chat_chunks(**HEADER, choices=[choice], usage=USAGE)).choices[0]
    assert streamed.message.content == text  # a stream always opens with content ""
    assert whole.message.content == (None if calls and not text else text)
    assert streamed.finish_reason == whole.finish_reason
    assert streamed.logprobs == whole.logprobs

    def call_fields(message: Any) -> list[tuple[str, str, str]]:
        return [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or []]

    assert call_fields(streamed.message) == call_fields(whole.message)


def test_completion_parses_with_the_sdk():
    choices = [Choice(index=0, text="Hello é", finish_reason="stop", logprobs=TOKENS),
               Choice(index=1, text=" there", finish_reason="length")]
    body = completion(**HEADER, choices=choices, usage=USAGE)
    json.dumps(body, allow_nan=False)
    parsed = Completion.model_validate(body)
    assert parsed.object == "text_completion"
    first, second = parsed.choices
    assert (first.text, first.finish_reason, second.logprobs) == ("Hello é", "stop", None)
    assert first.logprobs.tokens == ["Hel", "lo", " é"]
    assert first.logprobs.token_logprobs == [-0.1, -0.2, -9999.0]
    assert first.logprobs.top_logprobs == [{"Hel": -0.1, "Hi": -2.5}, {"lo": -0.2}, {}]
    assert first.logprobs.text_offset == [0, 3, 5]
    assert (second.text, second.finish_reason) == (" there", "length")
    assert parsed.usage.total_tokens == 15


def strict_completion_chunk(payload: dict[str, Any]) -> Completion:
    """A streamed completion chunk, validated by the SDK's type.

    The SDK's ``CompletionChoice.finish_reason`` is not optional, yet OpenAI itself streams
    ``null`` until the last chunk (the SDK reads streams without validation); that is the one
    error allowed here.
    """
    try:
        return Completion.model_validate(payload)
    except ValidationError as error:
        assert [e["loc"] for e in error.errors()] == [("choices", 0, "finish_reason")]
        assert payload["choices"][0]["finish_reason"] is None
        return Completion.model_construct(**payload)


def test_completion_chunks_reassemble():
    choices = [Choice(index=0, text="Hello é", finish_reason="stop", logprobs=TOKENS),
               Choice(index=1, text=" there", finish_reason="length")]
    events = completion_chunks(**HEADER, choices=choices, usage=USAGE)
    payloads = events_payloads(events)
    for payload in payloads:
        strict_completion_chunk(payload)
        assert payload["object"] == "text_completion"
    text: dict[int, str] = {0: "", 1: ""}
    finish: dict[int, str] = {}
    tokens, offsets = [], []
    for payload in payloads[:-1]:
        (choice,) = payload["choices"]
        text[choice["index"]] += choice["text"]
        if choice["finish_reason"]:
            finish[choice["index"]] = choice["finish_reason"]
        if choice["logprobs"]:
            tokens += choice["logprobs"]["tokens"]
            offsets += choice["logprobs"]["text_offset"]
    assert text == {0: "Hello é", 1: " there"} and finish == {0: "stop", 1: "length"}
    assert tokens == ["Hel", "lo", " é"] and offsets == [0, 3, 5]
    assert payloads[-1]["choices"] == [] and payloads[-1]["usage"]["total_tokens"] == 15
    assert "usage" not in events_payloads(
        completion_chunks(**HEADER, choices=choices, usage=None))[0]


def test_models_list_parses_with_the_sdk():
    body = models_list(["policy", "policy-lora"], created=5)
    assert body["object"] == "list"
    models = [Model.model_validate(entry) for entry in body["data"]]
    assert [(m.id, m.object, m.created, m.owned_by) for m in models] == [
        ("policy", "model", 5, "turnrl"), ("policy-lora", "model", 5, "turnrl")]


@pytest.mark.parametrize(("build", "choice", "fragment"), [
    (chat_completion, Choice(index=0, text="", finish_reason="eos"), "finish_reason"),
    (chat_chunks, Choice(index=0, text="", finish_reason="eos"), "finish_reason"),
    (completion, Choice(index=0, text="", finish_reason="tool_calls"), "finish_reason"),
    (completion_chunks, Choice(index=0, text="", finish_reason="stop", tool_calls=[CALL]),
     "cannot carry tool calls"),
    (chat_completion, Choice(index=0, text="", finish_reason="tool_calls", tool_calls=[
        {"id": "c", "function": {"name": "f", "arguments": {"x": 1}}}]), "json.dumps"),
    (chat_chunks, Choice(index=0, text="", finish_reason="tool_calls", tool_calls=["f"]),
     "tool_calls[0]"),
    (chat_completion, Choice(index=0, text="a", finish_reason="stop",
                             logprobs=[("a", float("nan"), [])]), "logprob"),
    (completion, Choice(index=0, text="a", finish_reason="stop",
                        logprobs=[("a", float("inf"), [])]), "logprob"),
])
def test_builders_refuse_choices_the_api_cannot_carry(build, choice, fragment):
    with pytest.raises(ValueError, match=re.escape(fragment)):
        build(**HEADER, choices=[choice], usage=USAGE)


# --------------------------------------------------------------------------------------------
# End to end with the real openai client, over an in-process transport
# --------------------------------------------------------------------------------------------


class FakeServer:
    """Parses what the SDK sends with this module and answers with this module's replies."""

    def __init__(self, choices: list[Choice]) -> None:
        self.choices = choices
        self.bodies: list[dict[str, Any]] = []
        self.requests: list[ChatRequest | CompletionRequest] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json=models_list(["policy"], created=1))
        body = json.loads(request.content)
        self.bodies.append(body)
        try:
            chat = request.url.path.endswith("/chat/completions")
            parsed = (parse_chat_request if chat else parse_completion_request)(body, LIMITS)
        except OpenAIError as error:
            return httpx.Response(error.status, json=error.body())
        self.requests.append(parsed)
        choices = self.choices[:parsed.n]
        if parsed.stream:
            build_events = chat_chunks if chat else completion_chunks
            usage = USAGE if parsed.include_usage else None
            events = build_events(**HEADER, choices=choices, usage=usage)
            return httpx.Response(200, content="".join(events).encode(),
                                  headers={"content-type": "text/event-stream"})
        build = chat_completion if chat else completion
        return httpx.Response(200, json=build(**HEADER, choices=choices, usage=USAGE))

    def client(self) -> openai.OpenAI:
        http = httpx.Client(transport=httpx.MockTransport(self.handle))
        return openai.OpenAI(api_key="session-key", base_url="http://turnrl.test/v1",
                             http_client=http, max_retries=0)


def test_sdk_chat_request_round_trip():
    server = FakeServer([Choice(index=0, text="", finish_reason="tool_calls", tool_calls=[CALL],
                                logprobs=[("<tool_call>", -0.5, [("<tool_call>", -0.5)])])])
    client = server.client()
    reply = client.chat.completions.create(
        model="policy",
        messages=[{"role": "developer", "content": "Use tools."},
                  {"role": "user", "content": [{"type": "text", "text": "Weather "},
                                               {"type": "text", "text": "in Paris?"}]}],
        tools=[WEATHER_TOOL], tool_choice="auto", temperature=0.7, top_p=0.95,
        max_completion_tokens=4096, stop=["</s>"], seed=7, n=1, logprobs=True, top_logprobs=1,
        parallel_tool_calls=False, user="agent-1", metadata={"task": "3"}, store=False,
    )
    request = server.requests[0]
    assert isinstance(request, ChatRequest)
    assert request.messages == [{"role": "system", "content": "Use tools."},
                                {"role": "user", "content": "Weather in Paris?"}]
    assert request.tools == [WEATHER_TOOL] and request.tool_choice == "auto"
    assert (request.temperature, request.top_p, request.seed) == (0.7, 0.95, 7)
    assert (request.max_tokens, request.clamped) == (256, ("max_completion_tokens",))
    assert (request.stop, request.logprobs, request.top_logprobs) == (("</s>",), True, 1)
    (call,) = reply.choices[0].message.tool_calls
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    assert reply.choices[0].logprobs.content[0].token == "<tool_call>"

    # the agent appends the reply and the tool's answer, and calls again
    follow_up = client.chat.completions.create(
        model="policy",
        messages=[{"role": "user", "content": "Weather in Paris?"},
                  reply.choices[0].message,
                  {"role": "tool", "tool_call_id": call.id, "content": "sunny"}],
        tools=[WEATHER_TOOL])
    assert follow_up.choices[0].finish_reason == "tool_calls"
    assert server.requests[1].messages[1:] == [
        {"role": "assistant", "content": "",
         "tool_calls": [{"id": "call_abc", "type": "function",
                         "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "content": "sunny", "tool_call_id": "call_abc"}]


def test_sdk_streams_chat_with_usage():
    server = FakeServer([Choice(index=0, text="Hello é", finish_reason="stop", logprobs=TOKENS),
                         Choice(index=1, text="Hi", finish_reason="stop")])
    client = server.client()
    stream = client.chat.completions.create(
        model="policy", messages=[USER], stream=True, stream_options={"include_usage": True},
        n=2, logprobs=True)
    state: ChatCompletionStreamState[Any] = ChatCompletionStreamState()
    for chunk in stream:
        state.handle_chunk(chunk)
    final = state.get_final_completion()
    assert [c.message.content for c in final.choices] == ["Hello é", "Hi"]
    assert final.usage.completion_tokens == 3
    assert server.requests[0].include_usage and server.requests[0].n == 2

    with client.chat.completions.stream(model="policy", messages=[USER]) as events:
        deltas = [e.delta for e in events if e.type == "content.delta"]
    assert "".join(deltas) == "Hello é"


def test_sdk_completions_whole_and_streamed():
    server = FakeServer([Choice(index=0, text="Hello é", finish_reason="stop", logprobs=TOKENS)])
    client = server.client()
    whole = client.completions.create(model="policy", prompt=[1, 2, 3], max_tokens=2,
                                      logprobs=2, echo=False)
    assert whole.choices[0].text == "Hello é"
    assert whole.choices[0].logprobs.tokens == ["Hel", "lo", " é"]
    assert server.requests[0].prompt == [1, 2, 3]
    pieces = [choice.text for chunk in client.completions.create(
        model="policy", prompt="Once", stream=True) for choice in chunk.choices]
    assert "".join(pieces) == "Hello é"


def test_sdk_raises_our_errors_as_bad_request():
    client = FakeServer([]).client()
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="policy", messages=[USER], temperature=3)
    assert caught.value.status_code == 400
    assert caught.value.param == "temperature" and caught.value.code == "invalid_value"
    assert "out of range" in caught.value.message
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="policy", messages=[USER],
                                       extra_body={"top_k": 5})
    assert caught.value.param == "top_k"


def test_sdk_lists_models():
    assert [m.id for m in FakeServer([]).client().models.list()] == ["policy"]


@pytest.mark.parametrize(("model", "parse", "body"), [
    (ChatCompletionBody, parse_chat_request, chat_body),
    (CompletionBody, parse_completion_request, completion_body)])
def test_the_body_model_declares_exactly_the_parameters_served(model, parse, body):
    """The pydantic model a route validates with is the one list of its parameters: each it
    declares is served (null counts as not given), an undeclared one is refused naming them
    all, and each optional one keeps the type it publishes in the schema."""
    optional = [name for name, field in model.model_fields.items() if not field.is_required()]
    for name in optional:
        assert parse(body(**{name: None}), LIMITS) == parse(body(), LIMITS)
    error = refused(parse, body(top_k=40))
    assert error.param == "top_k" and error.code == "unsupported_parameter"
    listed = error.message.split("accepts ", 1)[1].split(". Remove", 1)[0].split(", ")
    assert sorted(listed) == sorted(model.model_fields)
    schema = model.model_json_schema()["properties"]
    assert set(schema) == set(model.model_fields)
    assert schema["temperature"]["anyOf"][0] == {"type": "number", "minimum": 0, "maximum": 2}


def test_a_check_that_reads_an_earlier_field_sees_its_checked_value():
    """``tool_choice`` is checked against the checked ``tools``, ``top_logprobs`` against
    ``logprobs`` and ``best_of`` against ``n``: in one body, in any key order."""
    request = parse_chat_request({"tool_choice": {"type": "function", "function": {
        "name": "get_weather"}}, "top_logprobs": 2, "logprobs": True, "tools": [WEATHER_TOOL],
        "messages": [USER], "model": "policy"}, LIMITS)
    assert request.tool_choice == {"type": "function", "function": {"name": "get_weather"}}
    assert request.top_logprobs == 2
    assert parse_completion_request(completion_body(best_of=3, n=3), LIMITS).n == 3
