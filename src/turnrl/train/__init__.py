"""Training: the loop (``loop.train``), the pieces it is built from (``setup``), the stages of
one RL step (``collect``, ``layout``, ``scoring``, ``stages``), the learner, SFT, hooks,
checkpoints and metrics (see docs/design.md)."""
