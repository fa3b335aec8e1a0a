"""``meta.json``: what produced a run: turnrl's version and commit, the libraries, the machine.

One entry per session of the run (the first, then one per ``--resume``), so a report can say
what code and hardware each part of the curves came from::

    {"sessions": [{"started": "2026-12-04T21:40:02+00:00", "turnrl": "0.1.0",
                   "commit": "8679b5d…", "dirty": false, "python": "3.11.2",
                   "torch": "2.13.0+cpu", "transformers": "5.25.0", "device": "cpu",
                   "accelerator": null, "threads": 2, "cpu": "Intel(R) Xeon(R) …",
                   "cpu_count": 2, "platform": "Linux-6.1…"}]}
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from turnrl.io import atomic_write_text, run_write

__all__ = ["code_commit", "machine", "record_session"]


def code_commit() -> tuple[str | None, bool | None]:
    """The git commit of the turnrl source in use and whether its tree has uncommitted
    changes; (None, None) when it is not a git checkout (an installed wheel)."""
    source = Path(__file__).resolve().parents[1]
    try:
        commit = subprocess.run(["git", "-C", str(source), "rev-parse", "HEAD"],
                                capture_output=True, text=True, timeout=5, check=True)
        status = subprocess.run(["git", "-C", str(source), "status", "--porcelain", "--",
                                 str(source)], capture_output=True, text=True, timeout=5,
                                check=True)
    except (OSError, subprocess.SubprocessError):
        return None, None
    return commit.stdout.strip() or None, bool(status.stdout.strip())


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def machine(device: torch.device) -> dict[str, Any]:
    """This process's code, libraries and hardware, as one ``meta.json`` session entry."""
    commit, dirty = code_commit()
    accelerator = (torch.cuda.get_device_name(device) if device.type == "cuda" else None)
    return {
        "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "turnrl": _version("turnrl"), "commit": commit, "dirty": dirty,
        "python": platform.python_version(), "torch": torch.__version__,
        "transformers": _version("transformers"), "device": device.type,
        "accelerator": accelerator, "threads": torch.get_num_threads(), "cpu": _cpu_name(),
        "cpu_count": os.cpu_count(), "platform": platform.platform(),
    }


def record_session(run_dir: Path, device: torch.device) -> None:
    """Append this session's :func:`machine` entry to ``run_dir/meta.json`` (atomically)."""
    path = run_dir / "meta.json"
    try:
        sessions = json.loads(path.read_text())["sessions"] if path.exists() else []
    except (ValueError, KeyError, TypeError):
        sessions = []  # an unreadable record is replaced, never a reason to stop a run
    sessions.append(machine(device))
    text = json.dumps({"sessions": sessions}, indent=2) + "\n"
    with run_write("meta.json", path, len(text.encode())):
        atomic_write_text(path, text)
