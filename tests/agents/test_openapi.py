"""The endpoint's OpenAPI schema (``GET /openapi.json``) and schemathesis fuzzing a running
server from it: whatever the body of a call to any route, the server answers it, never
with a 500, and goes on serving."""

from __future__ import annotations

import httpx
import pytest

from turnrl.agents.protocol import Limits
from turnrl.agents.server import ModelServer
from turnrl.rollout.hf import HFEngine

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore")


@pytest.fixture(scope="module")
def server(load_tiny, tokenizer):
    engine = HFEngine(load_tiny().eval(), eos_token_id=tokenizer.eos_token_id,
                      pad_token_id=tokenizer.pad_token_id, seed=0)
    with ModelServer(engine, tokenizer, model_name="policy", limits=Limits(max_tokens=4),
                     max_context_tokens=512, open_access=True) as server:
        yield server


def test_the_schema_lists_every_route_with_its_request_model(server) -> None:
    schema = httpx.get(f"http://127.0.0.1:{server.port}/openapi.json").json()
    assert schema["openapi"].startswith("3.1")
    assert set(schema["paths"]) == {"/v1/chat/completions", "/v1/completions",
                                    "/v1/responses", "/v1/messages", "/v1/models"}
    body = schema["paths"]["/v1/messages"]["post"]["requestBody"]["content"]
    ref = body["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    assert set(schema["components"]["schemas"][ref]["required"]) == {
        "model", "max_tokens", "messages"}
    assert "policy" in schema["info"]["description"]


@pytest.mark.parametrize("mode", ["positive", "negative"])
def test_no_input_gets_a_server_error(server, mode) -> None:
    """Fuzz every route from the schema, bodies that follow it and bodies that break it:
    the server answers each (a reply or a 4xx naming the problem), never with a 500."""
    schema = schemathesis.openapi.from_url(f"http://127.0.0.1:{server.port}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == 5
    statuses: dict[str, set[int]] = {}
    for operation in operations:
        if mode == "negative" and operation.method.upper() == "GET":
            continue  # nothing to break in a GET without parameters

        @given(case=operation.as_strategy(schemathesis.GenerationMode(mode)))
        @settings(max_examples=40, deadline=None, database=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
        def fuzz(case) -> None:
            response = case.call_and_validate(checks=[not_a_server_error], timeout=60)
            statuses.setdefault(case.operation.path, set()).add(response.status_code)

        fuzz()
    assert len(statuses) == (5 if mode == "positive" else 4)
    if mode == "negative":  # a body that breaks the schema is refused, naming the problem
        assert all(codes <= {400, 404, 422} for codes in statuses.values()), statuses


def test_the_server_still_serves_after_the_fuzzing(server) -> None:
    reply = httpx.post(server.url() + "/chat/completions", json={
        "model": "policy", "messages": [{"role": "user", "content": "hi"}]}, timeout=60)
    assert reply.status_code == 200 and reply.json()["choices"][0]["message"]["role"] == \
        "assistant"
