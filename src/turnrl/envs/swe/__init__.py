"""SWE-Gym-style envs that run on a CPU, and the procedural repository generator behind them.

The envs: ``swe-v0`` (:mod:`.generated_env`, generated repositories) and ``swe-local-v0``
(:mod:`.local_env`, SWE-bench style records with local checkouts, :mod:`.local`), sharing the
episode and tools of :mod:`.env` (the in-memory :mod:`.workspace`, the :mod:`.oracle`, the
:mod:`.grading` and the sandbox-side :mod:`.scripts`; :mod:`.patches` reads unified diffs).

``generate_instance(seed, options)`` writes a small Python package (a few modules of
documented functions and a pytest ``tests/`` folder) with one injected bug of a known kind,
an issue text that describes it the way users do, fail-to-pass and pass-to-pass tests, hidden
tests, and the gold patch. ``TIERS`` names the difficulty presets; ``options_for(tier,
**overrides)`` adjusts one.

>>> from turnrl.envs.swe import TIERS, generate_instance
>>> instance = generate_instance(0, TIERS["tiny"])
>>> instance.fail_to_pass != ()
True
"""

from turnrl.envs.swe.generate import generate_instance
from turnrl.envs.swe.instance import BugLocation, GradedCall, SweInstance, write_files
from turnrl.envs.swe.mutate import BUG_KINDS
from turnrl.envs.swe.options import ISSUE_DETAILS, TIERS, SweOptions, options_for

__all__ = [
    "BUG_KINDS",
    "ISSUE_DETAILS",
    "TIERS",
    "BugLocation",
    "GradedCall",
    "SweInstance",
    "SweOptions",
    "generate_instance",
    "options_for",
    "write_files",
]
