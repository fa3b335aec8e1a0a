"""A search agent with the plain ``openai`` SDK: ``search(query)`` and ``answer(text)`` tools
over turnrl's built-in knowledge base.

The knowledge base is the fictional world ``search-qa-v0`` generates (people, organisations,
cities and countries with made-up names, so nothing can be answered from memory:
:func:`turnrl.envs.builtin.kb.generate_kb`), indexed with the same cached BM25 retriever
(:func:`turnrl.envs.retrieval.get_retriever`). The tasks are that env's questions, single-
and two-hop ("In which year was the employer of Poushund Gastes founded?")::

    {"seed": 14, "question": "...", "answers": ["1926"], "hops": 2}

Each turn the agent calls the model with ``tools=[search, answer]``. A ``search`` call gets
the best passages as a ``tool`` message; an ``answer`` call ends the run, with reward 1.0
when the answer matches a gold one after SQuAD normalisation (case, punctuation, articles);
a reply without a tool call is told to call one. ``info`` carries ``answer`` (the golds),
``final_answer`` and ``retrieved`` (the passages seen), which the reward terms of
:mod:`turnrl.rewards` read (``exact_match``, ``f1``, ``grounded``, ``tool_cost``).

The tiny model's ChatML template ignores ``tools``: the call format reaches it through this
agent's system prompt (:data:`SYSTEM_PROMPT`). Tool calls are about 80 characters, so give
the tiny (character-level) model room: ``rollout.max_new_tokens=128``::

    python examples/agents/search_agent.py      # writes data/search_*.jsonl if missing
    PYTHONPATH=examples/agents turnrl train agent.entry_point=search_agent:solve \\
        agent.tasks=examples/agents/data/search_tasks.jsonl \\
        agent.eval_tasks=examples/agents/data/search_eval_tasks.jsonl \\
        sft.source=jsonl sft.path=examples/agents/data/search_sft.jsonl \\
        rollout.max_new_tokens=128

``oracle_transcripts`` plays ``search-qa-v0``'s oracle (it searches for each hop's fact, then
answers) and writes its calls in the text form the model writes, with this agent's own
search results, for ``sft.source=jsonl``.
"""

from __future__ import annotations

import functools
import json
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from example_data import DATA, data_main, write_jsonl_files

from turnrl.agents.runner import AgentResult
from turnrl.envs.builtin.kb import Corpus, generate_kb
from turnrl.envs.builtin.search_qa import SearchQA
from turnrl.envs.retrieval import Retriever, get_retriever
from turnrl.rewards import normalize_answer

MODEL = "policy"  # the model id the endpoint serves (agent.model_name)
KB_SEED, NUM_PEOPLE = 0, 80  # search-qa-v0's defaults: 225 passages
TOP_K = 3  # passages per search
MAX_CALLS = 6  # model calls per task (search-qa-v0's turn budget)
TRAIN_SEEDS = range(0, 1000)
EVAL_SEEDS = range(1_000_000, 1_000_200)  # held out: disjoint from TRAIN_SEEDS
SFT_CONVERSATIONS = 256

TOOLS = [
    {"type": "function", "function": {
        "name": "search",
        "description": "Search the knowledge base; returns the best-matching passages.",
        "parameters": {"type": "object", "required": ["query"], "properties": {
            "query": {"type": "string", "description": "keywords: a name and the fact"}}}}},
    {"type": "function", "function": {
        "name": "answer",
        "description": "Give your final answer; this ends the task.",
        "parameters": {"type": "object", "required": ["text"], "properties": {
            "text": {"type": "string", "description": "the answer alone"}}}}},
]
SYSTEM_PROMPT = ("Answer the question. Search the knowledge base, one search per turn, then "
                 'answer. Call <tool_call>{"name": "search", "arguments": {"query": "..."}}'
                 '</tool_call> or <tool_call>{"name": "answer", "arguments": {"text": "..."}}'
                 "</tool_call>.")
NO_TOOL_CALL = "Call a tool: search or answer."


def solve(client: Any, task: dict[str, Any]) -> AgentResult:
    """Answer ``task["question"]`` by searching, with the model behind ``client``."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": f"Question: {task['question']}"}]
    answer: str | None = None
    retrieved: list[str] = []
    for _ in range(MAX_CALLS):
        reply = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))  # echoed as returned
        if not message.tool_calls:
            messages.append({"role": "user", "content": NO_TOOL_CALL})
            continue
        for call in message.tool_calls:
            arguments = _arguments(call.function.arguments)
            if call.function.name == "answer":
                answer = str(arguments.get("text", ""))
                break
            result = search(str(arguments.get("query", "")), retrieved)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        if answer is not None:
            break
    golds = [str(gold) for gold in task["answers"]]
    correct = answer is not None and normalize_answer(answer) in {
        normalize_answer(gold) for gold in golds}
    return AgentResult(reward=float(correct), info={
        "answer": golds, "final_answer": answer or "", "retrieved": retrieved})


_KB_LOCK = threading.Lock()


@functools.cache
def _knowledge_base(kb_seed: int) -> tuple[Corpus, Retriever]:
    kb = generate_kb(kb_seed, NUM_PEOPLE)
    retriever = get_retriever("bm25", kb.corpus.texts(), corpus_key=kb.corpus.fingerprint)
    return kb.corpus, retriever


def knowledge_base(kb_seed: int = KB_SEED) -> tuple[Corpus, Retriever]:
    """The generated world's passages and their BM25 index (built once per process; the
    agent's runs share it, as the env's episodes do)."""
    with _KB_LOCK:  # sync agents run in threads: build it once
        return _knowledge_base(kb_seed)


def search(query: str, retrieved: list[str] | None = None) -> str:
    """The ``TOP_K`` best passages for ``query``, numbered (as ``search-qa-v0`` shows them);
    each new one is appended to ``retrieved``."""
    if not query.strip():
        return "error: the query is empty; search for keywords, e.g. a name and the fact"
    corpus, retriever = knowledge_base()
    hits = retriever.search(query, TOP_K)
    if not hits:
        return (f"No passages found for {query.strip()!r}. Try other keywords, e.g. a name "
                "and the fact.")
    texts = [corpus.passages[index].render() for index, _score in hits]
    if retrieved is not None:
        retrieved.extend(text for text in texts if text not in retrieved)
    return "\n".join(f"[{rank}] {text}" for rank, text in enumerate(texts, start=1))


def _arguments(arguments: str) -> dict[str, Any]:
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


# ------------------------------------------------------------------ tasks and demonstrations

def _env() -> SearchQA:
    return SearchQA(kb_seed=KB_SEED, num_people=NUM_PEOPLE, top_k=TOP_K, tool_format="json",
                    max_turns=MAX_CALLS)


def make_tasks(seeds: Iterable[int]) -> list[dict[str, Any]]:
    """The question ``search-qa-v0`` asks at each seed, with its gold answers."""
    env, tasks = _env(), []
    for seed in seeds:
        _, info = env.reset(seed=int(seed))
        tasks.append({"seed": int(seed), "question": info["question"],
                      "answers": list(info["answer"]), "hops": info["hops"]})
    return tasks


def oracle_transcripts(tasks: Iterable[dict[str, Any]]) -> list[list[dict[str, str]]]:
    """The conversation of ``search-qa-v0``'s oracle on each task's seed, as this agent
    holds it: its calls in the ``<tool_call>`` text form, this agent's search results as
    ``tool`` messages, ending with the answer call. A task the oracle does not solve (it
    could not retrieve a supporting passage) is left out."""
    env, transcripts = _env(), []
    for task in tasks:
        env.reset(seed=int(task["seed"]))
        messages = [{"role": "system", "content": SYSTEM_PROMPT},
                    {"role": "user", "content": f"Question: {task['question']}"}]
        while (action := env.oracle_action()) is not None:
            messages.append({"role": "assistant", "content": action})
            call = json.loads(action.removeprefix("<tool_call>").removesuffix("</tool_call>"))
            step = env.step(action)
            if call["name"] == "search":
                messages.append({"role": "tool", "content": search(call["arguments"]["query"])})
            elif step.info["success"]:
                transcripts.append(messages)
    env.close()
    return transcripts


def write_data(out: Path = DATA, *, force: bool = False) -> list[Path]:
    """Write the training tasks, the held-out tasks and the SFT transcripts under ``out``
    (each only if missing, unless ``force``); returns the files written."""
    train = make_tasks(TRAIN_SEEDS)
    files = {
        "search_tasks.jsonl": lambda: train,
        "search_eval_tasks.jsonl": lambda: make_tasks(EVAL_SEEDS),
        "search_sft.jsonl": lambda: [{"messages": m} for m in
                                     oracle_transcripts(train[:SFT_CONVERSATIONS])],
    }
    return write_jsonl_files(out, files, force=force)


def main(argv: list[str]) -> None:
    data_main("Write the search agent's tasks and SFT data.", write_data, argv)


if __name__ == "__main__":
    main(sys.argv[1:])
