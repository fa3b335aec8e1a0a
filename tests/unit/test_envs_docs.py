"""docs/environments.md stays true: its custom-env example runs and passes check_env."""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

import pytest

from turnrl.envs import check_env, make, spec
from turnrl.envs import registry as env_registry

DOC = Path(__file__).resolve().parents[2] / "docs" / "environments.md"


def doc_example() -> str:
    text = DOC.read_text(encoding="utf-8")
    match = re.search(r"<!-- tested-example -->\n```python\n(.*?)\n```", text, re.DOTALL)
    assert match, f"{DOC} lost its '<!-- tested-example -->' python block"
    return match[1]


@pytest.fixture
def isolated(monkeypatch):
    monkeypatch.setattr(env_registry, "_SPECS", dict(env_registry._SPECS))
    monkeypatch.setattr(env_registry, "_plugins_scanned", True)
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda *, group: [])


def test_custom_env_example_runs(isolated):
    namespace: dict = {"__name__": "docs_example"}
    exec(compile(doc_example(), str(DOC), "exec"), namespace)
    assert spec("guessnumber-v0").has_oracle
    env = make("guessnumber-v0")
    assert isinstance(env, namespace["GuessNumber"])
    check_env(env, seeds=range(20))


def test_custom_env_example_oracle_always_wins(isolated):
    exec(compile(doc_example(), str(DOC), "exec"), {"__name__": "docs_example"})
    env = make("guessnumber-v0", high=50)
    for seed in range(50):
        env.reset(seed=seed)
        result = env.step(env.oracle_action())
        assert result.reward == 1.0 and result.terminated
