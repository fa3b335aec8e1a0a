"""What every benchmark script shares: where results go and how they are written."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


def write_results(results_dir: str | Path, stem: str, result: dict, table: str) -> None:
    """``<results_dir>/<stem>.json`` (the numbers) and ``<stem>.md`` (the table), atomically,
    and the table on stdout; both say how busy the machine was (:class:`MachineWatch`)."""
    from turnrl.io import atomic_write_text

    load = WATCH.report()
    result = {**result, "machine_load": load}
    if load["busy"]:
        message = (f"other processes used {load['other_processes_cpu_s']:.0f} CPU-seconds "
                   f"({100 * load['other_processes_fraction']:.0f}% of {load['cores']} cores) "
                   "during this benchmark: the machine was busy, its numbers are not reliable")
        warn(message)
        table = f"**Warning: {message}.**\n\n{table}"
    out = Path(results_dir)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / f"{stem}.json", json.dumps(result, indent=2) + "\n")
    atomic_write_text(out / f"{stem}.md", table)
    print(table)


# --------------------------------------------------------------------------------------
# Is the machine idle? Other processes' CPU time, from /proc, since this script started.
# --------------------------------------------------------------------------------------

BUSY_FRACTION = 0.05  # of the machine's cores: more than this used elsewhere is "busy"


def _cpu_times() -> dict[int, tuple[int, float]]:
    """Every process's parent pid and CPU seconds (user + system) so far, from /proc."""
    import os

    tick = os.sysconf("SC_CLK_TCK")
    times: dict[int, tuple[int, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        times[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)
    return times


def _others_cpu_s(before: dict[int, tuple[int, float]]) -> float:
    """CPU seconds used since ``before`` by processes outside this one's tree."""
    import os

    now = _cpu_times()
    ours, changed = {os.getpid()}, True
    while changed:  # this process's descendants
        grown = ours | {pid for pid, (ppid, _) in now.items() if ppid in ours}
        changed, ours = grown != ours, grown
    return sum(cpu - (before[pid][1] if pid in before else 0.0)
               for pid, (_, cpu) in now.items() if pid not in ours)


class MachineWatch:
    """Started when a benchmark imports this module: measures the CPU time other processes
    take while it runs (a run beside another 2-thread job saw step times jump 20x), warns
    loudly at the start if the machine is busy already, and :func:`write_results` records
    the measurement in the JSON and the table."""

    def __init__(self) -> None:
        import os
        import time

        self.cores = os.cpu_count() or 1
        self.start, self.before = time.monotonic(), _cpu_times()
        if os.path.isdir("/proc"):
            time.sleep(1.0)
            used = _others_cpu_s(self.before) / (time.monotonic() - self.start)
            if used > BUSY_FRACTION * self.cores:
                warn(f"the machine is busy before the benchmark starts: other processes use "
                     f"{used:.2f} of {self.cores} cores; its numbers will not be reliable")

    def report(self) -> dict:
        import time

        wall = time.monotonic() - self.start
        other = _others_cpu_s(self.before)
        frac = other / max(wall * self.cores, 1e-9)
        return {"wall_s": wall, "other_processes_cpu_s": other, "cores": self.cores,
                "other_processes_fraction": frac, "busy": frac > BUSY_FRACTION}


def warn(message: str) -> None:
    import sys

    bar = "!" * 78
    print(f"\n{bar}\nWARNING: {message}\n{bar}\n", file=sys.stderr, flush=True)


WATCH = MachineWatch()
