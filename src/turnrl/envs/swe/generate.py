"""``generate_instance(seed, options)``: a small Python repository with one injected bug.

The pipeline, all of it a pure function of ``(seed, options)``:

1. draw a package name and a call chain ``entry → ... → buggy`` of ``options.distance``
   calls from the library, then fill ``num_modules`` modules around it;
2. draw test inputs for every tested function and compute the expected values by running
   the correct functions (the functions nearer the bug than ``distance`` get no tests);
3. try mutations of the buggy function (:mod:`.mutate`) until one is a real bug: it raises
   nothing implausible and the tests of the entry function tell it from the original;
4. split each function's inputs into visible tests (in the repository) and hidden tests
   (graded later), label every test fail-to-pass or pass-to-pass from what the buggy code
   actually did, and write the issue text and the gold patch.
"""

from __future__ import annotations

import ast
import keyword
import random
import sys
from typing import Any

from turnrl.envs.swe import library
from turnrl.envs.swe.assemble import Draft, assemble, failing_indices
from turnrl.envs.swe.entry import Args
from turnrl.envs.swe.execute import LoadedPackage, Outcome, call_with_budget, load_package
from turnrl.envs.swe.instance import SweInstance
from turnrl.envs.swe.mutate import Mutation, find_mutations
from turnrl.envs.swe.options import SweOptions
from turnrl.envs.swe.render import module_text

INPUT_DRAWS = 30
"""Input draws per tested function; duplicates and inputs the correct code rejects drop out."""
MUTANTS_PER_KIND = 12
"""Mutations of one kind tried on one call chain before the next kind."""
CHAINS_TRIED = 40
"""Call chains tried before :func:`generate_instance` gives up."""

_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "st",
           "tr", "pl", "gr", "sh")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ou")


def generate_instance(seed: int, options: SweOptions) -> SweInstance:
    """Return the task generated from ``seed`` under ``options``: the same arguments give
    the same instance, byte for byte. Raises ``TypeError`` for a non-integer seed or options
    that are not :class:`SweOptions` (see ``TIERS`` and ``options_for``), and ``ValueError``
    when no bug of ``options.bug_kinds`` fits the options."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"generate_instance: seed={seed!r} must be an int")
    if not isinstance(options, SweOptions):
        raise TypeError(f"generate_instance: options={options!r} must be SweOptions; use "
                        "TIERS[name] or options_for(tier, **overrides)")
    rng = random.Random(seed)
    package = _package_name(rng)
    chains = [chain for chain in library.call_chains(options.distance)
              if library.fits(library.closure(chain[:1]), options.num_modules,
                              options.functions_per_module)]
    rng.shuffle(chains)
    for chain in chains[:CHAINS_TRIED]:
        instance = _Attempt(rng, seed, options, package, chain).run()
        if instance is not None:
            return instance
    raise ValueError(f"generate_instance(seed={seed}): no detectable bug of the kinds "
                     f"bug_kinds={list(options.bug_kinds)} fits {options}; add bug kinds or "
                     "raise functions_per_module")


def _package_name(rng: random.Random) -> str:
    """A pronounceable package name of two or three syllables: not a Python keyword, not a
    standard-library module, and holding no library function's name (an issue that must
    not name the function may name the package)."""
    while True:
        name = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS)
                       for _ in range(rng.randint(2, 3)))
        if not keyword.iskeyword(name) and name not in sys.stdlib_module_names and \
                not any(function in name for function in library.FUNCTIONS):
            return name


def _is_literal(value: Any) -> bool:
    """True when ``repr(value)`` reads back as an equal value (a test can spell it)."""
    try:
        return bool(ast.literal_eval(repr(value)) == value)
    except (ValueError, SyntaxError):
        return False


class _Attempt:
    """One try at an instance around one call chain (``entry, ..., buggy``)."""

    def __init__(self, rng: random.Random, seed: int, options: SweOptions, package: str,
                 chain: tuple[str, ...]) -> None:
        self.rng, self.seed, self.options, self.package = rng, seed, options, package
        self.entry, self.buggy = chain[0], chain[-1]
        self.layout = self._layout(chain)
        self.module_names = {theme: rng.choice(library.THEMES[theme].module_names)
                             for theme in self.layout}
        self.module_of = {name: self.module_names[theme]
                          for theme, names in self.layout.items() for name in names}
        self.tested = [name for names in self.layout.values() for name in names
                       if self._far_enough(name)]
        self.correct = {self.module_names[theme]: module_text(package, theme, names,
                                                              self.module_names)
                        for theme, names in self.layout.items()}

    def _far_enough(self, name: str) -> bool:
        """True when ``name`` may have tests: it never reaches the buggy function, or only
        in ``distance`` calls or more."""
        distance = library.call_distance(name, self.buggy)
        return distance is None or distance >= self.options.distance

    def _layout(self, chain: tuple[str, ...]) -> dict[str, list[str]]:
        """Theme → its functions in the package, in file order: what the chain needs, then
        fillers drawn from the chain's themes and from other themes up to ``num_modules``."""
        chosen = set(library.closure(chain[:1]))
        themes = sorted(library.themes_of(chosen), key=list(library.THEMES).index)
        others = [theme for theme in library.THEMES if theme not in themes]
        self.rng.shuffle(others)
        themes += others[:self.options.num_modules - len(themes)]
        for theme in themes:
            candidates = library.theme_functions(theme)
            self.rng.shuffle(candidates)
            for name in candidates:
                needed = library.closure([name]) | chosen
                if library.themes_of(needed) <= set(themes) and library.fits(
                        needed, self.options.num_modules, self.options.functions_per_module):
                    chosen = set(needed)
        layout = {theme: [n for n in library.theme_functions(theme) if n in chosen]
                  for theme in themes}
        for names in layout.values():
            self.rng.shuffle(names)
        return {theme: names for theme, names in layout.items() if names}

    def run(self) -> SweInstance | None:
        """Return the instance, or ``None`` when no mutation of the buggy function is a
        bug that the entry function's tests can show."""
        original = load_package(self.package, self.correct)
        pools = {name: self._pool(name, original) for name in self.tested}
        by_kind: dict[str, list[Mutation]] = {}
        for mutation in find_mutations(self.correct[self.module_of[self.buggy]], self.buggy,
                                       self.options.bug_kinds):
            by_kind.setdefault(mutation.kind, []).append(mutation)
        kinds = sorted(by_kind)
        self.rng.shuffle(kinds)
        for kind in kinds:
            candidates = by_kind[kind]
            self.rng.shuffle(candidates)
            for mutation in candidates[:MUTANTS_PER_KIND]:
                draft = self._judge(mutation, pools)
                if draft is not None:
                    return assemble(draft, self.rng)
        return None

    def _pool(self, name: str, original: LoadedPackage) -> list[tuple[Args, Any]]:
        """Distinct inputs of ``name`` with the correct results, in draw order."""
        function = getattr(original.modules[self.module_of[name]], name)
        pool: list[tuple[Args, Any]] = []
        seen: set[str] = set()
        for _ in range(INPUT_DRAWS):
            args = library.FUNCTIONS[name].inputs(self.rng)
            if repr(args) in seen:
                continue
            seen.add(repr(args))
            outcome = call_with_budget(function, args)
            if not outcome.raised and _is_literal(outcome.value):
                pool.append((args, outcome.value))
        return pool

    def _judge(self, mutation: Mutation, pools: dict[str, list[tuple[Args, Any]]]
               ) -> Draft | None:
        """The draft of the instance with this bug, or ``None`` when the mutant does not
        compile, raises an implausible error, or the entry function's tests cannot show it
        (two failing inputs when a visible test must fail too, else one failing and one
        passing)."""
        module = self.module_of[self.buggy]
        try:
            mutant = load_package(self.package, {
                **self.correct, module: mutation.apply(self.correct[module])})
        except SyntaxError:
            return None
        outcomes: dict[str, list[Outcome]] = {}
        for name in self.tested:
            if library.call_distance(name, self.buggy) is None:
                continue
            function = getattr(mutant.modules[self.module_of[name]], name)
            outcomes[name] = [call_with_budget(function, args) for args, _ in pools[name]]
            if any(outcome.hard for outcome in outcomes[name]):
                return None
        draft = Draft(self.seed, self.options, self.package, self.layout, self.module_names,
                      self.correct, self.entry, self.buggy, self.tested, mutation, pools,
                      outcomes)
        failing = len(failing_indices(draft, self.entry))
        if self.options.visible_failing:
            return draft if failing >= 2 else None
        return draft if 0 < failing < len(pools[self.entry]) else None
