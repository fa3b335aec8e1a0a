"""The CLI's terminal streams under any locale, and how much it prints (:func:`set_verbosity`).

Under an ASCII locale (``LC_ALL=C PYTHONIOENCODING=ascii``, or ``PYTHONUTF8=0 LANG=C``)
``sys.stdout`` cannot encode ``×`` or ``→`` and printing an observation that holds one
raises ``UnicodeEncodeError``. :func:`tolerate_any_encoding`, called once at CLI start,
makes such streams write ``\\xd7`` (stdout, stderr) and read undecodable bytes as ``�``
(stdin) instead; streams that can encode any text (UTF-8) are left as they are.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from typing import Any, Literal

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


# --------------------------------------------------------------------------------------
# How much the CLI prints: turnrl's own output by default; --quiet: no progress; --verbose:
# also what the libraries under it print (transformers' shard and weight bars, FutureWarnings,
# Ray's notices and its C++ log).
# --------------------------------------------------------------------------------------

Verbosity = Literal["quiet", "normal", "verbose"]
# says "Token authentication is enabled for this Ray cluster" at every local start
RAY_AUTH_LOGGER = "ray._private.authentication.authentication_token_setup"
_VERBOSITY: list[Verbosity] = ["normal"]


def verbosity() -> Verbosity:
    return _VERBOSITY[0]


def set_verbosity(level: Verbosity) -> None:
    """Set the CLI's verbosity and, unless ``verbose``, quiet the libraries (process-wide:
    call once, at start, before Ray starts)."""
    _VERBOSITY[0] = level
    if level == "verbose":
        return
    import logging
    import warnings

    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    for name in ("ray", RAY_AUTH_LOGGER):  # ray sets its own logger's level when imported
        logging.getLogger(name).setLevel(logging.ERROR)
    for category in (FutureWarning, DeprecationWarning):
        warnings.filterwarnings("ignore", category=category)
    from transformers.utils import logging as transformers_logging

    transformers_logging.set_verbosity_error()
    transformers_logging.disable_progress_bar()  # "Writing model shards", "Loading weights"


# Ray's driver warns, in C++ on the process's stderr, about the rollout workers it creates:
# their constructor arguments (the model) are in the object store and they restart. turnrl
# keeps that object referenced for the run, so a restart finds it: the notice is noise.
RAY_ACTOR_NOTICE = re.compile(r"core_worker\.cc:\d+: Actor with class name: .* has constructor "
                              r"arguments in the object store and max_restarts > 0")


@contextlib.contextmanager
def held_back_stderr(pattern: re.Pattern[str]) -> Iterator[None]:
    """Lines that C++ libraries write to the process's stderr (fd 2) while the block runs are
    held back and written out after it, except those matching ``pattern`` (unless
    ``--verbose``, when nothing is held back)."""
    if verbosity() == "verbose":
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            lines = held.read().decode(errors="replace").splitlines(keepends=True)
            sys.stderr.writelines(line for line in lines if not pattern.search(line))
            sys.stderr.flush()
