"""Conformance of the Responses API (``/v1/responses``, the ``openai`` SDK's
``client.responses``) and Anthropic's Messages API (``/v1/messages``, the ``anthropic`` SDK)
with chat completions: every template family x every agent history of
:mod:`test_conformance`, whole and streamed, captures exactly what the chat-completions run
captures, token for token, with the same segments.

The agent keeps its conversation in OpenAI's form (the scenarios are written in it) and
speaks each API natively: before each call it writes the conversation in the API's form
(Anthropic: ``system``, content blocks, ``tool_use``/``tool_result``; Responses:
``instructions``, message items, ``function_call``/``function_call_output`` items), and it
reads the reply back from the API's own reply (text and tool-use blocks; output items).
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest
from test_conformance import (
    CELLS,
    REFUSED,
    SCENARIOS,
    SEGMENTS,
    Agent,
    captured,
    check_capture,
    run,
    servers,  # noqa: F401  (the fixture)
    without_fresh_ids,
)

from turnrl.agents.server import ModelServer

APIS = ("messages", "responses")


def to_anthropic(messages: list[dict[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """OpenAI messages as Anthropic's ``system`` and messages."""
    system = None
    out: list[dict[str, Any]] = []
    for m in messages:
        if m["role"] == "system":
            system = m["content"]
        elif m["role"] == "user":
            out.append({"role": "user", "content": m["content"]})
        elif m["role"] == "assistant":
            blocks: list[dict[str, Any]] = [{"type": "text", "text": m["content"]}] \
                if m.get("content") else []
            blocks += [{"type": "tool_use", "id": c["id"], "name": c["function"]["name"],
                        "input": json.loads(c["function"]["arguments"])}
                       for c in m.get("tool_calls", [])]
            out.append({"role": "assistant", "content": blocks})
        else:
            result = {"type": "tool_result", "tool_use_id": m["tool_call_id"],
                      "content": m["content"]}
            if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list):
                out[-1]["content"].append(result)
            else:
                out.append({"role": "user", "content": [result]})
    return system, out


def to_responses(messages: list[dict[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """OpenAI messages as the Responses API's ``instructions`` and input items."""
    instructions = None
    items: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        if m["role"] == "system" and i == 0:
            instructions = m["content"]
        elif m["role"] in ("system", "user"):
            items.append({"role": m["role"], "content": m["content"]})
        elif m["role"] == "assistant":
            if m.get("content"):
                items.append({"type": "message", "role": "assistant", "content": [
                    {"type": "output_text", "text": m["content"], "annotations": []}]})
            items += [{"type": "function_call", "call_id": c["id"],
                       "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
                      for c in m.get("tool_calls", [])]
        else:
            items.append({"type": "function_call_output", "call_id": m["tool_call_id"],
                          "output": m["content"]})
    return instructions, items


def as_openai(text: str, calls: list[tuple[str, str, str]]) -> dict[str, Any]:
    """The assistant message (OpenAI's form) of a reply's text and ``(id, name, arguments)``."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [{"id": i, "type": "function",
                                  "function": {"name": n, "arguments": a}} for i, n, a in calls]
    return message


class ApiAgent(Agent):
    """An agent run speaking ``api`` (``messages`` or ``responses``)."""

    def __init__(self, server: ModelServer, template: str, *, api: str, stream: bool) -> None:
        super().__init__(server, template, stream=stream)
        self.api = api
        self.anthropic = anthropic.Anthropic(base_url=server.url(self.key)[:-len("/v1")],
                                             api_key=self.key, max_retries=0)

    def ask(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
            ) -> dict[str, Any]:
        specs = [t["function"] for t in tools or []]
        if self.api == "messages":
            system, conversation = to_anthropic(messages)
            kwargs: dict[str, Any] = {"model": "policy", "max_tokens": 512,
                                      "messages": conversation}
            if system is not None:
                kwargs["system"] = system
            if specs:
                kwargs["tools"] = [{"name": s["name"], "description": s["description"],
                                    "input_schema": s["parameters"]} for s in specs]
            if self.stream:
                with self.anthropic.messages.stream(**kwargs) as stream:
                    reply = stream.get_final_message()
            else:
                reply = self.anthropic.messages.create(**kwargs)
            text = "".join(b.text for b in reply.content if b.type == "text")
            return as_openai(text, [(b.id, b.name, json.dumps(b.input))
                                    for b in reply.content if b.type == "tool_use"])
        instructions, items = to_responses(messages)
        kwargs = {"model": "policy", "input": items}
        if instructions is not None:
            kwargs["instructions"] = instructions
        if specs:
            kwargs["tools"] = [{"type": "function", **s} for s in specs]
        if self.stream:
            with self.client.responses.stream(**kwargs) as stream:
                response = stream.get_final_response()
        else:
            response = self.client.responses.create(**kwargs)
        text = "".join(part.text for item in response.output if item.type == "message"
                       for part in item.content)
        return as_openai(text, [(item.call_id, item.name, item.arguments)
                                for item in response.output if item.type == "function_call"])

    def call(self, messages: list[dict[str, Any]], says: dict[str, Any],
             tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        from test_conformance import Call, model_text

        from turnrl.agents.protocol import normalize_message

        self.engine.script.append(model_text(self.template, says))
        index, samples = self.session.calls, len(self.engine.samples)
        reply = self.ask(messages, tools)
        assert len(self.engine.samples) == samples + 1
        self.calls[index] = Call([normalize_message(m) for m in messages], tools,
                                 self.engine.samples[-1])
        self.replies.append(reply)
        return reply


def run_api(server: ModelServer, template: str, scenario: str, *, api: str,
            stream: bool) -> ApiAgent:
    agent = ApiAgent(server, template, api=api, stream=stream)
    try:
        if (template, scenario) in REFUSED:
            error = anthropic.BadRequestError if api == "messages" else openai.BadRequestError
            with pytest.raises(error) as refused:
                SCENARIOS[scenario](agent)
            assert "single tool-calls" in str(refused.value)
            agent.engine.script.clear()
        else:
            SCENARIOS[scenario](agent)
        assert not agent.engine.script
    finally:
        agent.close()
    return agent


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(("template", "scenario"), CELLS)
def test_each_api_captures_what_chat_completions_capture(servers, template: str,  # noqa: F811
                                                         scenario: str, api: str,
                                                         stream: bool) -> None:
    chat = run(servers[template], template, scenario, stream=False)
    agent = run_api(servers[template], template, scenario, api=api, stream=stream)
    check_capture(agent)
    assert len(agent.session.sampled_segments()) == SEGMENTS[template][scenario]
    assert captured(agent.session) == captured(chat.session)
    assert [without_fresh_ids(r) for r in agent.replies] == [
        without_fresh_ids(r) for r in chat.replies]


def test_the_openai_agents_sdk_default_model_runs_a_tool_loop_token_exactly(servers) -> None:  # noqa: F811
    """The OpenAI Agents SDK as a user writes it (its default model speaks the Responses API;
    no model class chosen, tracing left as it is): the model calls a tool, the SDK runs it
    and sends the result back, the model answers; the capture is one segment holding both
    sampled replies, whose prompts are exactly what the SDK sent."""
    import asyncio

    agents = pytest.importorskip("agents")
    from test_conformance import CALC, calls, model_text, says

    server = servers["qwen3"]
    engine = server.engine
    engine.script[:] = [model_text("qwen3", calls(CALC)), model_text("qwen3", says("4"))]
    key, session = server.open_session()
    seen: list[str] = []

    @agents.function_tool
    def calculator(expression: str) -> str:
        """Evaluate an arithmetic expression."""
        seen.append(expression)
        return "4"

    async def main() -> str:
        client = openai.AsyncOpenAI(base_url=server.url(key), api_key=key, max_retries=0)
        agent = agents.Agent(name="solver", instructions="Answer briefly.",
                             tools=[calculator], model="policy")
        config = agents.RunConfig(model_provider=agents.OpenAIProvider(openai_client=client))
        result = await agents.Runner.run(agent, "What is 2 + 2?", run_config=config)
        return result.final_output

    try:
        assert asyncio.run(main()) == "4"
    finally:
        server.close_session(key)
    assert seen == ["2 + 2"] and not engine.script
    assert [rid[:5] for rid in session.response_ids] == ["resp_", "resp_"]  # the Responses API
    segments = session.sampled_segments()
    assert len(segments) == 1 and segments[0].calls == [0, 1]
    ledger = segments[0].ledger
    first, second = engine.samples[-2:]
    assert ledger.token_ids[:len(second.prompt)] == second.prompt
    assert second.prompt[:len(first.prompt)] == first.prompt
    sampled = [i for i, m in enumerate(ledger.loss_mask) if m]
    assert len(sampled) == len(first.token_ids) + len(second.token_ids)
