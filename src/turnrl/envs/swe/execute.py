"""Runs the generator's own code in-process: a generated package's modules and its tests.

Only for code that the generator wrote itself (the library, its mutants, the tests it
renders), never for a model's code, which runs in a sandbox. Every call runs under a step
budget (``sys.settrace`` counts the Python lines and calls it runs), so a mutant that loops
forever stops with :class:`StepBudgetExceeded` instead of hanging; a mutant that recurses too
deep stops with ``RecursionError``. Both count as *hard* failures (:attr:`Outcome.hard`).
"""

from __future__ import annotations

import builtins
import copy
import sys
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from turnrl.envs.swe.entry import Args

STEP_BUDGET = 20_000
"""Trace events (calls and lines) one call may run; the library's calls need a few hundred."""

ORDINARY_ERRORS = ("IndexError", "KeyError", "ValueError", "ZeroDivisionError")
"""Exceptions a plausible bug raises; any other (a ``TypeError`` from adding a number to a
string, a blown budget) marks a mutant that no one would have written."""


class StepBudgetExceeded(BaseException):
    """A call ran more than its step budget (a ``BaseException``, so no ``except Exception``
    in the code under test can swallow it)."""


@dataclass(frozen=True)
class Outcome:
    """What one call did: returned ``value``, or raised ``error`` (``"IndexError: list index
    out of range"``) of type ``error_type``."""

    value: Any = None
    error: str | None = None
    error_type: str | None = None

    @property
    def raised(self) -> bool:
        """True when the call raised instead of returning."""
        return self.error_type is not None

    @property
    def hard(self) -> bool:
        """True when the call raised something other than :data:`ORDINARY_ERRORS` (and other
        than a failed assertion, the way a test reports a wrong value)."""
        return self.raised and self.error_type not in (*ORDINARY_ERRORS, "AssertionError")


def call_with_budget(function: Callable[..., Any], args: Args,
                     budget: int = STEP_BUDGET) -> Outcome:
    """Return the :class:`Outcome` of ``function(*deepcopy(args))`` run under ``budget``
    trace events; the arguments are copied so that a mutant cannot change the caller's."""
    steps = 0

    def tracer(frame: types.FrameType, event: str, arg: Any) -> Any:
        nonlocal steps
        steps += 1
        if steps > budget:
            raise StepBudgetExceeded(f"more than {budget} steps")
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        value = function(*copy.deepcopy(args))
    except (Exception, StepBudgetExceeded) as error:
        name = type(error).__name__
        return Outcome(error=f"{name}: {error}" if str(error) else name, error_type=name)
    finally:
        sys.settrace(previous)
    return Outcome(value=value)


@dataclass(frozen=True)
class LoadedPackage:
    """A generated package executed from source: ``modules`` by name (``"dates"``), and the
    ``builtins`` namespace whose ``__import__`` serves ``<package>.<module>`` from them (code
    run with it, such as a test file, imports the package the way pytest would)."""

    modules: dict[str, types.ModuleType]
    builtins: dict[str, Any]


def load_package(package: str, modules: Mapping[str, str]) -> LoadedPackage:
    """Execute a generated package from source, without touching ``sys.modules``.

    ``modules`` maps module names (``"dates"``) to their text; an ``import`` of
    ``<package>.<module>`` inside them is served from the same texts, loaded on first use.
    Returns the :class:`LoadedPackage`. Raises ``ImportError`` for any other import and
    ``SyntaxError`` for a text that does not parse.
    """
    loaded: dict[str, types.ModuleType] = {}
    root = types.ModuleType(package)
    namespace = dict(vars(builtins))

    def load(name: str) -> types.ModuleType:
        if name not in loaded:
            if name not in modules:
                raise ImportError(f"no module named {package}.{name}")
            module = types.ModuleType(f"{package}.{name}")
            module.__dict__["__builtins__"] = namespace
            loaded[name] = module
            exec(compile(modules[name], f"{package}/{name}.py", "exec"), module.__dict__)
            setattr(root, name, module)
        return loaded[name]

    def importer(name: str, globals_: Any = None, locals_: Any = None,
                 fromlist: Any = (), level: int = 0) -> types.ModuleType:
        if level == 0 and name == package:
            return root
        if level == 0 and name.startswith(package + "."):
            module = load(name[len(package) + 1:])
            return module if fromlist else root
        raise ImportError(f"{name!r} is not a module of the generated package {package!r}")

    namespace["__import__"] = importer
    for name in modules:
        load(name)
    return LoadedPackage(loaded, namespace)


def package_modules(package: str, files: Mapping[str, str]) -> dict[str, str]:
    """Return module name → text for the modules ``<package>/<module>.py`` among ``files``
    (relative path → text), the package's ``__init__.py`` left out."""
    prefix = f"{package}/"
    return {path[len(prefix):-3]: text for path, text in files.items()
            if path.startswith(prefix) and path.endswith(".py") and path.count("/") == 1
            and path != f"{prefix}__init__.py"}


def run_tests(package: str, files: Mapping[str, str]) -> dict[str, Outcome]:
    """Run the pytest-style tests of a generated repository in-process.

    ``files`` maps relative paths to text, like ``SweInstance.files``: the package's
    modules are loaded with :func:`load_package`, then every ``tests/test_*.py`` is executed
    and each of its ``test_*`` functions called with no arguments under the step budget.
    Returns test id (``"tests/test_x.py::test_y"``) → :class:`Outcome` (``raised`` when the
    test failed), in path and definition order.
    """
    loaded = load_package(package, package_modules(package, files))
    results: dict[str, Outcome] = {}
    for path in sorted(p for p in files if p.startswith("tests/test_") and p.endswith(".py")):
        namespace: dict[str, Any] = {"__builtins__": loaded.builtins,
                                     "__name__": path[:-3].replace("/", ".")}
        exec(compile(files[path], path, "exec"), namespace)
        for name, test in list(namespace.items()):
            if name.startswith("test_") and callable(test):
                results[f"{path}::{name}"] = call_with_budget(test, ())
    return results
