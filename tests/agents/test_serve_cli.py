"""``turnrl serve``: a model on an OpenAI-compatible endpoint until Ctrl-C, which stops it
cleanly and frees the port; a bad target is one error line."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time

import openai

from turnrl.cli import main

SERVE = [sys.executable, "-c", "import sys; from turnrl.cli import main; sys.exit(main())"]


def test_serve_answers_the_openai_sdk_and_stops_on_ctrl_c(tmp_path) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([*SERVE, "serve", "tiny", "--port", "0", "--max-tokens", "6",
                             "--model-name", "policy"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env, cwd=tmp_path)
    try:
        url = None
        deadline = time.monotonic() + 120
        assert proc.stdout is not None
        while url is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line, "turnrl serve exited before serving"
            match = re.search(r"at (http://\S+) \(Ctrl-C stops\)", line)
            url = match.group(1) if match else None
        assert url is not None
        client = openai.OpenAI(base_url=url, api_key="none", max_retries=0)
        assert [m.id for m in client.models.list().data] == ["policy"]
        reply = client.chat.completions.create(
            model="policy", messages=[{"role": "user", "content": "hi"}], max_tokens=50)
        assert reply.usage.completion_tokens <= 6  # clamped to --max-tokens
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and "stopped" in out and "Traceback" not in out
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    with socket.socket() as sock:  # the port is free again
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))


def test_serve_a_run_without_checkpoints_is_one_error_line(tmp_path, capsys) -> None:
    (tmp_path / "run" / "checkpoints").mkdir(parents=True)
    assert main(["serve", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: run ") and "no complete checkpoint" in err


def test_serve_a_checkpoint_with_separate_policies_serves_each_by_name(tmp_path) -> None:
    from turnrl.models.base import write_builtin

    checkpoint = tmp_path / "step_1"
    write_builtin("tiny", checkpoint)  # the run's model, and one separate policy beside it
    write_builtin("tiny", checkpoint / "policies" / "executor")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([*SERVE, "serve", str(checkpoint), "--port", "0", "--max-tokens",
                             "4", "--model-name", "policy"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env, cwd=tmp_path)
    try:
        url, deadline = None, time.monotonic() + 120
        assert proc.stdout is not None
        while url is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line, "turnrl serve exited before serving"
            match = re.search(r"as 'policy', 'executor' at (http://\S+)", line)
            url = match.group(1) if match else None
        assert url is not None
        client = openai.OpenAI(base_url=url, api_key="none", max_retries=0)
        assert [m.id for m in client.models.list().data] == ["policy", "executor"]
        reply = client.chat.completions.create(
            model="executor", messages=[{"role": "user", "content": "hi"}])
        assert reply.model == "executor"
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
