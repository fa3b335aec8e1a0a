"""An agent run's connection to the endpoint (``turnrl.agents.connection``): the clients turnrl
gives agents send again a request the server never read (refused, or a connection closed or
reset before any reply), and nothing else; failures of the connection are told apart from the
agent's own, in the trajectories and in ``rollout/agent_connection_error_rate``."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading

import openai
import pytest

from turnrl.agents.connection import (
    CONNECTION,
    ERROR_KIND,
    AsyncRetryTransport,
    RetryTransport,
    http_library,
    is_connection_error,
    unread,
)
from turnrl.agents.job import AGENT_ENV_ID
from turnrl.agents.program import http_pool
from turnrl.train.collect import Collector
from turnrl.train.scoring import Shaping
from turnrl.types import Trajectory

lib = http_library()


def http_reply(status: str, body: bytes) -> bytes:
    return (f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n\r\n").encode() + body


OK = http_reply("200 OK", b'{"ok": true}')
BAD = http_reply("400 Bad Request", b"{}")


class Flaky:
    """A raw HTTP server on 127.0.0.1: its first ``drop`` connections are dropped as
    ``how`` says (``reset``: RST without reading; ``close``: FIN without reading), every later
    one reads the request and answers ``reply``. ``connections`` and ``requests`` count what
    it saw."""

    def __init__(self, drop: int, how: str, reply: bytes = OK) -> None:
        self.drop, self.how, self.reply = drop, how, reply
        self.connections = self.requests = 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1/x"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            if self.connections <= self.drop:
                if self.how == "reset":
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                conn.close()
                continue
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            self.requests += 1
            conn.sendall(self.reply)
            conn.close()

    def close(self) -> None:
        self.sock.close()


@pytest.mark.parametrize("how", ["reset", "close"])
def test_a_request_on_a_connection_dropped_before_it_was_read_is_sent_again(how) -> None:
    server = Flaky(drop=2, how=how)
    try:
        with http_pool(asynchronous=False) as http:
            reply = http.post(server.url, json={"a": 1})
        assert reply.status_code == 200 and reply.json() == {"ok": True}
        assert (server.connections, server.requests) == (3, 1)
    finally:
        server.close()


def test_the_async_pool_retries_too() -> None:
    server = Flaky(drop=1, how="reset")

    async def call() -> int:
        async with http_pool(asynchronous=True) as http:
            return (await http.post(server.url, json={})).status_code

    try:
        assert asyncio.run(call()) == 200 and server.requests == 1
    finally:
        server.close()


def test_a_reply_is_never_a_reason_to_send_again() -> None:
    """A 400 (a refused call: the agent's to handle) comes back as it is, after one request."""
    server = Flaky(drop=0, how="close", reply=BAD)
    try:
        with http_pool(asynchronous=False) as http:
            assert http.post(server.url, json={}).status_code == 400
        assert (server.connections, server.requests) == (1, 1)
    finally:
        server.close()


def test_a_refused_connection_is_tried_four_times_then_raised() -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    attempts = []

    class Counting(lib.HTTPTransport):  # type: ignore[name-defined,misc]
        def handle_request(self, request):
            attempts.append(request.url)
            return super().handle_request(request)

    with lib.Client(transport=RetryTransport(Counting())) as http, \
            pytest.raises(lib.ConnectError):
        http.get(f"http://127.0.0.1:{port}/")
    assert len(attempts) == 4


@pytest.mark.parametrize(("error", "again"), [
    (lambda r: lib.ConnectError("refused", request=r), True),
    (lambda r: lib.RemoteProtocolError("Server disconnected without sending a response.",
                                       request=r), True),
    (lambda r: lib.ReadTimeout("slow", request=r), False),  # the server may be working on it
    (lambda r: lib.RemoteProtocolError("illegal header", request=r), False),
])
def test_only_errors_before_the_request_was_read_are_retried(error, again) -> None:
    calls = []

    def handler(request):
        calls.append(request)
        if len(calls) == 1:
            raise error(request)
        return lib.Response(200, json={})

    async def call_async() -> int:
        transport = AsyncRetryTransport(lib.MockTransport(handler))
        async with lib.AsyncClient(transport=transport) as http:
            return (await http.get("http://test/")).status_code

    with lib.Client(transport=RetryTransport(lib.MockTransport(handler))) as http:
        if again:
            assert http.get("http://test/").status_code == 200 and len(calls) == 2
        else:
            with pytest.raises(lib.TransportError):
                http.get("http://test/")
            assert len(calls) == 1
    calls.clear()
    if again:
        assert asyncio.run(call_async()) == 200 and len(calls) == 2


def test_a_reset_read_is_unread_but_other_read_errors_are_not() -> None:
    reset = lib.ReadError("reset")
    reset.__cause__ = ConnectionResetError(104, "Connection reset by peer")
    assert unread(reset) and not unread(lib.ReadError("the stream ended"))


def test_connection_failures_are_told_from_the_agents_own() -> None:
    request = lib.Request("POST", "http://127.0.0.1:1/v1/chat/completions")
    assert is_connection_error(openai.APIConnectionError(request=request))
    assert is_connection_error(ConnectionResetError())
    try:
        try:
            raise lib.ConnectError("refused")
        except lib.ConnectError as cause:
            raise RuntimeError("the agent's wrapper") from cause
    except RuntimeError as wrapped:
        assert is_connection_error(wrapped)
    assert not is_connection_error(ValueError("the agent broke"))
    assert not is_connection_error(openai.BadRequestError(
        "refused", response=lib.Response(400, request=request), body=None))


def test_the_collector_counts_lost_connections_apart_from_the_agents_errors() -> None:
    def run(seed: int, error: str | None = None, kind: str | None = None) -> Trajectory:
        done = error is None
        return Trajectory(env_id=AGENT_ENV_ID, seed=seed, group_id=seed, messages=[],
                          token_ids=[1, 2] if done else [], loss_mask=[0, 1] if done else [],
                          logprobs=[0.0, -1.0] if done else [],
                          turn_index=[-1, 0] if done else [],
                          turn_rewards=[1.0] if done else [], terminated=done,
                          truncated=not done, error=error,
                          info={ERROR_KIND: kind} if kind else {})

    batch = [run(0), run(1), run(2, "ValueError: broke"),
             run(3, "APIConnectionError: Connection error.", CONNECTION)]
    collector = Collector(lambda first, n: batch, rewards=None, shaping=Shaping(), filters=(),
                          n_groups=4, group_size=1, max_tries=1, max_failed_batches=2,
                          env_id=AGENT_ENV_ID)
    metrics = collector.collect().metrics
    assert metrics["rollout/env_error_rate"] == 0.5
    assert metrics["rollout/agent_error_rate"] == 0.25
    assert metrics["rollout/agent_connection_error_rate"] == 0.25
