"""The issue text of a generated task, written the way users write bug reports.

It gives the observed and the expected behaviour, never the file or the line. How much it
says is the ``issue_detail`` option: ``full`` (the call, what it returned, what it should
have returned), ``example`` (the call and the wrong result only) or ``vague`` (the symptom
in words, naming no function).
"""

from __future__ import annotations

import random
from typing import Any

from turnrl.envs.swe.execute import Outcome
from turnrl.envs.swe.render import CallCheck

_OPENINGS = ("I ran into this while using {package}:", "Using {package}, I got this:",
             "Here is a small reproduction with {package}:")
_CLOSINGS = ("", "\nThanks for looking into it!\n", "\nCould you take a look?\n")


def problem_statement(detail: str, package: str, check: CallCheck, observed: Outcome,
                      task: str, rng: random.Random) -> str:
    """Return the issue text for the failing ``check`` (a call whose ``expected`` value is
    the correct one) whose buggy ``observed`` outcome differs, at ``detail`` (``"full"``,
    ``"example"`` or ``"vague"``; ``task`` says in words what the user was doing, for
    ``vague``). ``rng`` picks among equivalent phrasings."""
    if detail == "vague":
        return _vague(package, check, observed, task, rng)
    shown = f"    >>> {check.call_text()}\n"
    if observed.raised:
        shown += f"    Traceback (most recent call last):\n      ...\n    {observed.error}\n"
    else:
        shown += f"    {observed.value!r}\n"
    if detail == "full":
        title = rng.choice([f"`{check.function}` returns the wrong result",
                            f"Wrong result from `{check.function}`",
                            f"`{check.function}` gives an unexpected answer"])
        expectation = f"I expected it to return `{check.expected!r}`"
        expectation += ", not to raise an error.\n" if observed.raised else \
            f", but it returned `{observed.value!r}`.\n"
    else:
        title = rng.choice([f"Problem with `{check.function}`",
                            f"`{check.function}` looks broken", f"Bug in `{check.function}`?"])
        expectation = "That does not look right to me.\n" if not observed.raised else \
            "I don't think this call should fail.\n"
    opening = rng.choice(_OPENINGS).format(package=package)
    return f"{title}\n\n{opening}\n\n{shown}\n{expectation}{rng.choice(_CLOSINGS)}"


def _vague(package: str, check: CallCheck, observed: Outcome, task: str,
           rng: random.Random) -> str:
    title = rng.choice([f"Wrong results when {task}", f"Trouble {task}",
                        f"Something is off when {task}"])
    opening = rng.choice([f"I use {package} for {task}.",
                          f"We rely on {package} for {task}.",
                          f"I have been using {package} for {task}."])
    tail = rng.choice(["I haven't narrowed it down to a small example yet.",
                       "It only happens for some inputs, others look fine.",
                       "It used to work for the cases I tried, so it took me a while to notice."])
    return f"{title}\n\n{opening} {symptom(observed, check.expected)} {tail}\n"


def symptom(observed: Outcome, expected: Any) -> str:
    """Return, in words, how the ``observed`` outcome differs from the ``expected`` value,
    as one sentence that names no function."""
    value = observed.value
    if observed.raised:
        article = "an" if str(observed.error_type)[:1] in "AEIOU" else "a"
        return f"For some inputs it crashes with {article} {observed.error_type} instead of " \
               "giving an answer."
    if isinstance(value, bool) and isinstance(expected, bool):
        return "For some inputs it says yes where the answer should be no." if value else \
            "For some inputs it says no where the answer should be yes."
    if isinstance(value, int) and isinstance(expected, int):
        size = "one too high" if value == expected + 1 else "one too low" \
            if value == expected - 1 else "too high" if value > expected else "too low"
        return f"For some inputs the number I get back is {size}."
    if isinstance(value, (str, list, dict)) and type(value) is type(expected):
        noun = {str: "the text I get back", list: "the list I get back",
                dict: "the result I get back"}[type(value)]
        if len(value) != len(expected):
            what = "characters" if isinstance(value, str) else "items" if \
                isinstance(value, list) else "entries"
            more = "too many" if len(value) > len(expected) else "too few"
            return f"For some inputs {noun} has {more} {what}."
        return f"For some inputs {noun} has the right size but the wrong content."
    return "For some inputs I get back a result of the wrong kind."
