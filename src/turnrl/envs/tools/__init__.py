"""Tools for envs: typed Python callables as chat-template tool schemas, and tool-call parsing.

An env that offers tools (a search engine, a calculator, ``answer``) keeps them in a
:class:`Toolbox`. The toolbox gives the JSON schemas that ``tokenizer.apply_chat_template(...,
tools=schemas)`` renders into the prompt, and turns the agent's reply into a tool call and the
call into an observation text::

    def search(query: str, k: int = 3) -> str:
        '''Search the corpus.

        Args:
            query: What to look for.
            k: How many passages to return.
        '''

    toolbox = Toolbox([search], format="auto")
    text, info = toolbox.call('<tool_call>{"name": "search", "arguments": {"query": "x"}}'
                              '</tool_call>')

Two call formats are understood, ``json`` (``<tool_call>{"name": ..., "arguments": {...}}
</tool_call>`` or the bare object) and ``compact`` (``search[capital of France]``, the one
argument going to the tool's first parameter), and ``auto`` reads both
(:mod:`~turnrl.envs.tools.parsing` describes them).

Only the first call of a message is considered: if it is valid it is executed, and the
observation says how many further calls were ignored (``info["tool_calls_ignored"]``); if it is
invalid, its error is reported and the rest of the message is ignored. One call per turn keeps
the transcript and the per-turn credit simple.

Nothing here raises on a bad reply: a missing or malformed call, an unknown tool (with the
closest name suggested), missing, unexpected or ill-typed arguments, and an exception raised by
the tool itself each become an observation text (``"Error: ..."``) that says what was wrong and
shows the expected format, and ``info`` says which kind of error it was (see :data:`ERROR_KINDS`).
Mistakes of the env author (a tool without type hints or docstring, a duplicate name) raise
:class:`ToolSchemaError` when the toolbox is built.

The modules, by concern:

- :mod:`~turnrl.envs.tools.schemas`: callables as JSON tool schemas (:func:`tool_schema`);
- :mod:`~turnrl.envs.tools.parsing`: finding and reading calls in a reply, in each format;
- :mod:`~turnrl.envs.tools.arguments`: validating and converting a call's arguments against
  the tool's signature (pydantic);
- :mod:`~turnrl.envs.tools.toolbox`: :class:`Toolbox`, which checks, runs and reports calls.
"""

from turnrl.envs.tools.parsing import TOOL_FORMATS, ToolFormat
from turnrl.envs.tools.schemas import TOOL_NAME_PATTERN, ToolSchemaError, tool_schema, tool_schemas
from turnrl.envs.tools.toolbox import (
    ERROR_KINDS,
    TOOL_ROLES,
    ErrorKind,
    Toolbox,
    ToolCall,
    ToolCallError,
    check_tool_role,
)

__all__ = [
    "ERROR_KINDS",
    "TOOL_FORMATS",
    "TOOL_NAME_PATTERN",
    "TOOL_ROLES",
    "ErrorKind",
    "ToolCall",
    "ToolCallError",
    "ToolFormat",
    "ToolSchemaError",
    "Toolbox",
    "check_tool_role",
    "tool_schema",
    "tool_schemas",
]
