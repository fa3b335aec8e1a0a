"""Agent programs the tests train and run (importable as ``agent_programs:<name>``)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time

import openai

from turnrl.agents.runner import AgentResult


def answer(client, task):
    """Asks once; 1.0 when the reply is the task's answer."""
    reply = client.chat.completions.create(
        model="policy", max_tokens=4,
        messages=[{"role": "user", "content": task["question"]}])
    return float(reply.choices[0].message.content.strip() == task["answer"])


def two_calls(client, task):
    """Two calls in one conversation (echoing the first reply), a reward per call."""
    messages = [{"role": "user", "content": task["question"]}]
    reply = client.chat.completions.create(model="policy", messages=messages, max_tokens=3)
    messages += [reply.choices[0].message.model_dump(exclude_none=True),
                 {"role": "user", "content": "again"}]
    client.chat.completions.create(model="policy", messages=messages, max_tokens=3)
    return AgentResult(reward=0.5, call_rewards=[0.25, -0.25], success=True,
                       info={"answer": task["answer"]})


async def async_answer(base_url, api_key, task):
    """An async agent that builds its own client from base_url and api_key."""
    async with openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0) as client:
        reply = await client.chat.completions.create(
            model="policy", max_tokens=3, messages=[{"role": "user", "content": task["question"]}])
    return {"reward": float(bool(reply.choices[0].message.content)), "success": False}


def raises(client, task):
    client.chat.completions.create(model="policy", max_tokens=2,
                                   messages=[{"role": "user", "content": "x"}])
    raise ValueError(f"the agent broke on {task['question']}")


def never_calls(client, task):
    return 1.0


def returns_garbage(client, task):
    client.chat.completions.create(model="policy", max_tokens=2,
                                   messages=[{"role": "user", "content": "x"}])
    return "great"


def miscounts_calls(client, task):
    client.chat.completions.create(model="policy", max_tokens=2,
                                   messages=[{"role": "user", "content": "x"}])
    return AgentResult(reward=1.0, call_rewards=[0.0, 0.0])


def sleeps(client, task):
    client.chat.completions.create(model="policy", max_tokens=2,
                                   messages=[{"role": "user", "content": "x"}])
    time.sleep(3)
    return 1.0


async def async_sleeps(client, task):
    await asyncio.sleep(30)
    return 1.0


def needs_more(client, task, budget):
    return 0.0


not_callable = 3


def reports_pid(client, task):
    """Answers once and says which process it ran in."""
    client.chat.completions.create(model="policy", max_tokens=2,
                                   messages=[{"role": "user", "content": task["question"]}])
    return AgentResult(reward=1.0, info={"pid": os.getpid()})


async def async_reports_pid(client, task):
    await client.chat.completions.create(model="policy", max_tokens=2,
                                         messages=[{"role": "user", "content": task["question"]}])
    return AgentResult(reward=1.0, info={"pid": os.getpid()})


def exits(client, task):
    """Ends its whole process (as a crashing extension or ``os._exit`` would)."""
    client.chat.completions.create(model="policy", max_tokens=2,
                                   messages=[{"role": "user", "content": "x"}])
    os._exit(3)


def unpicklable_info(client, task):
    client.chat.completions.create(model="policy", max_tokens=2,
                                   messages=[{"role": "user", "content": "x"}])
    return AgentResult(reward=1.0, info={"callback": lambda: None})


def loses_connection(client, task):
    """Calls the model, then an address where nothing listens (as if the endpoint went away):
    its client's retries give up and ``openai.APIConnectionError`` ends the run."""
    import socket

    client.chat.completions.create(model="policy", max_tokens=2,
                                   messages=[{"role": "user", "content": "x"}])
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    client.with_options(base_url=f"http://127.0.0.1:{port}/v1").chat.completions.create(
        model="policy", max_tokens=2, messages=[{"role": "user", "content": "x"}])
    return 1.0


def plan_and_execute(client, task):
    """Two roles in one run: the planner (``policy``) plans, the executor (``executor``, a
    separate policy) answers from the plan; the executor's call is rewarded 1."""
    plan = client.chat.completions.create(
        model="policy", max_tokens=3,
        messages=[{"role": "user", "content": f"plan: {task['question']}"}])
    client.chat.completions.create(
        model="executor", max_tokens=3,
        messages=[{"role": "user", "content": f"do: {plan.choices[0].message.content}"}])
    return AgentResult(reward=0.0, call_rewards=[0.0, 1.0], success=True)


def concurrent_keyed(client, task):
    """Two calls at once; each reward keyed by its reply's id (the second call's is 1)."""
    import concurrent.futures

    def ask(text):
        return client.chat.completions.create(
            model="policy", max_tokens=3, messages=[{"role": "user", "content": text}])

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        first, second = pool.map(ask, ["first " + task["question"], "second"])
    return AgentResult(reward=0.0, call_rewards={first.id: 0.0, second.id: 1.0})


def refused_then_answered(client, task):
    """A call refused for its context (an error, never counted), then one answered: one
    list entry is right."""
    with contextlib.suppress(openai.BadRequestError):  # past max_context_tokens
        client.chat.completions.create(model="policy", max_tokens=3,
                                       messages=[{"role": "user", "content": "x" * 400}])
    client.chat.completions.create(model="policy", max_tokens=3,
                                   messages=[{"role": "user", "content": task["question"]}])
    return AgentResult(reward=0.0, call_rewards=[1.0])


def unknown_reply_id(client, task):
    client.chat.completions.create(model="policy", max_tokens=3,
                                   messages=[{"role": "user", "content": task["question"]}])
    return AgentResult(reward=0.0, call_rewards={"chatcmpl-not-mine": 1.0})


def best_of_two(client, task):
    """Two tries at the same question; the first thrown away (its reply id discarded)."""
    messages = [{"role": "user", "content": task["question"]}]
    first = client.chat.completions.create(model="policy", max_tokens=3, messages=messages)
    client.chat.completions.create(model="policy", max_tokens=3,
                                   messages=[{"role": "user", "content": "again " +
                                              task["question"]}])
    return AgentResult(reward=1.0, discarded=[first.id])


def two_choices_keep_one(client, task):
    """One call with n=2; choice 1 thrown away."""
    reply = client.chat.completions.create(
        model="policy", max_tokens=3, n=2,
        messages=[{"role": "user", "content": task["question"]}])
    return AgentResult(reward=1.0, discarded=[f"{reply.id}/1"])


def discarded_but_rewarded(client, task):
    """A discarded reply the agent still rewards: trained with that reward."""
    reply = client.chat.completions.create(
        model="policy", max_tokens=3, messages=[{"role": "user", "content": task["question"]}])
    return AgentResult(reward=0.0, call_rewards={reply.id: -1.0}, discarded=[reply.id])


def discards_everything(client, task):
    reply = client.chat.completions.create(
        model="policy", max_tokens=3, messages=[{"role": "user", "content": task["question"]}])
    return AgentResult(reward=1.0, discarded=[reply.id])


def continued_discard_first(client, task):
    """Two calls in one conversation; the first reply thrown away: its tokens stay context."""
    messages = [{"role": "user", "content": task["question"]}]
    first = client.chat.completions.create(model="policy", messages=messages, max_tokens=3)
    messages += [first.choices[0].message.model_dump(exclude_none=True),
                 {"role": "user", "content": "again"}]
    client.chat.completions.create(model="policy", messages=messages, max_tokens=3)
    return AgentResult(reward=1.0, discarded=[first.id])


# --- the four SDKs, each with a tool, logging what it got (TURNRL_AGENT_LOG) ------------------

ADD = {"name": "add", "description": "Add two integers.",
       "parameters": {"type": "object", "properties": {"a": {"type": "integer"},
                                                       "b": {"type": "integer"}},
                      "required": ["a", "b"]}}


def _log(sdk: str, texts: list[str]) -> None:
    """Append the reply texts an agent got to the file ``$TURNRL_AGENT_LOG`` names."""
    import json

    path = os.environ.get("TURNRL_AGENT_LOG")
    if path:
        with open(path, "a") as f:
            f.write("".join(json.dumps({"sdk": sdk, "text": t}) + "\n" for t in texts))


def openai_tools(client, task):
    """The openai SDK: a tool offered, two calls in one conversation."""
    messages = [{"role": "user", "content": task["question"]}]
    for _ in range(2):
        reply = client.chat.completions.create(
            model="policy", messages=messages, max_tokens=6,
            tools=[{"type": "function", "function": ADD}]).choices[0].message
        _log("openai", [reply.content or ""])
        messages += [reply.model_dump(exclude_none=True), {"role": "user", "content": "and?"}]
    return float(task["answer"] in (reply.content or ""))


def langchain_tools(base_url, api_key, task):
    """LangChain's ChatOpenAI with bind_tools."""
    from langchain_core.messages import HumanMessage
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(model="policy", base_url=base_url, api_key=api_key, max_tokens=6,
                     max_retries=0).bind_tools([{"type": "function", "function": ADD}])
    messages = [HumanMessage(task["question"])]
    for _ in range(2):
        reply = llm.invoke(messages)
        _log("langchain", [reply.content])
        messages += [reply, HumanMessage("and?")]
    return float(task["answer"] in reply.content)


async def agents_sdk_tools(base_url, api_key, task):
    """The OpenAI Agents SDK with its default model (the Responses API) and a function tool."""
    import agents

    @agents.function_tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0)
    agent = agents.Agent(name="adder", instructions="Answer with a number.", tools=[add],
                         model="policy")  # replies cut by the run's cap (rollout.max_new_tokens)
    config = agents.RunConfig(model_provider=agents.OpenAIProvider(openai_client=client))
    try:
        result = await agents.Runner.run(agent, task["question"], run_config=config,
                                         max_turns=2)
        responses, final = result.raw_responses, str(result.final_output)
    except agents.MaxTurnsExceeded as error:  # the model kept calling tools
        responses, final = error.run_data.raw_responses if error.run_data else [], ""
    _log("agents", ["".join(part.text for item in response.output if item.type == "message"
                            for part in item.content) for response in responses])
    return float(task["answer"] in final)


def anthropic_tools(base_url, api_key, task):
    """The anthropic SDK's Messages API with a tool (base URL without /v1: the SDK adds it)."""
    import anthropic

    client = anthropic.Anthropic(base_url=base_url.removesuffix("/v1"), api_key=api_key,
                                 max_retries=0)
    tool = {"name": ADD["name"], "description": ADD["description"],
            "input_schema": ADD["parameters"]}
    messages = [{"role": "user", "content": task["question"]}]
    for _ in range(2):
        reply = client.messages.create(model="policy", max_tokens=6, tools=[tool],
                                       messages=messages)
        text = "".join(block.text for block in reply.content if block.type == "text")
        _log("anthropic", [text])
        messages += [{"role": "assistant", "content": [b.model_dump(exclude_none=True)
                                                       for b in reply.content]},
                     {"role": "user", "content": "and?"}]
    return float(task["answer"] in text)
