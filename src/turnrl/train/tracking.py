"""Where metrics go: ``metrics.jsonl``, TensorBoard, and optionally W&B or MLflow."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

from turnrl.io import atomic_write_text, run_write


class MetricsLogger:
    """Writes one JSON line per ``log`` call and mirrors scalars to the enabled trackers."""

    def __init__(self, run_dir: Path, *, tensorboard: bool = True, wandb: bool = False,
                 mlflow: bool = False, run_name: str = "turnrl",
                 config: dict[str, Any] | None = None,
                 resume_at: tuple[int, int] | None = None) -> None:
        """``resume_at=(lines, step)``: a resumed run keeps the first ``lines`` records of
        ``metrics.jsonl`` (what its checkpoint had seen), so the steps it replays are recorded
        there once. (TensorBoard events are appended: a purge from ``step + 1`` would also
        erase the SFT curve, whose steps are counted separately.) Its clock goes on from
        the last kept record's ``time``, which :attr:`resumed_s` holds (0.0 on a fresh run),
        so the ``time`` column counts the run's own seconds across its processes."""
        self.path = run_dir / "metrics.jsonl"
        self.resumed_s = 0.0
        if resume_at is not None and self.path.is_file():
            lines = self.path.read_text(encoding="utf-8").splitlines(keepends=True)
            kept = lines[:resume_at[0]]
            with run_write("metrics.jsonl", self.path, len("".join(kept).encode())):
                atomic_write_text(self.path, "".join(kept))
            if kept:
                self.resumed_s = float(json.loads(kept[-1]).get("time", 0.0))
        self.lines = (len(self.path.read_text(encoding="utf-8").splitlines())
                      if self.path.is_file() else 0)
        # unbuffered: a record is written whole or fails at once (a full disk), so nothing
        # is left in a buffer to fail again at exit
        self._file = self.path.open("ab", buffering=0)
        self._start = time.time() - self.resumed_s
        self._tb = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(log_dir=str(run_dir / "tensorboard"))
        self._wandb = _optional("wandb", "wandb") if wandb else None
        if self._wandb is not None:
            self._wandb.init(project="turnrl", name=run_name, config=config or {},
                             dir=str(run_dir))
        self._mlflow = _optional("mlflow", "mlflow") if mlflow else None
        if self._mlflow is not None:
            self._mlflow.start_run(run_name=run_name)
            self._mlflow.log_params({"config": json.dumps(config or {})[:500]})

    def log(self, step: int, metrics: dict[str, float], *, phase: str = "train") -> None:
        scalars = {k: float(v) for k, v in metrics.items() if _is_number(v)}
        record = {"step": step, "phase": phase, "time": round(time.time() - self._start, 3),
                  **scalars}
        line = (json.dumps(record) + "\n").encode()
        with run_write(f"the metrics of step {step}", self.path, len(line)):
            self._file.write(line)
        self.lines += 1
        if self._tb is not None:
            for key, value in scalars.items():
                if math.isfinite(value):
                    self._tb.add_scalar(key, value, step)
            self._tb.flush()
        if self._wandb is not None:
            self._wandb.log(scalars, step=step)
        if self._mlflow is not None:
            self._mlflow.log_metrics({k.replace("@", "_at_"): v for k, v in scalars.items()},
                                     step=step)

    def close(self) -> None:
        self._file.close()
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()
        if self._mlflow is not None:
            self._mlflow.end_run()


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _optional(module: str, extra: str) -> Any:
    try:
        return __import__(module)
    except ImportError:
        raise ImportError(f"log.{module}=true needs the {module} package: "
                          f"pip install 'turnrl[{extra}]'") from None
