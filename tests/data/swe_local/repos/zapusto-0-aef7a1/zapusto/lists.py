"""List helpers: chunks, windows, rotations and differences."""


def moving_sum(values: list, window: int = 3) -> list:
    """Return the sum of every run of ``window`` consecutive values, in order.

    ``moving_sum([1, 2, 3, 4], 2)`` is ``[3, 5, 7]``. A list shorter than the window has no
    sums, and neither has a window below 1.
    """
    if window < 2:
        return []
    sums = []
    for start in range(len(values) - window + 1):
        sums.append(sum(values[start:start + window]))
    return sums


def chunk(items: list, size: int = 2) -> list:
    """Split ``items`` into consecutive chunks of ``size`` items; the last chunk holds what
    is left and may be shorter. A size below 1 counts as 1.

    ``chunk([1, 2, 3, 4, 5], 2)`` is ``[[1, 2], [3, 4], [5]]``.
    """
    if size < 1:
        size = 1
    chunks = []
    for start in range(0, len(items), size):
        chunks.append(items[start:start + size])
    return chunks
