"""Token colours of the trajectory viewer: each token's value on a scale → one palette bin.

A scale maps a per-token value to one of a palette's bins, written as one character per
token (``"0"``–``"8"``; ``"-"``: not coloured), so an episode's colouring for a mode is one
short string and the page only looks the bin up in :data:`PALETTES`. Only tokens the policy
sampled (loss mask 1) are coloured, except in the ``mask`` mode, which shows the mask.

Bins: with ``n`` bins over the domain ``[lo, hi]``, ``bin(v) = clamp(⌊(v − lo) / (hi − lo)
· n⌋, 0, n − 1)``. The advantage scale is symmetric, ``[−a, a]`` with ``a`` the 99th
percentile of ``|advantage|`` over the run's shown tokens, so an advantage of 0 falls in the
middle (white) bin; the log-prob scale is ``[−L, 0]`` (dark: unlikely tokens), entropy and
the engine–learner difference ``[0, h]`` (dark: high).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["MODES", "PALETTES", "Scale", "codes", "fit_scale"]

# ColorBrewer palettes (RdBu, YlOrRd, Purples, Oranges), 9 classes each
PALETTES: dict[str, list[str]] = {
    "mask": ["#b8e0b0"],  # sampled by the policy: trained on
    "advantage": ["#b2182b", "#d6604d", "#f4a582", "#fddbc7", "#f7f7f7", "#d1e5f0", "#92c5de",
                  "#4393c3", "#2166ac"],
    "logprob": ["#ffffcc", "#ffeda0", "#fed976", "#feb24c", "#fd8d3c", "#fc4e2a", "#e31a1c",
                "#bd0026", "#800026"],
    "entropy": ["#fcfbfd", "#efedf5", "#dadaeb", "#bcbddc", "#9e9ac8", "#807dba", "#6a51a3",
                "#54278f", "#3f007d"],
    "logprob_diff": ["#fff5eb", "#fee6ce", "#fdd0a2", "#fdae6b", "#fd8d3c", "#f16913",
                     "#d94801", "#a63603", "#7f2704"],
}
# the modes a token can be coloured by: the samples' field each reads
MODES: dict[str, str] = {"mask": "loss_mask", "advantage": "advantages",
                         "logprob": "logprobs", "entropy": "entropies",
                         "logprob_diff": "logprob_diff"}


@dataclass(frozen=True)
class Scale:
    """A mode's domain ``[lo, hi]``; ``reverse``: the first bin is at ``hi`` (log-probs:
    pale at 0, dark when unlikely)."""

    mode: str
    lo: float
    hi: float
    reverse: bool = False

    def bin(self, value: float) -> int:
        n = len(PALETTES[self.mode])
        if n == 1:
            return 0
        fraction = (value - self.lo) / (self.hi - self.lo) if self.hi > self.lo else 0.5
        index = min(max(math.floor(fraction * n), 0), n - 1)
        return n - 1 - index if self.reverse else index


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def fit_scale(mode: str, values: Sequence[float]) -> Scale:
    """The scale of ``mode`` over ``values`` (the sampled tokens' values in a run)."""
    finite = [float(v) for v in values if math.isfinite(v)]
    if mode == "mask":
        return Scale(mode, 0.0, 1.0)
    if mode == "advantage":
        a = _percentile([abs(v) for v in finite], 0.99) if finite else 1.0
        return Scale(mode, -(a or 1.0), a or 1.0)
    if mode == "logprob":
        low = _percentile([-v for v in finite], 0.99) if finite else 1.0
        return Scale(mode, -max(low, 1.0), 0.0, reverse=True)
    high = _percentile(finite, 0.99) if finite else 1.0
    return Scale(mode, 0.0, high if high > 0 else 1.0)


def codes(scale: Scale, values: Sequence[float], loss_mask: Sequence[int]) -> str:
    """One palette bin per token (``"-"`` where the token is not coloured)."""
    if scale.mode == "mask":
        return "".join("0" if m else "-" for m in loss_mask)
    return "".join(str(scale.bin(v)) if m and math.isfinite(v) else "-"
                   for v, m in zip(values, loss_mask, strict=True))
