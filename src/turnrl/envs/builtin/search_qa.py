"""``search-qa-v0``: answer a factual question by searching a knowledge base with tools.

Tests tool use over several turns: the agent calls ``search`` (BM25 over short passages, or
dense retrieval) until it has the facts, then ``answer``, which ends the episode. By default
the knowledge base is a fictional world generated from ``kb_seed`` (people, organisations,
cities and countries with syllable names; see :mod:`turnrl.envs.builtin.kb`), so facts
cannot be memorised across seeds; ``corpus_path`` and ``questions_path`` use your own files::

    system:    Answer the question. Search the knowledge base ... Tools: search[<query>] ...
    user:      Question: In which year was the employer of Poushund Gastes founded?
    assistant: search[Poushund Gastes works]
    tool:      [1] Poushund Gastes works for Pouprasel Studios as a pilot.
               [2] Poushund Gastes was born in Prokeitoun in 1912.
               [3] Tothoun Press was founded in 1939 by Poushund Gastes.
    assistant: search[Pouprasel Studios founded]
    tool:      [1] Pouprasel Studios was founded in 1926 by Shuthaith Paflesh.
               [2] Pouprasel Studios is headquartered in Dribatiash.
               [3] Poushund Gastes works for Pouprasel Studios as a pilot.
    assistant: answer[1926]
    user:      Correct.                                   reward 1.0, terminated

(``SearchQA(hops=2).reset(seed=14)`` with the default ``kb_seed=0``.)

``reset(seed)`` draws a question from ``seed``: with ``hops="mixed"`` a single-hop or a
two-hop question with equal probability, then a question kind and an entity uniformly (your
own questions: row ``seed % len(questions)``). ``hops=1`` or ``hops=2`` fixes the hops.

Tools (:class:`turnrl.envs.tools.Toolbox`, ``spec.tools == ["search", "answer"]``), called in
the ``tool_format`` the agent uses: ``"compact"`` (``search[query]``, ``answer[text]``, for
tiny models), ``"json"`` (``<tool_call>{"name": "search", "arguments": {"query": "..."}}
</tool_call>``, as tool-aware chat templates teach) or ``"auto"`` (both; default).
``tool_schemas()`` gives the JSON schemas for ``apply_chat_template(tools=...)`` (``[]`` in
the compact format); the system prompt also lists the tools in the chosen format, so a
template that ignores ``tools`` (the tiny model's ChatML) still shows them.

* ``search(query)``: the ``top_k`` best passages, numbered, as a ``tool`` message (the tiny
  model's ChatML template renders any role, and ``tool`` is one of its tokens); passages that
  share no word with the query are left out (BM25), and ``No passages found`` when none is
  left. Reward 0.
* ``answer(text)``: ends the episode (terminated); reward 1.0 when the SQuAD-normalised text
  (:func:`turnrl.rewards.normalize_answer`: case, punctuation, articles, spaces) equals a
  normalised gold answer, else 0.0. The reply is ``Correct.`` or ``Incorrect.`` as a ``user``
  message.
* A reply without a valid call (no call, bad JSON, an unknown tool, a missing argument) is
  answered by a ``user`` message saying what was wrong and showing the expected format; it
  uses up the turn (``info["invalid_action"]``). Only the first call of a reply runs.

After ``max_turns`` turns without an answer the episode is truncated with reward 0.

Info, for the rewards of :mod:`turnrl.rewards` (``exact_match``, ``f1``, ``grounded``,
``tool_cost``): reset info holds ``answer`` (the acceptable answers, canonical first),
``question``, ``question_kind`` and ``hops``; every step info holds the ``Toolbox`` keys
(``tool_name``, ``tool_calls``, ``tool_error``, ``tool_error_kind``, ``tool_calls_ignored``),
``invalid_action``, ``success`` and ``retrieved`` (the texts of every passage retrieved so
far, in order); the last step also ``answer`` and ``final_answer`` (the answer given, ``""``
when the turns ran out first).

The oracle (``oracle_action()``) reads like a careful agent that knows which fact each hop
needs: it searches for the entity and the fact (``search[Poushund Gastes works]``), takes the
bridge entity from the retrieved passage, searches again for a two-hop question, and answers
the gold once every supporting passage was retrieved, trying reworded queries when one misses
(``answer[unknown]`` when none finds it or the turns run short); for your own questions it
searches the question's text, then answers (the gold if the question's optional ``support``
documents were retrieved). ``privileged_info()`` is the gold answer and the supporting
passages (ids and texts).

Retrieval (:mod:`turnrl.envs.retrieval`) is BM25 (``bm25s``) by default; ``retriever="dense"``
with ``dense_model=<a local sentence-transformers model directory>`` uses embeddings (``pip
install 'turnrl[dense]'``). The index is built on the first ``reset`` and cached per corpus in
the process, so the env instances a runner makes per episode share it.
"""

from __future__ import annotations

import random
import re
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from turnrl.envs.builtin.kb import (
    Corpus,
    KnowledgeBase,
    Question,
    generate_kb,
    load_corpus,
    load_questions,
)
from turnrl.envs.protocol import EnvSpec
from turnrl.envs.retrieval import (
    RETRIEVER_KINDS,
    Retriever,
    RetrieverError,
    RetrieverKind,
    get_retriever,
)
from turnrl.envs.tools import TOOL_FORMATS, Toolbox, ToolFormat, check_tool_role
from turnrl.rewards import normalize_answer
from turnrl.types import Message, StepResult
from turnrl.wording import did_you_mean

SPEC = EnvSpec(
    id="search-qa-v0",
    entry_point="turnrl.envs.builtin.search_qa:SearchQA",
    max_turns=6,
    description="Answer a factual question (single- or two-hop) about a generated fictional "
    "world, or your own corpus, by calling search[query] (BM25 or dense) and answer[text].",
    reward_range=(0.0, 1.0),
    tools=["search", "answer"],
    has_oracle=True,
    has_privileged_info=True,
    slow_steps=True,
)

INSTRUCTION = ("Answer the question. Search the knowledge base for the facts you need, one "
               "search per turn, then give the answer.")
Hops = Literal[1, 2, "mixed"]
HOPS: tuple[Hops, ...] = (1, 2, "mixed")
CORRECT, INCORRECT = "Correct.", "Incorrect."
NO_RESULTS = "No passages found for {query!r}. Try other keywords, e.g. a name and the fact."
UNKNOWN = "unknown"  # the oracle's answer when it could not retrieve the support


class SearchQA:
    """Question answering with ``search`` and ``answer`` tools over a knowledge base.

    Args:
        kb_seed: the seed of the generated knowledge base (not used with ``corpus_path``).
        num_people: people in the generated world (>= 4); organisations and cities are a
            quarter of that, countries a sixteenth (80 people: 225 passages).
        hops: ``1``, ``2`` or ``"mixed"`` (generated questions only).
        top_k: passages returned per search.
        tool_format: ``"auto"``, ``"json"`` or ``"compact"`` (see the module docstring).
        retriever: ``"bm25"`` or ``"dense"``.
        dense_model: the sentence-transformers model of ``retriever="dense"``: a local model
            directory (loads offline) or a Hugging Face model id.
        corpus_path: a JSONL file of documents ``{"id", "text", "title"?}``; with
            ``questions_path``, replaces the generated knowledge base.
        questions_path: a JSONL file of ``{"question", "answer" | "answers", "support"?}``.
        instruction: the first line of the system prompt (the tool list follows it).
        system_prompt: replaces the whole system message when given; ``""``: none (a model
            trained from scratch learns the tools from its demonstrations).
        tool_role: role of the search results: ``"tool"``, or ``"user"`` for chat templates
            without a tool role (:func:`turnrl.envs.tools.check_tool_role`).
        max_turns: the turn budget (>= 3 when two-hop questions are possible, else >= 2).
    """

    def __init__(
        self,
        *,
        kb_seed: int = 0,
        num_people: int = 80,
        hops: Hops = "mixed",
        top_k: int = 3,
        tool_format: ToolFormat = "auto",
        retriever: RetrieverKind = "bm25",
        dense_model: str | None = None,
        corpus_path: str | Path | None = None,
        questions_path: str | Path | None = None,
        instruction: str = INSTRUCTION,
        tool_role: str = "tool",
        max_turns: int = 6,
        system_prompt: str | None = None,
    ) -> None:
        user_files = _validate(hops, top_k, tool_format, retriever, dense_model, corpus_path,
                               questions_path, max_turns)
        self.kb: KnowledgeBase | None = None
        if user_files:
            self.corpus: Corpus = load_corpus(str(corpus_path))
            self.questions: tuple[Question, ...] = load_questions(str(questions_path),
                                                                  self.corpus)
        else:
            self.kb = generate_kb(kb_seed, num_people)
            self.corpus, self.questions = self.kb.corpus, ()
        self.hops, self.top_k, self.tool_format = hops, top_k, tool_format
        self.tool_role = check_tool_role(tool_role, "search-qa-v0")
        self.retriever_kind, self.dense_model, self.max_turns = retriever, dense_model, max_turns
        self.spec = replace(SPEC, max_turns=max_turns, kwargs={
            "kb_seed": kb_seed, "num_people": num_people, "hops": hops, "top_k": top_k,
            "tool_format": tool_format, "retriever": retriever, "dense_model": dense_model,
            "corpus_path": None if corpus_path is None else str(corpus_path),
            "questions_path": None if questions_path is None else str(questions_path),
            "instruction": instruction, "tool_role": tool_role, "max_turns": max_turns,
            "system_prompt": system_prompt,
        })
        self.toolbox = Toolbox({"search": self.search, "answer": self.answer}, format=tool_format)
        self.system_messages = self.toolbox.system_messages(instruction, system_prompt,
                                                            "search-qa-v0")
        self._retriever: Retriever | None = None  # built (or taken from the cache) on reset
        self._rng: random.Random | None = None
        self._question: Question | None = None
        self._turn = 0
        self._done = True
        self._retrieved: list[int] = []  # corpus indices, in order of first retrieval
        self._queries: set[str] = set()  # _query_key of every search made
        self._final_answer: str | None = None

    # -- the Env protocol -------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[list[Message], dict[str, Any]]:
        if options:
            raise ValueError(f"search-qa-v0: reset() takes no options, got {sorted(options)}")
        if seed is not None or self._rng is None:
            self._rng = random.Random(seed)
        question = self._question = self._draw(self._rng, seed)
        if self._retriever is None:
            try:
                self._retriever = get_retriever(
                    self.retriever_kind, self.corpus.texts(),
                    model=self.dense_model, corpus_key=self.corpus.fingerprint)
            except RetrieverError as error:
                raise RetrieverError(f"search-qa-v0: {error}") from None
        self._turn, self._done = 0, False
        self._retrieved, self._queries, self._final_answer = [], set(), None
        info = {"answer": list(question.answers), "question": question.text,
                "question_kind": question.kind, "hops": len(question.hops)}
        return [*self.system_messages,
                {"role": "user", "content": f"Question: {question.text}"}], info

    def step(self, action: str) -> StepResult:
        if self._done:
            raise RuntimeError("search-qa-v0: the episode is over; call reset() first")
        self._turn += 1
        text, tool_info = self.toolbox.call(action)
        terminated = self._final_answer is not None
        success = terminated and self.is_correct(self._final_answer or "")
        truncated = not terminated and self._turn >= self.max_turns
        self._done = terminated or truncated
        searched = tool_info["tool_name"] == "search" and not tool_info["tool_error"]
        info: dict[str, Any] = {
            **tool_info,
            "invalid_action": tool_info["tool_error"],
            "success": success,
            "retrieved": [self.corpus.passages[i].render() for i in self._retrieved],
        }
        if self._done:
            info["answer"] = list(self._current().answers)
            info["final_answer"] = self._final_answer if terminated else ""
        return StepResult(
            observation=[{"role": self.tool_role if searched else "user", "content": text}],
            reward=1.0 if success else 0.0,
            terminated=terminated,
            truncated=truncated,
            info=info,
        )

    def close(self) -> None:
        pass

    # -- tools ------------------------------------------------------------------------------

    def search(self, query: str) -> str:
        """Search the knowledge base; returns the best-matching passages, numbered.

        Args:
            query: Keywords, e.g. a name and the fact you need.
        """
        if not query.strip():
            raise ValueError("the query is empty; search for keywords, e.g. a name and the "
                             "fact you need")
        if self._retriever is None:
            raise RuntimeError("search-qa-v0: call reset() before searching")
        self._queries.add(_query_key(query))
        hits = self._retriever.search(query, self.top_k)
        if not hits:
            return NO_RESULTS.format(query=query.strip())
        for index, _score in hits:
            if index not in self._retrieved:
                self._retrieved.append(index)
        return "\n".join(f"[{rank}] {self.corpus.passages[index].render()}"
                         for rank, (index, _score) in enumerate(hits, start=1))

    def answer(self, text: str) -> str:
        """Give your final answer; this ends the episode.

        Args:
            text: The answer alone, as short as possible.
        """
        if not text.strip():
            raise ValueError("the answer is empty; give the answer itself")
        self._final_answer = text.strip()
        return CORRECT if self.is_correct(self._final_answer) else INCORRECT

    def tool_schemas(self) -> list[dict[str, Any]]:
        """The tools' JSON schemas for the chat template (``[]`` in the compact format, whose
        tools the system prompt lists)."""
        return self.toolbox.template_schemas()

    def is_correct(self, text: str) -> bool:
        """Whether ``text`` equals a gold answer after SQuAD normalisation."""
        if self._question is None:
            return False
        given = normalize_answer(text)
        return any(given == normalize_answer(gold) for gold in self._question.answers)

    # -- optional capabilities --------------------------------------------------------------

    def oracle_action(self) -> str | None:
        """The next search of the first hop whose supporting passage was not retrieved yet
        (its first query not tried yet), else the answer: the gold when every hop's passage
        was retrieved, ``unknown`` otherwise. Answers early when one turn is left."""
        if self._done or self._question is None:
            return None
        query = self._next_query() if self.max_turns - self._turn > 1 else None
        if query is not None:
            return self.format_call("search", query)
        supported = all(self._hop_done(i) for i in range(len(self._question.hops)))
        return self.format_call("answer", self._question.answers[0] if supported else UNKNOWN)

    def privileged_info(self) -> str:
        """The gold answer(s) and the supporting passages (ids and texts), for a critic."""
        if self._question is None:
            return "no question yet"
        answers = self._question.answers
        lines = [f"gold answer: {answers[0]}"
                 + (f" (also accepted: {', '.join(answers[1:])})" if len(answers) > 1 else "")]
        support = self._question.support
        if support:
            lines.append("supporting passages:")
            lines.extend(f"[{pid}] {self.corpus.passages[self.corpus.index_of[pid]].render()}"
                         for pid in support)
        else:
            lines.append("supporting passages: not given")
        return "\n".join(lines)

    def sample_action(self, rng: random.Random) -> str:
        """A random valid call from the caller's ``rng``: mostly a search for a few words of
        the question, sometimes an answer that is one of its words."""
        if self._question is None:
            raise RuntimeError("search-qa-v0: call reset() before sample_action()")
        words = re.findall(r"\w+", self._question.text) or ["question"]
        if rng.random() < 0.7:
            picked = rng.sample(words, min(len(words), rng.randint(1, 3)))
            return self.format_call("search", " ".join(picked))
        return self.format_call("answer", rng.choice(words))

    # -- helpers ------------------------------------------------------------------------------

    def format_call(self, name: str, argument: str) -> str:
        """A call of tool ``name`` in the env's format (:meth:`Toolbox.format_call`)."""
        return self.toolbox.format_call(name, argument)

    def _current(self) -> Question:
        if self._question is None:
            raise RuntimeError("search-qa-v0: call reset() first")
        return self._question

    def _draw(self, rng: random.Random, seed: int | None) -> Question:
        if self.kb is None:
            index = seed % len(self.questions) if seed is not None else rng.randrange(
                len(self.questions))
            return self.questions[index]
        hops = rng.choice((1, 2)) if self.hops == "mixed" else int(self.hops)
        return self.kb.question(rng, hops)

    def _hop_done(self, hop_index: int) -> bool:
        hop = self._current().hops[hop_index]
        if not hop.support:
            return any(_query_key(q) in self._queries for q in hop.queries)
        retrieved = {self.corpus.passages[i].id for i in self._retrieved}
        return all(pid in retrieved for pid in hop.support)

    def _next_query(self) -> str | None:
        """The first untried query of the first unfinished hop; ``None``: answer now."""
        for hop_index, hop in enumerate(self._current().hops):
            if self._hop_done(hop_index):
                continue
            untried = [q for q in hop.queries if _query_key(q) not in self._queries]
            return untried[0] if untried else None
        return None


def _query_key(query: str) -> str:
    """Queries that differ only in case, brackets or spacing search the same."""
    return " ".join(re.sub(r"[\[\]]", " ", query).lower().split())


def _validate(hops: Any, top_k: Any, tool_format: Any, retriever: Any, dense_model: Any,
              corpus_path: Any, questions_path: Any, max_turns: Any) -> bool:
    """Check the constructor arguments; returns whether the user's own files are used."""
    if hops not in HOPS or isinstance(hops, bool):
        raise ValueError(f"search-qa-v0: hops must be 1, 2 or 'mixed', got {hops!r}")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"search-qa-v0: top_k must be an int >= 1, got {top_k!r}")
    for name, value, choices in (("tool_format", tool_format, TOOL_FORMATS),
                                 ("retriever", retriever, RETRIEVER_KINDS)):
        if value not in choices:
            raise ValueError(f"search-qa-v0: {name} must be one of {choices}, got {value!r}"
                             f"{did_you_mean(str(value), choices)}")
    if retriever == "dense" and not dense_model:
        raise ValueError("search-qa-v0: retriever='dense' needs dense_model=<a local "
                         "sentence-transformers model directory or a Hugging Face model id>")
    if (corpus_path is None) != (questions_path is None):
        given, missing = (("corpus_path", "questions_path") if questions_path is None
                          else ("questions_path", "corpus_path"))
        raise ValueError(f"search-qa-v0: {given} was given without {missing}; your own "
                         "corpus needs both files (documents and questions)")
    user_files = corpus_path is not None
    two_hop = not user_files and hops in (2, "mixed")
    needed = 3 if two_hop else 2
    if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < needed:
        raise ValueError(
            f"search-qa-v0: max_turns must be an int >= {needed} (a search per hop and an "
            f"answer), got {max_turns!r}"
            + ("; raise it or use hops=1" if two_hop else ""))
    return user_files
