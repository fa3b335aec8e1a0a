"""meta.json: one entry per session of a run, with the code, libraries and machine; and a
report that cannot be built never fails the run."""

from __future__ import annotations

import json
import logging

import torch

from turnrl.report.report import write_run_report
from turnrl.train.meta import code_commit, record_session


def test_each_session_is_appended_and_an_unreadable_record_is_replaced(tmp_path):
    record_session(tmp_path, torch.device("cpu"))
    record_session(tmp_path, torch.device("cpu"))  # a --resume
    sessions = json.loads((tmp_path / "meta.json").read_text())["sessions"]
    assert len(sessions) == 2
    first = sessions[0]
    assert first["device"] == "cpu" and first["accelerator"] is None
    assert first["threads"] == torch.get_num_threads() and first["torch"] == torch.__version__
    assert (first["commit"], first["dirty"]) == code_commit()
    (tmp_path / "meta.json").write_text("{not json")
    record_session(tmp_path, torch.device("cpu"))
    assert len(json.loads((tmp_path / "meta.json").read_text())["sessions"]) == 1


def test_a_report_that_cannot_be_built_is_a_warning(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        assert write_run_report(tmp_path / "gone") is None
    assert "could not write" in caplog.text and "no such run directory" in caplog.text
