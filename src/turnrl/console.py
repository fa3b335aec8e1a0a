"""The CLI's terminal streams under any locale.

Under an ASCII locale (``LC_ALL=C PYTHONIOENCODING=ascii``, or ``PYTHONUTF8=0 LANG=C``)
``sys.stdout`` cannot encode ``×`` or ``→`` and printing an observation that holds one
raises ``UnicodeEncodeError``. :func:`tolerate_any_encoding`, called once at CLI start,
makes such streams write ``\\xd7`` (stdout, stderr) and read undecodable bytes as ``�``
(stdin) instead; streams that can encode any text (UTF-8) are left as they are.
"""

from __future__ import annotations

import sys
from typing import Any

SAMPLE = "\u00d7\u2192\u2713"  # ×→✓: text an encoding that can encode anything encodes


def can_encode_anything(encoding: str | None) -> bool:
    """Whether ``encoding`` encodes text outside ASCII and Latin-1 (UTF-8, UTF-16, ...)."""
    try:
        SAMPLE.encode(encoding or "ascii")
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def tolerate_any_encoding() -> None:
    """Reconfigure stdout/stderr (``errors="backslashreplace"``) and stdin
    (``errors="replace"``) when their encoding cannot encode every character."""
    for stream, errors in ((sys.stdout, "backslashreplace"), (sys.stderr, "backslashreplace"),
                           (sys.stdin, "replace")):
        _reconfigure(stream, errors)


def _reconfigure(stream: Any, errors: str) -> None:
    reconfigure = getattr(stream, "reconfigure", None)  # io.TextIOWrapper; not a test's StringIO
    if reconfigure is not None and not can_encode_anything(getattr(stream, "encoding", None)):
        reconfigure(errors=errors)
