"""Rollout: the ``Engine`` protocol (``engine.py``), the transformers engine (``hf.py``) and
the multi-turn ``Runner`` that plays episodes and records their token ledgers (``runner.py``)."""
