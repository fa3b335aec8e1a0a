"""Chat templates of the main model families, written for turnrl's tiny character tokenizer.

Conformance fixtures for the token-exact capture (:mod:`turnrl.agents.capture`): a call
continues a segment only when the chat template renders the longer conversation as an
extension of the shorter one's rendering followed by the reply the model sampled. Tests
cannot download tokenizers, so each template is a faithful copy of its family's Hugging Face
template with one adaptation: the end-of-turn marker is ``eos_token`` (the tiny tokenizer's
``<|im_end|>``), as in every real family the end-of-turn token is the generation stop token.
Every other marker is plain text (character tokens).

- ``QWEN3``: Qwen3's template as is (``<|im_end|>`` is Qwen's EOS too): tools in the system
  turn, ``<tool_call>`` JSON, tool results grouped into one user turn, and thinking blocks
  kept only after the last user query (earlier ones are stripped).
- ``LLAMA3``: Llama 3.1's template with ``<|eot_id|>`` → ``eos_token`` and the
  ``<|begin_of_text|>`` marker as text; without ``builtin_tools`` (no ``<|python_tag|>``,
  ``<|eom_id|>``). Tools go in the first user message (``tools_in_user_message``, default
  true); calls are ``{"name": ..., "parameters": ...}``; results have the ``ipython`` role.
- ``MISTRAL``: Mistral-7B-Instruct-v0.3's tool template with ``</s>`` → ``eos_token`` and the
  ``<s>`` marker as text: ``[AVAILABLE_TOOLS]`` before the *last* user message, the system
  message merged into the last message only when that is a user message, 9-character
  alphanumeric tool-call ids.
- ``CHATML``: the tiny model's own template (no tools; ``tool_calls`` are not rendered).

Whether a conversation step is an append-only extension (the shorter conversation rendered
with ``add_generation_prompt=True``, plus the model's sampled reply ending in EOS, is a prefix
of the longer conversation's rendering; :data:`EXPECTED`, pinned by ``test_chat_templates``):

========  =====  ==========  ===============  ========  ============  =============
template  plain  tool_call   parallel_calls   thinking  tools_user    system_user
========  =====  ==========  ===============  ========  ============  =============
qwen3     yes    yes         yes              no        yes           yes
llama3    yes    yes         raises           yes       yes           yes
mistral   yes    yes         yes              yes       no            no
chatml    yes    yes         yes              yes       yes           yes
========  =====  ==========  ===============  ========  ============  =============

The cases (:data:`CASES`): (a) ``plain``: user, assistant, user; (b) ``tool_call``: an
assistant tool call and its result; (c) ``parallel_calls``: two calls in one message and
both results; (d) ``thinking``: a ``<think>...</think>`` reply, then a new user message;
(e) ``tools_user``: a second user message when tools are given; (f) ``system_user``: a second
user message after a system message. Why the exceptions:

- qwen3 / thinking: the thinking block of an assistant turn before the last user query is
  stripped on re-rendering (also when it comes as ``reasoning_content``). A Qwen3 model in
  thinking mode opens every reply with ``<think>``, so its multi-turn chat is this case, not
  ``plain``; within a tool chain (no new user query) the thinking is kept: append-only.
- llama3 / parallel_calls: Llama 3.1 allows one tool call per message; the template raises
  ``This model only supports single tool-calls at once!`` (a Llama model cannot sample two).
- mistral / tools_user: ``[AVAILABLE_TOOLS]`` moves to the new last user message.
- mistral / system_user: the system message moves to the new last user message.
- chatml / tool_call, parallel_calls: the tiny template ignores ``tools`` and writes each
  tool call as the text the tiny model samples for it, ``<tool_call>{"name": ...,
  "arguments": {...}}</tool_call>``, back to back.
- not in the table: ``arguments`` as the OpenAI wire format's JSON string (Llama 3.1 and
  Mistral encode it again as a JSON string: decode it to a dict before rendering); OpenAI-style
  call ids such as ``call_...`` (Mistral raises); Qwen3 with ``enable_thinking=False`` (the
  empty think block of the prompt is not re-rendered). transformers drops ``None``-valued
  message keys before rendering (``"content": None``, ``"tool_calls": None``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from transformers import PreTrainedTokenizerFast

from turnrl.models.tiny import CHATML_TEMPLATE, EOS, build_tokenizer

__all__ = [
    "CALC",
    "CASES",
    "CHATML",
    "EXPECTED",
    "LLAMA3",
    "MISTRAL",
    "QWEN3",
    "SEARCH",
    "TEMPLATES",
    "TOOLS",
    "Case",
    "sampled_text",
    "tokenizer_with",
    "tool_call",
]

QWEN3 = r"""{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\n\n' }}
    {%- endif %}
    {{- "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" }}
    {{- "You are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and " }}
    {{- "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n" }}
    {{- '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n' }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and message.content is string
          and not (message.content.startswith('<tool_response>')
                   and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- else %}
        {%- set content = '' %}
    {%- endif %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in content %}
                {%- set reasoning_content = content.split('</think>')[0].rstrip('\n') %}
                {%- set reasoning_content = reasoning_content.split('<think>')[-1].lstrip('\n') %}
                {%- set content = content.split('</think>')[-1].lstrip('\n') %}
            {%- endif %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<|im_start|>' + message.role + '\n<think>\n' + reasoning_content.strip('\n')
                    + '\n</think>\n\n' + content.lstrip('\n') }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\n' + content }}
            {%- endif %}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\n' + content }}
        {%- endif %}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- if (loop.first and content) or (not loop.first) %}
                    {{- '\n' }}
                {%- endif %}
                {%- if tool_call.function %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {{- '<tool_call>\n{"name": "' }}
                {{- tool_call.name }}
                {{- '", "arguments": ' }}
                {%- if tool_call.arguments is string %}
                    {{- tool_call.arguments }}
                {%- else %}
                    {{- tool_call.arguments | tojson }}
                {%- endif %}
                {{- '}\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- endif %}
{%- endif %}"""

LLAMA3 = r"""{{- '<|begin_of_text|>' }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}

{#- This block extracts the system message, so we can slot it into the right place. #}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}

{#- System message (turnrl: no builtin_tools, so no "Tools:" line) #}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{%- if tools is not none %}
    {{- "Environment: ipython\n" }}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{%- if tools is not none and not tools_in_user_message %}
    {{- "You have access to the following functions. To call a function, please respond with " }}
    {{- "JSON for a function call." }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument ' }}
    {{- 'name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- eos_token }}

{#- Custom tools are passed in a user message with some extra guidance #}
{%- if tools_in_user_message and not tools is none %}
    {#- Extract the first user message so we can plug it in here #}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first "
                            + "user message!") }}
    {%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\n\n' -}}
    {{- "Given the following functions, please respond with a JSON for a function call " }}
    {{- "with its proper arguments that best answers the given prompt.\n\n" }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument ' }}
    {{- 'name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
    {{- first_user_message + eos_token }}
{%- endif %}

{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'
            + message['content'] | trim + eos_token }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
        {{- '{"name": "' + tool_call.name + '", ' }}
        {{- '"parameters": ' }}
        {{- tool_call.arguments | tojson }}
        {{- "}" }}
        {{- eos_token }}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\n\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- eos_token }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}"""

MISTRAL = r"""{%- if messages[0]["role"] == "system" %}
    {%- set system_message = messages[0]["content"] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}
{%- set user_messages = loop_messages | selectattr("role", "equalto", "user") | list %}

{#- This block checks for alternating user/assistant messages, skipping tool calling messages #}
{%- set ns = namespace() %}
{%- set ns.index = 0 %}
{%- for message in loop_messages %}
    {%- if not (message.role == "tool" or message.role == "tool_results"
                or (message.tool_calls is defined and message.tool_calls is not none)) %}
        {%- if (message["role"] == "user") != (ns.index % 2 == 0) %}
            {{- raise_exception("After the optional system message, conversation roles must "
                                + "alternate user/assistant/user/assistant/...") }}
        {%- endif %}
        {%- set ns.index = ns.index + 1 %}
    {%- endif %}
{%- endfor %}

{#- turnrl: the <s> marker as text (the tiny tokenizer's BOS is <|im_start|>) #}
{{- '<s>' }}
{%- for message in loop_messages %}
    {%- if message["role"] == "user" %}
        {%- if tools is not none and (message == user_messages[-1]) %}
            {{- "[AVAILABLE_TOOLS] [" }}
            {%- for tool in tools %}
                {%- set tool = tool.function %}
                {{- '{"type": "function", "function": {' }}
                {%- for key, val in tool.items() if key != "return" %}
                    {%- if val is string %}
                        {{- '"' + key + '": "' + val + '"' }}
                    {%- else %}
                        {{- '"' + key + '": ' + val|tojson }}
                    {%- endif %}
                    {%- if not loop.last %}
                        {{- ", " }}
                    {%- endif %}
                {%- endfor %}
                {{- "}}" }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- else %}
                    {{- "]" }}
                {%- endif %}
            {%- endfor %}
            {{- "[/AVAILABLE_TOOLS]" }}
            {%- endif %}
        {%- if loop.last and system_message is defined %}
            {{- "[INST] " + system_message + "\n\n" + message["content"] + "[/INST]" }}
        {%- else %}
            {{- "[INST] " + message["content"] + "[/INST]" }}
        {%- endif %}
    {%- elif message.tool_calls is defined and message.tool_calls is not none %}
        {{- "[TOOL_CALLS] [" }}
        {%- for tool_call in message.tool_calls %}
            {%- set out = tool_call.function|tojson %}
            {{- out[:-1] }}
            {%- if not tool_call.id is defined or tool_call.id|length != 9 %}
                {{- raise_exception("Tool call IDs should be alphanumeric strings with "
                                    + "length 9!") }}
            {%- endif %}
            {{- ', "id": "' + tool_call.id + '"}' }}
            {%- if not loop.last %}
                {{- ", " }}
            {%- else %}
                {{- "]" + eos_token }}
            {%- endif %}
        {%- endfor %}
    {%- elif message["role"] == "assistant" %}
        {{- " " + message["content"]|trim + eos_token}}
    {%- elif message["role"] == "tool_results" or message["role"] == "tool" %}
        {%- if message.content is defined and message.content.content is defined %}
            {%- set content = message.content.content %}
        {%- else %}
            {%- set content = message.content %}
        {%- endif %}
        {{- '[TOOL_RESULTS] {"content": ' + content|string + ", " }}
        {%- if not message.tool_call_id is defined or message.tool_call_id|length != 9 %}
            {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
        {%- endif %}
        {{- '"call_id": "' + message.tool_call_id + '"}[/TOOL_RESULTS]' }}
    {%- else %}
        {{- raise_exception("Only user and assistant roles are supported, with the exception of "
                            + "an initial optional system message!") }}
    {%- endif %}
{%- endfor %}"""

CHATML = CHATML_TEMPLATE

TEMPLATES: dict[str, str] = {"qwen3": QWEN3, "llama3": LLAMA3, "mistral": MISTRAL,
                             "chatml": CHATML}


def tokenizer_with(template: str) -> PreTrainedTokenizerFast:
    """A fresh built-in tiny tokenizer whose chat template is ``template``."""
    tokenizer = build_tokenizer()
    tokenizer.chat_template = template
    return tokenizer


# --- tools and conversations ---------------------------------------------------------------

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression.",
        "parameters": {"type": "object",
                       "properties": {"expression": {"type": "string",
                                                     "description": "e.g. 2 + 2"}},
                       "required": ["expression"]}}},
    {"type": "function", "function": {
        "name": "search",
        "description": "Search the web; returns the top k results.",
        "parameters": {"type": "object",
                       "properties": {"query": {"type": "string"},
                                      "k": {"type": "integer", "description": "how many"}},
                       "required": ["query", "k"]}}},
]


def tool_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI tool call with its ``arguments`` as a dict (what chat templates expect;
    the wire format's JSON string must be decoded before rendering)."""
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": arguments}}


# Tool-call ids of 9 alphanumeric characters: Mistral's template refuses any other.
CALC = tool_call("calc00001", "calculator", {"expression": "2 + 2"})
SEARCH = tool_call("srch00002", "search", {"query": "capital of France", "k": 3})


@dataclass(frozen=True)
class Case:
    """One step of an agent's conversation as the capture sees it: a call with ``before``
    (and ``tools``), the assistant ``reply`` the agent echoes back, and the messages ``after``
    it that the next call adds."""

    before: list[dict[str, Any]]
    reply: dict[str, Any]
    after: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = field(default=None)

    @property
    def longer(self) -> list[dict[str, Any]]:
        """The next call's messages."""
        return [*self.before, self.reply, *self.after]


_ASK = {"role": "user", "content": "What is 2 + 2?"}
_AGAIN = {"role": "user", "content": "And 3 + 3?"}

CASES: dict[str, Case] = {
    "plain": Case([_ASK], {"role": "assistant", "content": "4"}, [_AGAIN]),
    "tool_call": Case(
        [_ASK], {"role": "assistant", "content": "", "tool_calls": [CALC]},
        [{"role": "tool", "tool_call_id": "calc00001", "content": "4"}], TOOLS),
    "parallel_calls": Case(
        [_ASK], {"role": "assistant", "content": "", "tool_calls": [CALC, SEARCH]},
        [{"role": "tool", "tool_call_id": "calc00001", "content": "4"},
         {"role": "tool", "tool_call_id": "srch00002", "content": "Paris"}], TOOLS),
    "thinking": Case(
        [_ASK], {"role": "assistant", "content": "<think>\nAdd 2 and 2.\n</think>\n\n4"},
        [_AGAIN]),
    "tools_user": Case([_ASK], {"role": "assistant", "content": "4"}, [_AGAIN], TOOLS),
    "system_user": Case(
        [{"role": "system", "content": "Answer briefly."}, _ASK],
        {"role": "assistant", "content": "4"}, [_AGAIN]),
}

Outcome = Literal["yes", "no", "raises"]

# Template x case: is the step an append-only extension (see the module docstring's table)?
EXPECTED: dict[str, dict[str, Outcome]] = {
    "qwen3": {"plain": "yes", "tool_call": "yes", "parallel_calls": "yes", "thinking": "no",
              "tools_user": "yes", "system_user": "yes"},
    "llama3": {"plain": "yes", "tool_call": "yes", "parallel_calls": "raises",
               "thinking": "yes", "tools_user": "yes", "system_user": "yes"},
    "mistral": {"plain": "yes", "tool_call": "yes", "parallel_calls": "yes", "thinking": "yes",
                "tools_user": "no", "system_user": "no"},
    "chatml": {"plain": "yes", "tool_call": "yes", "parallel_calls": "yes", "thinking": "yes",
               "tools_user": "yes", "system_user": "yes"},
}


# --- what each family's model samples ------------------------------------------------------

def _arguments(call: dict[str, Any]) -> str:
    return json.dumps(call["function"]["arguments"])


def _qwen3_text(message: dict[str, Any]) -> str:
    content = message.get("content") or ""
    calls = [f'<tool_call>\n{{"name": "{c["function"]["name"]}", "arguments": '
             f'{_arguments(c)}}}\n</tool_call>' for c in message.get("tool_calls") or []]
    body = "\n".join([content, *calls] if content else calls)
    if message.get("reasoning_content"):
        body = f"<think>\n{message['reasoning_content']}\n</think>\n\n{body}"
    return body + EOS


def _llama3_text(message: dict[str, Any]) -> str:
    calls = message.get("tool_calls") or []
    if len(calls) > 1:
        raise ValueError("a Llama 3.1 model makes one tool call per message")
    if calls:
        name = calls[0]["function"]["name"]
        return f'{{"name": "{name}", "parameters": {_arguments(calls[0])}}}' + EOS
    return message["content"].strip() + EOS


def _mistral_text(message: dict[str, Any]) -> str:
    calls = message.get("tool_calls") or []
    if calls:
        items = [json.dumps(c["function"])[:-1] + f', "id": "{c["id"]}"}}' for c in calls]
        return "[TOOL_CALLS] [" + ", ".join(items) + "]" + EOS
    return " " + message["content"].strip() + EOS


def _chatml_text(message: dict[str, Any]) -> str:
    calls = "".join("<tool_call>" + json.dumps({"name": c["function"]["name"],
                                                "arguments": c["function"]["arguments"]})
                    + "</tool_call>" for c in message.get("tool_calls") or [])
    return (message.get("content") or "") + calls + EOS


_SAMPLED_TEXT: dict[str, Callable[[dict[str, Any]], str]] = {
    "qwen3": _qwen3_text, "llama3": _llama3_text, "mistral": _mistral_text,
    "chatml": _chatml_text,
}


def sampled_text(template: str, message: dict[str, Any]) -> str:
    """The text a model of family ``template`` (a :data:`TEMPLATES` key) samples after the
    generation prompt for the assistant ``message`` it is echoed back as, ending in EOS.

    Written by hand in each family's output format (tool-call JSON as ``json.dumps``, which
    is what the templates' ``tojson`` writes), independently of the Jinja templates.
    """
    return _SAMPLED_TEXT[template](message)
