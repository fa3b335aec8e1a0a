"""The text of a generated repository: modules, pytest files, README, and git-style diffs.

Everything here is a pure function of its arguments, so the same instance renders to the
same bytes.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from turnrl.envs.swe import library
from turnrl.envs.swe.entry import Args


@dataclass(frozen=True)
class CallCheck:
    """One test: ``name`` asserts that ``function(*args)`` equals ``expected``."""

    name: str
    function: str
    args: Args
    expected: Any

    def call_text(self) -> str:
        """The call as source text, ``f(1, [2])``."""
        return f"{self.function}({', '.join(repr(arg) for arg in self.args)})"


def module_text(package: str, theme: str, functions: Sequence[str],
                module_names: Mapping[str, str]) -> str:
    """Return the source of the module of ``theme`` holding ``functions`` (in that order):
    the theme's summary as docstring, one ``from <package>.<module> import ...`` line per
    other module it calls into (``module_names`` maps a theme to its module name), then the
    functions' sources."""
    imports: dict[str, set[str]] = {}
    for name in functions:
        for callee in library.CALLS[name]:
            other = library.FUNCTIONS[callee].theme
            if other != theme:
                imports.setdefault(module_names[other], set()).add(callee)
    lines = [f'"""{library.THEMES[theme].summary}"""', ""]
    for module in sorted(imports):
        lines.append(f"from {package}.{module} import {', '.join(sorted(imports[module]))}")
    head = "\n".join(lines).rstrip("\n") + "\n"
    return head + "".join(f"\n\n{library.FUNCTIONS[name].source}" for name in functions)


def render_test_file(package: str, module: str, tests: Sequence[CallCheck]) -> str:
    """Return a pytest file for ``tests``, all of functions of ``package.module``."""
    names = sorted({test.function for test in tests})
    text = f'"""Tests of {package}.{module}."""\n\nfrom {package}.{module} import ' \
           f'{", ".join(names)}\n'
    for test in tests:
        text += f"\n\ndef {test.name}():\n    assert {test.call_text()} == {test.expected!r}\n"
    return text


def init_text(package: str, modules: Mapping[str, Sequence[str]]) -> str:
    """Return the package's ``__init__.py``: a docstring listing its modules."""
    return f'"""{package}: small helpers in {len(modules)} module' \
           f'{"s" if len(modules) > 1 else ""} ({", ".join(sorted(modules))})."""\n'


def readme_text(package: str, modules: Mapping[str, Sequence[str]],
                themes: Mapping[str, str]) -> str:
    """Return the README: what each module holds (``modules`` maps a module name to its
    functions, ``themes`` a module name to its theme) and how to run the tests."""
    lines = [f"# {package}", "", "A small pure-Python package of helper functions.", "",
             "## Modules", ""]
    for module in sorted(modules):
        lines.append(f"- `{package}/{module}.py`: {library.THEMES[themes[module]].summary}")
        lines.append(f"  Functions: {', '.join(f'`{name}`' for name in modules[module])}.")
    lines += ["", "## Tests", "", "The tests live in `tests/` and use pytest:", "",
              "```", "python -m pytest tests", "```", ""]
    return "\n".join(lines)


def pyproject_text(package: str) -> str:
    """Return a ``pyproject.toml`` that lets ``pytest`` import the package from the root."""
    return (f'[project]\nname = "{package}"\nversion = "0.1.0"\n'
            f'description = "Small helper functions."\nrequires-python = ">=3.9"\n\n'
            '[tool.pytest.ini_options]\npythonpath = ["."]\ntestpaths = ["tests"]\n')


def git_diff(old: Mapping[str, str], new: Mapping[str, str]) -> str:
    """Return a git-style unified diff (``diff --git a/... b/...``, ``---``/``+++``
    headers, three lines of context) that turns the files ``old`` into ``new`` (relative
    path → text, each text ending with a newline); files in sorted path order, added files
    as ``new file mode 100644`` from ``/dev/null``, deleted ones to ``/dev/null``."""
    chunks: list[str] = []
    for path in sorted(set(old) | set(new)):
        before, after = old.get(path), new.get(path)
        if before == after:
            continue
        header = f"diff --git a/{path} b/{path}\n"
        if before is None:
            header += "new file mode 100644\n"
        elif after is None:
            header += "deleted file mode 100644\n"
        body = difflib.unified_diff(
            (before or "").splitlines(keepends=True), (after or "").splitlines(keepends=True),
            fromfile="/dev/null" if before is None else f"a/{path}",
            tofile="/dev/null" if after is None else f"b/{path}")
        chunks.append(header + "".join(body))
    return "".join(chunks)
