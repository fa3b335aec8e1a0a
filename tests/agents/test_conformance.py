"""Conformance of the token-exact capture: every family's chat template x every kind of agent
history, end to end over HTTP with the real ``openai`` SDK.

A scripted engine plays the model: for each call it samples the text a model of the
template's family writes for the assistant message the scenario asks for (its own tool-call
format, :func:`chat_templates.sampled_text`) with log-probs ``-0.1 * (i + 1)``, and records
the prompt it was given. The agent echoes every reply as the SDK returns it
(``message.model_dump(exclude_none=True)``). Every cell checks the ledger invariants of every
segment (:func:`check_capture`) and the number of segments, pinned below.

Segments per run (``+400``: the last call is refused with a 400 naming ``messages``;
``stream``: the streamed runs capture exactly what the whole-response runs do):

========  =====  ======  =========  ===========  ==============  ========  ======  =========  ======
template  plain  system  tool_call  system_tool  parallel_calls  thinking  edited  truncated  stream
========  =====  ======  =========  ===========  ==============  ========  ======  =========  ======
qwen3     1      1       1          1            1               2         2       2          same
llama3    1      1       1          1            1+400           1         2       2          same
mistral   1      3       1          2            1               1         2       3          same
chatml    1      1       1          1            1               1         2       2          same
========  =====  ======  =========  ===========  ==============  ========  ======  =========  ======

The scenarios (:data:`SCENARIOS`): ``plain``: user, assistant, user, assistant, user (3
calls); ``system``: the same after a system message; ``tool_call``: the reply is a tool
call, the agent sends its result, the model answers (2 calls); ``system_tool``: the same
after a system message; ``parallel_calls``: two calls in one reply and both results (2
calls); ``thinking``: a ``<think>...</think>`` reply, then a new user message (2 calls);
``edited``: the agent rewrites its first reply before the next call (2 calls);
``truncated``: system, then the agent drops the first exchange and keeps the system message
and the latest exchange (3 calls). Why the entries above 1 (template properties, not
capture bugs):

- every template / edited, truncated: the history no longer starts with what the segment
  has seen; the new segment's prompt is the edited (or shortened) conversation.
- qwen3 / thinking: Qwen3 strips the thinking of every assistant turn before the last user
  query, so the next call's prompt is not the sampled text: a new segment.
- mistral / system, system_tool, truncated: Mistral renders the system message inside the
  last message only, and only while that is a user message: each new user message moves it
  and a tool result drops it, so with a system prompt every call is a segment of its own.
- llama3 / parallel_calls: the model's two JSON calls come back as two ``tool_calls``, but
  Llama 3.1's template refuses to render two calls in one message: the call that echoes them
  is a 400 (``messages``) and the run keeps the first segment.

(qwen3 / parallel_calls and mistral / tool_call and parallel_calls stay one segment because
``turnrl.models.chat.render`` hands the template every dict in its own key order: a
template's ``tojson`` writes a call's arguments as the model wrote them.
:func:`test_render_is_the_templates_own_rendering` pins that.)

Tool calls parsed into OpenAI ``tool_calls`` (the reply parser reads the JSON format: Qwen's
``<tool_call>{...}</tool_call>``, Llama's bare ``{"name", "parameters"}`` object, each object
of Mistral's ``[TOOL_CALLS] [...]`` list, whose ``"id"`` the model writes is kept):

========  =========  ===========  ==============
template  tool_call  system_tool  parallel_calls
========  =========  ===========  ==============
qwen3     yes        yes          yes
llama3    yes        yes          yes
mistral   yes        yes          yes
chatml    yes        yes          yes
========  =========  ===========  ==============
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import openai
import pytest
from chat_templates import CALC, SEARCH, TEMPLATES, TOOLS, sampled_text, tokenizer_with
from transformers import PreTrainedTokenizerBase

from turnrl.agents.capture import Session
from turnrl.agents.protocol import Limits, normalize_message
from turnrl.agents.replies import split_tool_calls
from turnrl.agents.server import ModelServer
from turnrl.models.chat import encode, render
from turnrl.models.tiny import EOS
from turnrl.rollout.engine import Completion, Engine, SamplingParams

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

# --- the scripted model -----------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    """One ``generate`` call of the scripted engine: what it was given and what it sampled."""

    prompt: list[int]
    token_ids: list[int]
    logprobs: list[float]


class ScriptedEngine:
    """An :class:`~turnrl.rollout.engine.Engine` that samples the texts of :attr:`script` in
    order (ending in EOS), with log-prob ``-0.1 * (i + 1)`` for its ``i``-th token."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase) -> None:
        self.tokenizer = tokenizer
        self.script: list[str] = []
        self.samples: list[Sample] = []

    async def generate(self, prompt_ids: list[int], params: SamplingParams, *,
                       session: str | None = None) -> Completion:
        token_ids = encode(self.tokenizer, self.script.pop(0))
        assert token_ids[-1] == self.tokenizer.eos_token_id
        assert len(token_ids) <= params.max_new_tokens
        logprobs = [-0.1 * (i + 1) for i in range(len(token_ids))]
        self.samples.append(Sample(list(prompt_ids), token_ids, logprobs))
        return Completion(token_ids, logprobs, "stop")

    def load_weights(self, model: Any) -> None:
        pass

    def end_session(self, session: str) -> None:
        pass


def model_text(template: str, message: dict[str, Any]) -> str:
    """What the family's model samples for the assistant ``message``: its own format, except
    two cases :func:`sampled_text` has no format for: the tiny ChatML model writes Qwen/Hermes
    ``<tool_call>{json}</tool_call>`` calls back to back, and a Llama 3.1 model (taught one call per
    message) asked for two writes its JSON calls one per line."""
    calls = message.get("tool_calls") or []
    if template == "chatml" and calls:
        objects = [json.dumps({"name": c["function"]["name"],
                               "arguments": c["function"]["arguments"]}) for c in calls]
        return "".join(f"<tool_call>{o}</tool_call>" for o in objects) + EOS
    if template == "llama3" and len(calls) > 1:
        return "\n".join(sampled_text(template, {**message, "tool_calls": [c]})[:-len(EOS)]
                         for c in calls) + EOS
    return sampled_text(template, message)


# --- the agent --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """A call the agent made (normalised messages, tools) and the engine sample it got."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    sample: Sample


class Agent:
    """One agent run on ``server``: the model answers each call with the assistant message
    the scenario asks for; the agent gets the reply through the SDK and echoes it back."""

    def __init__(self, server: ModelServer, template: str, *, stream: bool) -> None:
        self.server, self.template, self.stream = server, template, stream
        assert isinstance(server.engine, ScriptedEngine)
        self.engine = server.engine
        self.engine.script.clear()
        self.key, self.session = server.open_session()
        self.client = openai.OpenAI(base_url=server.url(self.key), api_key=self.key,
                                    max_retries=0)
        self.calls: dict[int, Call] = {}  # by session-wide call index
        self.replies: list[dict[str, Any]] = []

    def call(self, messages: list[dict[str, Any]], says: dict[str, Any],
             tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The model's reply to ``messages``, as the agent echoes it."""
        self.engine.script.append(model_text(self.template, says))
        index, samples = self.session.calls, len(self.engine.samples)
        kwargs: dict[str, Any] = {"model": "policy", "messages": messages}
        if tools is not None:
            kwargs["tools"] = tools
        if self.stream:
            reply = streamed_message(self.client.chat.completions.create(**kwargs, stream=True))
        else:
            reply = self.client.chat.completions.create(**kwargs).choices[0].message.model_dump(
                exclude_none=True)
        assert len(self.engine.samples) == samples + 1
        self.calls[index] = Call([normalize_message(m) for m in messages], copy.deepcopy(tools),
                                 self.engine.samples[-1])
        self.replies.append(reply)
        return reply

    def close(self) -> Session:
        self.server.close_session(self.key)
        return self.session


def streamed_message(chunks: Iterator[Any]) -> dict[str, Any]:
    """The assistant message of a streamed reply, put together from its chunks as an agent
    does: the content pieces joined, each tool call's pieces joined by its index."""
    content: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            content.append(choice.delta.content or "")
            for piece in choice.delta.tool_calls or []:
                call = calls.setdefault(piece.index, {"id": "", "type": "function",
                                                      "function": {"name": "", "arguments": ""}})
                call["id"] += piece.id or ""
                call["function"]["name"] += piece.function.name or ""
                call["function"]["arguments"] += piece.function.arguments or ""
    text = "".join(content)
    message: dict[str, Any] = {"role": "assistant"}
    if text or not calls:
        message["content"] = text
    if calls:
        message["tool_calls"] = [calls[k] for k in sorted(calls)]
    return message


def results(reply: dict[str, Any], *outputs: str) -> list[dict[str, Any]]:
    """The tool messages answering the reply's tool calls, in order."""
    return [{"role": "tool", "tool_call_id": call["id"], "content": output}
            for call, output in zip(reply["tool_calls"], outputs, strict=True)]


# --- the scenarios ----------------------------------------------------------------------------

SYSTEM = {"role": "system", "content": "Answer briefly."}
ASK = {"role": "user", "content": "What is 2 + 2?"}
AGAIN = {"role": "user", "content": "And 3 + 3?"}
THIRD = {"role": "user", "content": "And 4 + 4?"}
BOTH = {"role": "user", "content": "What is 2 + 2, and the capital of France?"}


def says(content: str) -> dict[str, Any]:
    return {"role": "assistant", "content": content}


def calls(*tool_calls: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": list(tool_calls)}


THINKING = says("<think>\nAdd 2 and 2.\n</think>\n\n4")


def plain(agent: Agent, first: list[dict[str, Any]] | None = None) -> None:
    messages = [*(first or []), ASK]
    messages += [agent.call(messages, says("4")), AGAIN]
    messages += [agent.call(messages, says("6")), THIRD]
    agent.call(messages, says("8"))


def system(agent: Agent) -> None:
    plain(agent, [SYSTEM])


def tool_call(agent: Agent, first: list[dict[str, Any]] | None = None) -> None:
    messages = [*(first or []), ASK]
    reply = agent.call(messages, calls(CALC), TOOLS)
    messages += [reply, *results(reply, "4")]
    agent.call(messages, says("4"), TOOLS)


def system_tool(agent: Agent) -> None:
    tool_call(agent, [SYSTEM])


def parallel_calls(agent: Agent) -> None:
    messages = [BOTH]
    reply = agent.call(messages, calls(CALC, SEARCH), TOOLS)
    messages += [reply, *results(reply, "4", "Paris")]
    agent.call(messages, says("4, and Paris"), TOOLS)


def thinking(agent: Agent) -> None:
    messages = [ASK]
    messages += [agent.call(messages, THINKING), AGAIN]
    agent.call(messages, says("6"))


def edited(agent: Agent) -> None:
    reply = agent.call([ASK], says("4"))
    agent.call([ASK, {**reply, "content": "four"}, AGAIN], says("6"))


def truncated(agent: Agent) -> None:
    messages = [SYSTEM, ASK]
    first = agent.call(messages, says("4"))
    messages += [first, AGAIN]
    second = agent.call(messages, says("6"))
    agent.call([SYSTEM, AGAIN, second, THIRD], says("8"))


SCENARIOS: dict[str, Callable[[Agent], None]] = {
    "plain": plain, "system": system, "tool_call": tool_call, "system_tool": system_tool,
    "parallel_calls": parallel_calls, "thinking": thinking, "edited": edited,
    "truncated": truncated,
}

# Template x scenario: segments per run (the module docstring's table says why).
SEGMENTS: dict[str, dict[str, int]] = {
    "qwen3": {"plain": 1, "system": 1, "tool_call": 1, "system_tool": 1, "parallel_calls": 1,
              "thinking": 2, "edited": 2, "truncated": 2},
    "llama3": {"plain": 1, "system": 1, "tool_call": 1, "system_tool": 1, "parallel_calls": 1,
               "thinking": 1, "edited": 2, "truncated": 2},
    "mistral": {"plain": 1, "system": 3, "tool_call": 1, "system_tool": 2, "parallel_calls": 1,
                "thinking": 1, "edited": 2, "truncated": 3},
    "chatml": {"plain": 1, "system": 1, "tool_call": 1, "system_tool": 1, "parallel_calls": 1,
               "thinking": 1, "edited": 2, "truncated": 2},
}
# The cells whose last call the server refuses with a 400 naming ``messages``.
REFUSED = {("llama3", "parallel_calls")}
TOOL_SCENARIOS = ("tool_call", "system_tool", "parallel_calls")
# Template x tool scenario: did the model's calls come back as OpenAI ``tool_calls``?
TOOL_CALLS_PARSED: dict[str, dict[str, bool]] = {
    template: dict.fromkeys(TOOL_SCENARIOS, True) for template in TEMPLATES}
CELLS = [(template, scenario) for template in TEMPLATES for scenario in SCENARIOS]

CAPTURE_CELLS = CELLS



@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, ModelServer]]:
    """One server per template family, each over a scripted engine of its tokenizer."""
    started: dict[str, ModelServer] = {}
    try:
        for name, template in TEMPLATES.items():
            tokenizer = tokenizer_with(template)
            server = ModelServer(ScriptedEngine(tokenizer), tokenizer, model_name="policy",
                                 limits=Limits(max_tokens=512), max_context_tokens=8192)
            started[name] = server.start()
        yield started
    finally:
        for server in started.values():
            server.close()


def run(server: ModelServer, template: str, scenario: str, *, stream: bool) -> Agent:
    """Play ``scenario``; a refused cell must end in a 400 naming ``messages``."""
    agent = Agent(server, template, stream=stream)
    try:
        if (template, scenario) in REFUSED:
            with pytest.raises(openai.BadRequestError) as error:
                SCENARIOS[scenario](agent)
            assert error.value.body["param"] == "messages"
            assert "single tool-calls" in error.value.body["message"]
            agent.engine.script.clear()  # the refused call's reply was never sampled
        else:
            SCENARIOS[scenario](agent)
        assert not agent.engine.script
    finally:
        agent.close()
    return agent


# --- the invariants ---------------------------------------------------------------------------


def check_capture(agent: Agent) -> None:
    """The ledger invariants of every segment of the run:

    (i) the ledger decodes to its text, and every prompt the engine got is exactly the
    segment's tokens up to that call; (ii) ``loss_mask`` is 1 exactly on the sampled tokens;
    (iii) their log-probs are exactly the engine's; (iv) a segment's text starts with the
    template's rendering of the messages of the call that started it. Every call that was
    sampled is in exactly one segment.
    """
    session, tokenizer = agent.session, agent.server.tokenizer
    segments = session.sampled_segments()
    assert sorted(i for s in segments for i in s.calls) == sorted(agent.calls)
    for segment in segments:
        ledger = segment.ledger
        assert len(ledger.token_ids) == len(ledger.loss_mask) == len(ledger.logprobs)
        assert tokenizer.decode(ledger.token_ids, skip_special_tokens=False) == ledger.text
        first = agent.calls[segment.calls[0]]
        prompt = render(tokenizer, first.messages, add_generation_prompt=True, tools=first.tools)
        assert ledger.text.startswith(prompt)  # (iv)
        assert tokenizer.decode(first.sample.prompt, skip_special_tokens=False) == prompt
        sampled: list[int] = []
        for turn, index in enumerate(segment.calls):
            sample = agent.calls[index].sample
            start, end = len(sample.prompt), len(sample.prompt) + len(sample.token_ids)
            assert ledger.token_ids[:start] == sample.prompt  # (i) what the model saw
            assert ledger.token_ids[start:end] == sample.token_ids
            assert ledger.logprobs[start:end] == sample.logprobs  # (iii) exactly
            assert ledger.turn_index[start:end] == [turn] * (end - start)
            sampled += range(start, end)
        assert end == len(ledger.token_ids)  # the ledger ends with the last sample
        assert [i for i, m in enumerate(ledger.loss_mask) if m] == sampled  # (ii)
        assert all(ledger.logprobs[i] == 0.0
                   for i, m in enumerate(ledger.loss_mask) if not m)


def captured(session: Session) -> list[tuple[Any, ...]]:
    """A session's capture, token for token."""
    return [(s.calls, s.ledger.token_ids, s.ledger.loss_mask, s.ledger.logprobs,
             s.ledger.turn_index, s.ledger.text) for s in session.sampled_segments()]


# --- the tests --------------------------------------------------------------------------------


def test_the_scripted_engine_is_an_engine(servers) -> None:
    assert all(isinstance(server.engine, Engine) for server in servers.values())


@pytest.mark.parametrize(("template", "scenario"), CAPTURE_CELLS)
def test_capture_conforms(servers, template: str, scenario: str) -> None:
    agent = run(servers[template], template, scenario, stream=False)
    check_capture(agent)
    assert len(agent.session.sampled_segments()) == SEGMENTS[template][scenario]
    if scenario in TOOL_SCENARIOS:
        parsed = "tool_calls" in agent.replies[0]
        assert parsed == TOOL_CALLS_PARSED[template][scenario]
        names = [c["function"]["name"] for c in agent.replies[0].get("tool_calls", [])]
        assert names == (["calculator", "search"] if scenario == "parallel_calls"
                         else ["calculator"])


@pytest.mark.parametrize(("template", "scenario"), CELLS)
def test_streaming_captures_the_same(servers, template: str, scenario: str) -> None:
    whole = run(servers[template], template, scenario, stream=False)
    streamed = run(servers[template], template, scenario, stream=True)
    check_capture(streamed)
    assert captured(streamed.session) == captured(whole.session)
    assert [without_fresh_ids(r) for r in streamed.replies] == [
        without_fresh_ids(r) for r in whole.replies]


def without_fresh_ids(reply: dict[str, Any]) -> dict[str, Any]:
    """The normalised reply, without the ids the server draws for calls the model wrote
    without one (the ids the model writes, Mistral's, are the same in both)."""
    message = normalize_message(reply)
    for call in message.get("tool_calls", []):
        if call["id"] not in (CALC["id"], SEARCH["id"]):
            call["id"] = "fresh"
    return message


def test_render_is_the_templates_own_rendering() -> None:
    """``render`` gives what the chat template gives, key order included (tool schemas, a
    call's arguments): with sorted keys, an echoed call re-rendered differently from what the
    model sampled and started a new segment (qwen3 and mistral tool calls)."""
    tokenizer = tokenizer_with(TEMPLATES["qwen3"])
    messages = [BOTH, calls(CALC, SEARCH)]
    assert render(tokenizer, messages, add_generation_prompt=False, tools=TOOLS) == (
        tokenizer.apply_chat_template(messages, tools=TOOLS, tokenize=False))


def _table(doc: str, number: int) -> tuple[list[str], dict[str, list[str]]]:
    """The header and rows of the ``number``-th table of ``doc``."""
    lines = doc.splitlines()
    rules = [i for i, line in enumerate(lines) if line.startswith("=====")][3 * number:]
    rows = {line.split()[0]: line.split()[1:] for line in lines[rules[1] + 1:rules[2]]}
    return lines[rules[0] + 1].split(), rows


def test_docstring_tables_are_the_expectations() -> None:
    header, rows = _table(__doc__ or "", 0)
    assert header == ["template", *SCENARIOS, "stream"]
    assert rows == {t: [f"{SEGMENTS[t][s]}{'+400' if (t, s) in REFUSED else ''}"
                        for s in SCENARIOS] + ["same"] for t in TEMPLATES}
    header, rows = _table(__doc__ or "", 1)
    assert header == ["template", *TOOL_SCENARIOS]
    assert rows == {t: ["yes" if TOOL_CALLS_PARSED[t][s] else "no" for s in TOOL_SCENARIOS]
                    for t in TEMPLATES}


# --- the reply parser keeps the id the model wrote --------------------------------------------


def test_a_call_keeps_the_id_the_model_wrote() -> None:
    """Mistral's template teaches the model to write each call's ``"id"``; the reply must give
    that id back, or the echoed call re-renders with another one and the capture splits."""
    text = sampled_text("mistral", calls(CALC, SEARCH))[:-len(EOS)]
    content, tool_calls = split_tool_calls(text, TOOLS)
    assert [c["id"] for c in tool_calls or []] == ["calc00001", "srch00002"]
    # Mistral's list markup stays in the content (its template ignores an assistant's content
    # when the message has tool calls, so the capture does not depend on it)
    assert content == "[TOOL_CALLS] [, ]"
    assert [json.loads(c["function"]["arguments"]) for c in tool_calls or []] == [
        CALC["function"]["arguments"], SEARCH["function"]["arguments"]]


def test_a_call_without_a_usable_id_gets_a_fresh_one() -> None:
    """No id, a non-string id and a repeated id: each gets a fresh 9-character id."""
    text = ('<tool_call>{"name": "calculator", "arguments": {"expression": "1"}}</tool_call>'
            '<tool_call>{"name": "calculator", "arguments": {}, "id": 7}</tool_call>'
            '<tool_call>{"name": "search", "arguments": {}, "id": "same00001"}</tool_call>'
            '<tool_call>{"name": "search", "arguments": {}, "id": "same00001"}</tool_call>')
    _, tool_calls = split_tool_calls(text, TOOLS)
    ids = [c["id"] for c in tool_calls or []]
    assert len(ids) == 4 and len(set(ids)) == 4 and ids[2] == "same00001"
    assert all(len(i) == 9 and i.isalnum() for i in ids)
