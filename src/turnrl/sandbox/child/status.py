"""The JSON lines of the sandbox's two pipes: the supervisor's *status* pipe to the host and
the worker's pipe to the supervisor (:func:`_report` writes a line, the readers keep at most
``_STATUS_CAP`` bytes, :func:`_parse_status` merges untrusted lines). The host reads the
status pipe with the same parser.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any

_STATUS_CAP = 65_536  # bytes of status-pipe JSON the host keeps


def _report(fd: int, **fields: Any) -> None:
    with contextlib.suppress(OSError, TypeError, ValueError):
        os.write(fd, (json.dumps(fields) + "\n").encode())


def _read_first_line(fd: int) -> tuple[bytes, bytes]:
    """Block until the first line (or EOF); return it and whatever followed it."""
    data = b""
    while b"\n" not in data and len(data) < _STATUS_CAP:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    first, _, rest = data.partition(b"\n")
    return first, rest


def _parse_status(data: bytes) -> dict:
    """Merge the JSON lines of the status pipe; later lines win. Untrusted: junk is skipped."""
    info: dict = {}
    for line in data.decode("utf-8", errors="replace").splitlines():
        try:
            fields = json.loads(line)
        except (ValueError, RecursionError):  # e.g. the code wrote "[" * 5000 to its pipe
            continue
        if isinstance(fields, dict):
            info.update(fields)
    return info
