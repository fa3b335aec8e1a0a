"""``turnrl sweep RECIPE``: a grid of config overrides × seeds, run as parallel processes up
to a ``--jobs`` cap, resumable, each run's record kept, one results table with the
statistics of ``turnrl compare`` (IQM, stratified-bootstrap intervals, probability of
improvement; rliable).

- :mod:`turnrl.sweep.recipe`: the recipe file and its expansion into runs;
- :mod:`turnrl.sweep.runner`: the processes (shared SFT starts, resume, stop);
- :mod:`turnrl.sweep.records`: one JSON record per finished run;
- :mod:`turnrl.sweep.results`: the table and the plot.
"""

from turnrl.sweep.recipe import Recipe, RecipeError, load_recipe, plan_runs
from turnrl.sweep.records import read_records
from turnrl.sweep.results import write_results
from turnrl.sweep.runner import SweepOutcome, run_sweep

__all__ = ["Recipe", "RecipeError", "SweepOutcome", "load_recipe", "plan_runs",
           "read_records", "run_sweep", "write_results"]
