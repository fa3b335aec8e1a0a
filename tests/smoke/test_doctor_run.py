"""``turnrl doctor`` on a real failing run: examples/count_up.py (a user's first env) from the
random init with the default SFT settings names the causes and the keys to change."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_train_loop import SMALL_RUN

from turnrl.cli import main

pytestmark = pytest.mark.slow
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_doctor_names_why_count_up_did_not_learn(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.setenv("COLUMNS", "200")
    argv = ["train", "--import", "count_up", *SMALL_RUN, "env.id=countup-v0",
            "rollout.max_new_tokens=6", f"run.out_dir={tmp_path}", "run.name=random",
            "log.tensorboard=false", "log.report=false"]
    assert main(argv) == 0
    capsys.readouterr()
    assert main(["doctor", "--import", "count_up", str(tmp_path / "random")]) == 0
    out = capsys.readouterr().out
    lines = {line.split(":", 1)[0]: line for line in out.splitlines() if ":" in line}
    assert lines["x model"].startswith("x model: the model is the random init")
    assert lines["x sft_noise"].startswith("x sft_noise: 50% of the demonstrations' replies")
    assert "change: sft.train_random_actions=false" in out and "change: model.path=tiny" in out
    assert "the model's first reply" in out  # its replies beside the oracle's
