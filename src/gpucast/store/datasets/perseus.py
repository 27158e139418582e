"""Parser of the PERSEUS load-test logs (``perseus/test_N/test_N_output.txt``).

Each pass of the PERSEUS client (constant-rate open-loop load on TensorRT Inference Server)
logs ten lines: ``Pass k: started``, ``total batches``, ``elapsed time``, ``desired
throughput``, ``actual throughput``, the 25th/50th/75th/95th-percentile latency in seconds,
``completed``. A pass missing any value, or with a value that is not a positive number, is
skipped and reported (``ImportResult.skipped``) rather than guessed.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd

from gpucast.domain.errors import DataFormatError
from gpucast.store.datasets._import import ImportResult

_LINE = re.compile(
    r"^Pass (?P<k>\d+): (?P<what>total batches|elapsed time|desired throughput|"
    r"actual throughput|25th-percentile|50th-percentile|75th-percentile|95th-percentile)"
    r" (?P<value>\S+)"
)
_COLUMNS = {
    "total batches": "requests",
    "elapsed time": "elapsed_s",
    "desired throughput": "desired_qps",
    "actual throughput": "actual_qps",
    "25th-percentile": "p25_s",
    "50th-percentile": "p50_s",
    "75th-percentile": "p75_s",
    "95th-percentile": "p95_s",
}


def read_perseus_output(path: Path) -> ImportResult:
    """One row per complete pass: ``pass``, ``requests``, ``elapsed_s``, ``desired_qps``,
    ``actual_qps``, ``p25_s``, ``p50_s``, ``p75_s``, ``p95_s``."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise DataFormatError(str(path), f"cannot read ({exc.strerror})") from exc
    passes: dict[int, dict[str, float]] = {}
    problems: dict[int, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        match = _LINE.match(line.strip())
        if match is None:
            continue
        k = int(match["k"])
        try:
            value = float(match["value"])
        except ValueError:
            problems.setdefault(
                k, f"{path.name}, line {number}: {match['what']} {match['value']!r} is not a number"
            )
            continue
        if not math.isfinite(value) or value <= 0:
            problems.setdefault(k, f"{path.name}, line {number}: {match['what']} must be > 0")
            continue
        passes.setdefault(k, {})[_COLUMNS[match["what"]]] = value
    rows, skipped = [], []
    for k in sorted(set(passes) | set(problems)):
        values = passes.get(k, {})
        if k in problems:
            skipped.append(f"pass {k}: {problems[k]}")
            continue
        missing = [c for c in _COLUMNS.values() if c not in values]
        if missing:
            skipped.append(f"pass {k}: {path.name}: missing {', '.join(missing)}")
            continue
        rows.append({"pass": k, **values})
    if not rows:
        raise DataFormatError(
            str(path),
            "has no complete PERSEUS pass",
            fix="give a test_N_output.txt written by the PERSEUS client",
        )
    frame = pd.DataFrame(rows)
    frame["requests"] = frame["requests"].astype(int)
    return ImportResult(frame=frame, skipped=tuple(skipped))
