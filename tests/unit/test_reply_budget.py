"""Replies that cannot fit rollout.max_new_tokens are said before training (the oracle's
replies, measured) and during it (most replies cut)."""

from __future__ import annotations

import pytest

from fixture_runs import TINY_RUN
from turnrl.cli import main
from turnrl.config import load_config
from turnrl.train.preflight import reply_budget_warning


def test_an_oracle_reply_longer_than_the_budget_is_named(tokenizer):
    cfg = load_config(None, ["env.id=search-qa-v0"])  # max_new_tokens 16
    warning = reply_budget_warning(cfg, tokenizer)
    assert warning is not None
    assert warning.startswith("rollout.max_new_tokens=16 is shorter than the oracle's replies "
                              "on search-qa-v0: 'search[")
    needed = int(warning.split("rollout.max_new_tokens=")[-1])
    assert reply_budget_warning(load_config(None, ["env.id=search-qa-v0",
                                                   f"rollout.max_new_tokens={needed}"]),
                                tokenizer) is None
    assert reply_budget_warning(load_config(None), tokenizer) is None  # frozenlake fits


@pytest.mark.slow
def test_a_run_whose_replies_are_cut_says_so_once(tmp_path, capsys):
    assert main(["train", *TINY_RUN, "rollout.max_new_tokens=1", "train.steps=3",
                 f"run.out_dir={tmp_path}", "log.report=false"]) == 0
    err = capsys.readouterr().err
    assert "rollout.max_new_tokens=1 is shorter than the oracle's replies on arithmetic-v0" in err
    assert err.count("of the replies hit rollout.max_new_tokens=1 and were cut") == 1
