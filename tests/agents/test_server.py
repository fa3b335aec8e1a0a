"""The OpenAI-compatible endpoint, driven over HTTP by the real ``openai`` package: replies,
token-exact capture across calls (continued, edited and branched histories), streaming,
errors that leave the server up, and many concurrent sessions."""

from __future__ import annotations

import concurrent.futures

import openai
import pytest
import torch

from turnrl.agents.protocol import Limits
from turnrl.agents.server import ModelServer
from turnrl.models.chat import render
from turnrl.rollout.hf import HFEngine

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

SYSTEM = {"role": "system", "content": "Answer with a number."}


@pytest.fixture(scope="module")
def model(load_tiny):
    return load_tiny().eval()


@pytest.fixture(scope="module")
def server(model, tokenizer):
    engine = HFEngine(model, eos_token_id=tokenizer.eos_token_id,
                      pad_token_id=tokenizer.pad_token_id, seed=0)
    with ModelServer(engine, tokenizer, model_name="policy", limits=Limits(max_tokens=12),
                     max_context_tokens=512, max_calls=6, open_access=True) as server:
        yield server


def client_for(server: ModelServer, key: str | None = None) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url(key), api_key=key or "none", max_retries=0)


def forward_logprobs(model, ids: list[int]) -> torch.Tensor:
    """log π(x_t | x_<t) of every position t ≥ 1 of ``ids``, from one forward pass."""
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, :-1].float()
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(ids[1:])[:, None])[:, 0]


def check_ledger(segment, model, tokenizer) -> None:
    """The capture's invariants: the ledger decodes to the template's rendering of what the
    model saw (prompt and replies), the mask covers exactly the sampled tokens, and their
    log-probs equal a forward pass of the whole sequence."""
    ledger = segment.ledger
    assert len(ledger.token_ids) == len(ledger.loss_mask) == len(ledger.logprobs)
    assert tokenizer.decode(ledger.token_ids, skip_special_tokens=False) == ledger.text
    sampled = [i for i, m in enumerate(ledger.loss_mask) if m]
    assert sampled and ledger.loss_mask[0] == 0
    want = forward_logprobs(model, ledger.token_ids)
    got = torch.tensor([ledger.logprobs[i] for i in sampled])
    assert torch.allclose(got, want[[i - 1 for i in sampled]], atol=1e-4)


def test_a_chat_call_is_answered_and_captured_token_exactly(server, model, tokenizer) -> None:
    key, session = server.open_session()
    try:
        reply = client_for(server, key).chat.completions.create(
            model="policy", messages=[SYSTEM, {"role": "user", "content": "2+2"}], seed=3,
            logprobs=True)
    finally:
        server.close_session(key)
    choice = reply.choices[0]
    assert reply.model == "policy" and choice.finish_reason in ("stop", "length")
    assert isinstance(choice.message.content, str)
    assert reply.usage.completion_tokens == len(choice.logprobs.content) >= 1
    (segment,) = session.sampled_segments()
    check_ledger(segment, model, tokenizer)
    prompt = render(tokenizer, [SYSTEM, {"role": "user", "content": "2+2"}],
                    add_generation_prompt=True)
    assert segment.ledger.text.startswith(prompt)
    assert segment.ledger.text[len(prompt):].startswith(choice.message.content)
    assert [t.logprob for t in choice.logprobs.content] == pytest.approx(
        [lp for lp, m in zip(segment.ledger.logprobs, segment.ledger.loss_mask, strict=True)
         if m])


def test_an_echoed_history_continues_the_segment_and_reuses_its_tokens(server, model,
                                                                      tokenizer) -> None:
    key, session = server.open_session()
    client = client_for(server, key)
    messages = [SYSTEM, {"role": "user", "content": "1+1"}]
    try:
        for turn in range(3):
            reply = client.chat.completions.create(model="policy", messages=messages, seed=turn)
            messages += [reply.choices[0].message.model_dump(exclude_none=True),
                         {"role": "user", "content": f"and {turn}?"}]
        cached = reply.usage.prompt_tokens_details.cached_tokens
    finally:
        server.close_session(key)
    (segment,) = session.sampled_segments()  # never re-tokenized: one ledger
    assert segment.calls == [0, 1, 2] and cached > 0
    assert sorted(set(segment.ledger.turn_index)) == [-1, 0, 1, 2]
    check_ledger(segment, model, tokenizer)


def test_an_edited_history_starts_a_new_segment(server, model, tokenizer) -> None:
    key, session = server.open_session()
    client = client_for(server, key)
    first = [SYSTEM, {"role": "user", "content": "3+4"}]
    try:
        reply = client.chat.completions.create(model="policy", messages=first, seed=1)
        edited = {"role": "assistant", "content": reply.choices[0].message.content + " (edited)"}
        client.chat.completions.create(model="policy", seed=2, messages=[
            *first, edited, {"role": "user", "content": "sure?"}])
    finally:
        server.close_session(key)
    segments = session.sampled_segments()
    assert len(segments) == 2 and [s.calls for s in segments] == [[0], [1]]
    for segment in segments:
        check_ledger(segment, model, tokenizer)
    assert "(edited)" in segments[1].ledger.text  # the context it was sampled in


def test_a_refused_call_leaves_its_segment_as_it_was(server, model, tokenizer) -> None:
    """A call that continues a segment but is refused (its prompt outgrows the context)
    changes nothing: the next echo of the same history continues the segment cleanly."""
    key, session = server.open_session()
    client = client_for(server, key)
    messages = [SYSTEM, {"role": "user", "content": "6+1"}]
    try:
        reply = client.chat.completions.create(model="policy", messages=messages, seed=4)
        messages.append(reply.choices[0].message.model_dump(exclude_none=True))
        with pytest.raises(openai.BadRequestError):
            client.chat.completions.create(model="policy", seed=5, messages=[
                *messages, {"role": "user", "content": "y" * 600}])
        client.chat.completions.create(model="policy", seed=6, messages=[
            *messages, {"role": "user", "content": "sure?"}])
    finally:
        server.close_session(key)
    (segment,) = session.sampled_segments()
    assert segment.calls == [0, 2] and "y" * 600 not in segment.ledger.text
    assert len(segment.ledger.messages) == 5
    check_ledger(segment, model, tokenizer)


def test_n_choices_are_segments_of_their_own(server, model, tokenizer) -> None:
    key, session = server.open_session()
    try:
        reply = client_for(server, key).chat.completions.create(
            model="policy", messages=[{"role": "user", "content": "hi"}], n=3, seed=5)
    finally:
        server.close_session(key)
    assert [c.index for c in reply.choices] == [0, 1, 2]
    segments = session.sampled_segments()
    assert len(segments) == 3
    for segment, choice in zip(segments, reply.choices, strict=True):
        check_ledger(segment, model, tokenizer)
        assert choice.message.content in segment.ledger.text


def test_streaming_gives_the_same_reply_as_a_whole_response(server) -> None:
    client = client_for(server)
    kwargs = {"model": "policy", "messages": [{"role": "user", "content": "5*5"}], "seed": 9}
    whole = client.chat.completions.create(**kwargs).choices[0]
    chunks = list(client.chat.completions.create(**kwargs, stream=True,
                                                 stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finish = [c.choices[0].finish_reason for c in chunks if c.choices and
              c.choices[0].finish_reason]
    assert text == whole.message.content and finish == [whole.finish_reason]
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens >= 1


def test_bad_requests_get_openai_errors_and_the_server_stays_up(server) -> None:
    client = client_for(server)
    with pytest.raises(openai.BadRequestError) as error:
        client.chat.completions.create(model="policy", messages=[], seed=1)
    assert error.value.body["param"] == "messages"
    with pytest.raises(openai.BadRequestError) as error:
        client.chat.completions.create(model="policy", temperature=7,
                                       messages=[{"role": "user", "content": "x"}])
    assert error.value.body["param"] == "temperature"
    with pytest.raises(openai.BadRequestError) as error:
        client.chat.completions.create(model="policy", logprobs=True, top_logprobs=2,
                                       messages=[{"role": "user", "content": "x"}])
    assert error.value.body["param"] == "top_logprobs"
    with pytest.raises(openai.BadRequestError) as error:
        client.chat.completions.create(model="policy", messages=[
            {"role": "user", "content": "x" * 600}])
    assert error.value.body["code"] == "context_length_exceeded"
    with pytest.raises(openai.NotFoundError):
        client_for(server, "no-such-session").chat.completions.create(
            model="policy", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.NotFoundError):
        client.post("/nowhere", cast_to=object, body={})
    for create, body in ((client.chat.completions.create,
                          {"messages": [{"role": "user", "content": "x"}]}),
                         (client.completions.create, {"prompt": "x"})):
        with pytest.raises(openai.NotFoundError) as missing:  # as OpenAI answers
            create(model="gpt-4o", max_tokens=2, **body)
        assert missing.value.body["code"] == "model_not_found"
        assert missing.value.body["param"] == "model"
        assert "The model `gpt-4o` does not exist" in missing.value.body["message"]
        assert "serves 'policy'" in missing.value.body["message"]
    import httpx

    raw = httpx.post(server.url() + "/chat/completions", content=b"{not json",
                     headers={"content-type": "application/json"})
    assert raw.status_code == 400 and "not valid JSON" in raw.json()["error"]["message"]
    assert client.models.list().data[0].id == "policy"  # still serving


def test_a_run_is_refused_calls_past_max_calls(server) -> None:
    key, session = server.open_session()
    client = client_for(server, key)
    try:
        for _ in range(6):
            client.chat.completions.create(model="policy", messages=[
                {"role": "user", "content": "go"}], max_tokens=2)
        with pytest.raises(openai.BadRequestError) as error:
            client.chat.completions.create(model="policy", messages=[
                {"role": "user", "content": "go"}], max_tokens=2)
    finally:
        server.close_session(key)
    assert error.value.body["code"] == "max_calls_exceeded" and session.calls == 6


def test_32_concurrent_sessions_never_mix(server, model, tokenizer) -> None:
    keys = [server.open_session() for _ in range(32)]

    def run(i: int) -> str:
        key, _ = keys[i]
        messages = [{"role": "user", "content": f"task {i}"}]
        client = client_for(server, key)
        for turn in range(2):
            reply = client.chat.completions.create(model="policy", messages=messages,
                                                   seed=i, max_tokens=4)
            messages += [reply.choices[0].message.model_dump(exclude_none=True),
                         {"role": "user", "content": f"again {turn}"}]
        return messages[0]["content"]

    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        assert list(pool.map(run, range(32))) == [f"task {i}" for i in range(32)]
    for i, (key, session) in enumerate(keys):
        server.close_session(key)
        (segment,) = session.sampled_segments()
        assert f"task {i}" in segment.ledger.text and segment.calls == [0, 1]
        assert f"task {(i + 1) % 32}" not in segment.ledger.text
    check_ledger(keys[0][1].sampled_segments()[0], model, tokenizer)


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_the_endpoint_sends_replies_without_waiting_for_acks(model, tokenizer, loop,
                                                             monkeypatch) -> None:
    """Its connections have TCP_NODELAY, on uvloop and on asyncio's own loop (the fallback),
    which sets it only on sockets made with ``IPPROTO_TCP``: without it a reply written in
    two parts waited for the client's delayed ACK (44 ms a call instead of 1 ms, one call
    at a time)."""
    import asyncio
    import socket

    import httpx

    from turnrl.agents import server as server_module

    if loop == "asyncio":
        monkeypatch.setattr(server_module, "new_event_loop", asyncio.new_event_loop)
    else:
        pytest.importorskip("uvloop")
    engine = HFEngine(model, eos_token_id=tokenizer.eos_token_id,
                      pad_token_id=tokenizer.pad_token_id, seed=0)
    with ModelServer(engine, tokenizer, model_name="policy", limits=Limits(max_tokens=4),
                     max_context_tokens=64, max_calls=1, open_access=True) as server, \
            httpx.Client() as http:  # keeps its connection open
        assert type(server.loop).__module__.startswith(loop)
        assert http.get(server.url() + "/models").status_code == 200
        connections = list(server._server.server_state.connections)
        sockets = [c.transport.get_extra_info("socket") for c in connections]
        assert sockets and all(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
                               for s in sockets)


def test_a_body_nested_too_deep_is_a_400_that_names_the_limit(server) -> None:
    import httpx

    from turnrl.agents.server import MAX_BODY_DEPTH

    def post(depth: int) -> httpx.Response:
        deep = "[" * depth + "]" * depth
        body = ('{"model": "policy", "messages": [{"role": "user", "content": "x"}], '
                f'"metadata": {deep}}}')
        return httpx.post(server.url() + "/chat/completions", content=body.encode(),
                          headers={"content-type": "application/json"})

    for depth in (100_000, MAX_BODY_DEPTH):  # the body is one level more than the list
        reply = post(depth)
        assert reply.status_code == 400, reply.text
        error = reply.json()["error"]
        assert error["code"] == "body_too_deep" and f"more than {MAX_BODY_DEPTH} levels" \
            in error["message"]
    assert post(MAX_BODY_DEPTH - 1).json()["error"]["code"] != "body_too_deep"
    assert client_for(server).models.list().data[0].id == "policy"  # still serving


def test_a_client_that_hangs_up_is_one_quiet_line(server) -> None:
    """A client that drops mid-body, and one that drops while its streamed reply is being
    made: no traceback and no error anywhere; the first is one INFO line."""
    import logging
    import socket
    import time

    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep(level=logging.DEBUG)
    loggers = [logging.getLogger(name) for name in ("turnrl.agents.server", "uvicorn.error",
                                                    "uvicorn", "asyncio")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.DEBUG)
    body = (b'{"model": "policy", "stream": true, "max_tokens": 12, '
            b'"messages": [{"role": "user", "content": "count"}]}')
    path = server.url().split(str(server.port), 1)[1] + "/chat/completions"
    try:
        with socket.create_connection(("127.0.0.1", server.port)) as sock:  # mid-body
            sock.sendall(f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json"
                         f"\r\ncontent-length: {len(body) + 100}\r\n\r\n".encode() + body)
            time.sleep(0.2)
        with socket.create_connection(("127.0.0.1", server.port)) as sock:  # mid-stream
            sock.sendall(f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json"
                         f"\r\ncontent-length: {len(body)}\r\n\r\n".encode() + body)
            sock.recv(1)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(
                "disconnected" in r.getMessage() for r in records):
            time.sleep(0.05)
        time.sleep(0.5)
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.removeHandler(handler)
            lg.setLevel(level)
    lines = [r for r in records if "disconnected" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelno == logging.INFO, records
    assert "POST /v1/chat/completions" in lines[0].getMessage()
    assert not [r for r in records if r.exc_info or r.levelno >= logging.WARNING], \
        [r.getMessage() for r in records]
    assert client_for(server).models.list().data[0].id == "policy"
