"""The CLI under an ASCII locale: text the terminal cannot encode is escaped, not a crash.

These run Python in a subprocess, since a stream's encoding is fixed when it starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from turnrl.console import can_encode_anything

# the two ways a terminal ends up ASCII-only (C locale coercion off in both)
ASCII_ENVS = {
    "PYTHONIOENCODING=ascii": {"LC_ALL": "C", "LANG": "C", "PYTHONIOENCODING": "ascii"},
    "PYTHONUTF8=0 LANG=C": {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0"},
}


def run_python(args: list[str], env_overrides: dict[str, str], stdin: str = ""
               ) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONIOENCODING", "PYTHONUTF8")}
    env.update(env_overrides)
    return subprocess.run([sys.executable, *args], input=stdin.encode(), capture_output=True,
                          env=env, timeout=300, check=False)


def test_can_encode_anything() -> None:
    assert can_encode_anything("utf-8") and can_encode_anything("UTF-16")
    assert not can_encode_anything("ascii") and not can_encode_anything("latin-1")
    assert not can_encode_anything(None) and not can_encode_anything("no-such-codec")


@pytest.mark.parametrize("name", list(ASCII_ENVS))
def test_ascii_streams_escape_what_they_cannot_encode(name: str) -> None:
    code = ("import sys; from turnrl.console import tolerate_any_encoding; "
            "tolerate_any_encoding(); print('2\\u00d73 \\u2192 6'); "
            "print('\\u2713', file=sys.stderr); print(repr(input()))")
    result = run_python(["-c", code], ASCII_ENVS[name], stdin="caf\u00e9\n")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode("ascii").splitlines()
    assert lines == ["2\\xd73 \\u2192 6", "'caf\\ufffd\\ufffd'"]
    assert result.stderr.decode("ascii").strip() == "\\u2713"


def test_utf8_streams_are_left_alone() -> None:
    code = ("import sys; from turnrl.console import tolerate_any_encoding; "
            "tolerate_any_encoding(); print(sys.stdout.errors)")
    result = run_python(["-c", code], {"PYTHONIOENCODING": "utf-8"})
    assert result.stdout.decode().strip() == "strict"


@pytest.mark.parametrize("name", list(ASCII_ENVS))
def test_play_works_under_an_ascii_locale(name: str, tmp_path: Path) -> None:
    # a user's dataset with a non-ASCII question, played by a person and by the oracle
    data = tmp_path / "questions.jsonl"
    data.write_text(json.dumps({"question": "What is 2\u00d73 \u2192 ?", "answer": "6"}) + "\n")
    for extra, stdin in (([], "6\n"), (["--oracle"], "")):
        result = run_python(["-m", "turnrl.cli", "play", "dataset-v0", "--kwarg",
                             f"path={data}", *extra], ASCII_ENVS[name], stdin=stdin)
        out, err = result.stdout.decode("ascii"), result.stderr.decode("ascii")
        assert result.returncode == 0, err
        assert "UnicodeEncodeError" not in err and "codec can't encode" not in err
        assert "What is 2\\xd73 \\u2192 ?" in out and "-- success after 1 turns" in out
