"""Streaming as tokens are sampled: the text deltas add up to the whole reply's content (stop
strings, tool calls, partial characters held back), the first delta arrives while the reply
is still being sampled, and a client that hangs up cancels the generation and leaves
nothing to train."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time

import httpx
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turnrl.agents.calls import Call, CallSpec, to_reply
from turnrl.agents.http import LiveStream
from turnrl.agents.protocol import Limits
from turnrl.agents.server import ModelServer
from turnrl.agents.streaming import TextStream
from turnrl.rollout.engine import Completion, SamplingParams, streams
from turnrl.rollout.hf import HFEngine

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {
    "type": "object", "properties": {"key": {"type": "string"}}}}}]
PIECES = ["Hello", " world", "<tool_call>", '{"name": "lookup", "arguments": {"key": "a"}}',
          "</tool_call>", "STOP", "é", " .", "\n", "{", "`", "  ", "x"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=8), st.booleans(),
       st.sampled_from([(), ("STOP",), ("wor", "\n\n")]))
def test_deltas_add_up_to_the_whole_replys_content(tokenizer, pieces, tools, stops) -> None:
    """Whatever the text, stop strings and tools: every delta extends what was sent, and the
    deltas plus the rest equal the finished reply's content, token by token."""
    ids = tokenizer.encode("".join(pieces), add_special_tokens=False)
    ids.append(tokenizer.eos_token_id)
    stream = TextStream(tokenizer, tokenizer.eos_token_id, stops, tools)
    sent = "".join(stream.push([t]) for t in ids)
    reply = to_reply(tokenizer, tokenizer.eos_token_id,
                     Completion(ids, [0.0] * len(ids), "stop"), stops, TOOLS if tools else None)
    assert reply.text.startswith(sent)
    assert sent + stream.rest(reply.text) == reply.text


def test_text_is_sent_before_a_possible_stop_string_or_tool_call_is_known(tokenizer) -> None:
    stream = TextStream(tokenizer, tokenizer.eos_token_id, ("END",), tools=True)
    assert stream.safe("Let me look EN") == "Let me look"
    assert stream.safe("Let me look END and more") == "Let me look"
    assert stream.safe('Sure. <tool_call>{"name"') == "Sure."
    assert stream.safe("partial \ufffd") == "partial"


class SlowEngine:
    """Samples ``text``'s tokens one per ``tick`` seconds; ``gate`` (if set) holds the reply
    after its first token until it is set; notes a cancelled generation."""

    def __init__(self, tokenizer, text: str, *, tick: float = 0.0,
                 gate: threading.Event | None = None) -> None:
        self.ids = [*tokenizer.encode(text, add_special_tokens=False), tokenizer.eos_token_id]
        self.tick, self.gate = tick, gate
        self.cancelled = threading.Event()
        self.version = 0

    async def generate(self, prompt_ids, params: SamplingParams, *, session=None,
                       on_tokens=None) -> Completion:
        out = []
        try:
            for token in self.ids[:params.max_new_tokens]:
                out.append(token)
                if on_tokens is not None:
                    on_tokens([token], [-0.5])
                if self.gate is not None and len(out) == 1:
                    waited = await asyncio.get_running_loop().run_in_executor(
                        None, self.gate.wait, 20)
                    if not waited:
                        raise RuntimeError("the client never saw the first token")
                await asyncio.sleep(self.tick)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        stop = out[-1] == self.ids[-1]
        return Completion(out, [-0.5] * len(out), "stop" if stop else "length")

    def load_weights(self, model) -> None: ...

    def end_session(self, session) -> None: ...


def serve(engine, tokenizer, **kwargs) -> ModelServer:
    return ModelServer(engine, tokenizer, model_name="policy", limits=Limits(max_tokens=512),
                       max_context_tokens=4096, **kwargs)


def test_the_first_tokens_arrive_while_the_reply_is_still_sampled(tokenizer) -> None:
    """The engine holds the reply after its first token until the client has seen it: a
    stream made only once the reply is done would never get there."""
    gate = threading.Event()
    engine = SlowEngine(tokenizer, "Paris is the capital of France.", gate=gate)
    assert streams(engine)
    with serve(engine, tokenizer, open_access=True) as server:
        client = openai.OpenAI(base_url=server.url(), api_key="x", max_retries=0)
        stream = client.chat.completions.create(
            model="policy", messages=[{"role": "user", "content": "capital?"}], stream=True)
        text = []
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                text.append(chunk.choices[0].delta.content)
                gate.set()
        assert gate.is_set() and "".join(text) == "Paris is the capital of France."
        assert len(text) >= 2  # the first piece came alone


def test_the_hf_engine_streams_the_same_reply_it_gives_whole(tokenizer, load_tiny) -> None:
    engine = HFEngine(load_tiny().eval(), eos_token_id=tokenizer.eos_token_id,
                      pad_token_id=tokenizer.pad_token_id, seed=0)
    assert streams(engine)
    with serve(engine, tokenizer, open_access=True) as server:
        client = openai.OpenAI(base_url=server.url(), api_key="x", max_retries=0)
        ask = {"model": "policy", "messages": [{"role": "user", "content": "hi"}],
               "max_tokens": 24, "seed": 3}
        whole = client.chat.completions.create(**ask).choices[0].message.content
        pieces = [c.choices[0].delta.content or "" for c in
                  client.chat.completions.create(**ask, stream=True) if c.choices]
        assert "".join(pieces) == whole and sum(1 for p in pieces if p) > 1


def _request(server: ModelServer, key: str, stream: bool) -> bytes:
    body = json.dumps({"model": "policy", "stream": stream, "max_tokens": 400,
                       "messages": [{"role": "user", "content": "count"}]}).encode()
    path = f"/s/{key}/v1/chat/completions"
    return (f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n\r\n").encode() + body


@pytest.mark.parametrize("stream", [True, False])
def test_a_client_that_hangs_up_cancels_the_generation(tokenizer, stream) -> None:
    """Mid-stream or while waiting for a whole reply: the engine's generation is cancelled
    and the session records nothing (the call is not answered, no tokens to train)."""
    engine = SlowEngine(tokenizer, "one two three four five six seven " * 20, tick=0.02)
    with serve(engine, tokenizer) as server:
        key, session = server.open_session()
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            sock.sendall(_request(server, key, stream))
            if stream:
                seen = b""
                while b"data:" not in seen:
                    seen += sock.recv(4096)
            else:
                time.sleep(0.3)
        assert engine.cancelled.wait(10), "the generation went on after the client left"
        deadline = time.monotonic() + 5
        while session.in_flight and time.monotonic() < deadline:
            time.sleep(0.02)
        assert session.answered == [] and session.in_flight == 0
        assert all(not segment.ledger.loss_mask or not any(segment.ledger.loss_mask)
                   for segment in session.segments)
        # the server goes on serving
        with httpx.Client() as http:
            reply = http.get(server.url(key) + "/models",
                             headers={"authorization": f"Bearer {key}"})
            assert reply.status_code == 200


@pytest.mark.parametrize("stream", [True, False])
def test_a_client_that_hangs_up_stops_the_hf_engines_decoding(tokenizer, load_tiny,
                                                               stream) -> None:
    """The built-in engine queues a call at once (``submit``): a client that leaves stops
    its row's decoding at the engine's next step, long before its 400 tokens."""
    engine = HFEngine(load_tiny().eval(), eos_token_id=tokenizer.eos_token_id,
                      pad_token_id=tokenizer.pad_token_id, seed=0)
    with serve(engine, tokenizer) as server:
        key, session = server.open_session()
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            sock.sendall(_request(server, key, stream))
            deadline = time.monotonic() + 10
            while engine.stats["decode_tokens"] < 3 and time.monotonic() < deadline:
                time.sleep(0.005)
        deadline = time.monotonic() + 10
        while (engine._rows or session.in_flight) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert engine._rows == [] and session.in_flight == 0 and session.answered == []
        assert engine.stats["decode_tokens"] < 300


def test_a_stream_closed_before_it_began_cancels_its_call(tokenizer) -> None:
    """The endpoint queues a streamed call before its stream starts; a client gone before
    the first event still cancels the generation (``LiveStream``'s ``on_close``)."""
    engine = SlowEngine(tokenizer, "one two three four five six seven " * 20, tick=0.02)
    spec = CallSpec(prompt=[5, 6, 7], max_tokens=400, temperature=1.0, top_p=1.0, seed=0,
                    n=1, model="policy")
    began = []

    async def events():
        began.append(True)
        yield "data: {}\n\n"

    async def main() -> None:
        call = Call({"policy": engine}, tokenizer, tokenizer.eos_token_id, spec, session=None,
                    turn=None, response_id="chatcmpl-x")
        call.start(live=True)
        response = LiveStream(events(), on_close=call.close, media_type="text/event-stream")

        async def send(message) -> None:
            raise OSError("the client is gone")

        async def receive() -> dict:
            return {"type": "http.disconnect"}

        scope = {"type": "http", "asgi": {"spec_version": "2.4"}, "method": "POST"}
        with contextlib.suppress(Exception):
            await response(scope, receive, send)
        await asyncio.sleep(0.05)
        assert call.replies is None and call._futures
        assert all(future.cancelled() for future in call._futures)

    asyncio.run(main())
    assert not began


@pytest.mark.parametrize("stream", [True, False])
def test_a_run_that_trains_partial_replies_keeps_what_was_sampled(tokenizer, stream) -> None:
    """``agent.train_partial``: the cancelled call is answered with the tokens it had
    sampled (a prefix of what the engine would have sampled), masked for training."""
    engine = SlowEngine(tokenizer, "one two three four five six seven " * 20, tick=0.02)
    with serve(engine, tokenizer) as server:
        server.train_partial = True
        key, session = server.open_session()
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            sock.sendall(_request(server, key, stream))
            time.sleep(0.3)
        assert engine.cancelled.wait(10)
        deadline = time.monotonic() + 5
        while not session.answered and time.monotonic() < deadline:
            time.sleep(0.02)
        assert session.answered == [0] and session.in_flight == 0
        (segment,) = session.sampled_segments()
        ledger = segment.ledger
        kept = [t for t, m in zip(ledger.token_ids, ledger.loss_mask, strict=True) if m]
        assert 0 < len(kept) < len(engine.ids) and kept == engine.ids[:len(kept)]
        assert [lp for lp, m in zip(ledger.logprobs, ledger.loss_mask, strict=True) if m] \
            == [-0.5] * len(kept)


@pytest.mark.parametrize("stream", [False, True])
def test_a_responses_reply_is_incomplete_only_at_the_agents_own_limit(tokenizer, stream) -> None:
    """``max_output_tokens`` that ends the reply: ``incomplete`` (max_output_tokens); the run's
    cap ending it (no limit asked): ``completed``, as the Agents SDK fails a run on the former."""
    engine = SlowEngine(tokenizer, "one two three four five six seven " * 20)
    with ModelServer(engine, tokenizer, model_name="policy", limits=Limits(max_tokens=10),
                     max_context_tokens=4096, open_access=True) as server:
        client = openai.OpenAI(base_url=server.url(), api_key="x", max_retries=0)
        for limit, status in ((5, "incomplete"), (None, "completed")):
            ask = {"model": "policy", "input": "count",
                   **({"max_output_tokens": limit} if limit else {})}
            if stream:  # the terminal event is response.completed or response.incomplete
                events = list(client.responses.create(**ask, stream=True))
                assert events[-1].type == f"response.{status}"
                reply = events[-1].response
            else:
                reply = client.responses.create(**ask)
            assert reply.status == status
            assert (reply.incomplete_details.reason if reply.incomplete_details else None) == (
                "max_output_tokens" if limit else None)
            assert reply.usage.output_tokens == (limit or 10)
