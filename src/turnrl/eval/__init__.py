"""Evaluation on held-out seeds (``evaluate``) and its summary metrics with intervals
(``metrics``)."""
