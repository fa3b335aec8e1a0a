"""New estimators and losses before they are promoted to ``turnrl.algos`` (with a reference
test, a docs entry and a benchmark run)."""
