"""MLPerf evaluation schedules (``data/mlperf_eval.csv``): per benchmark, how often the rules
make a run evaluate and on how many samples, one row each with its source and date (see
:class:`gpucast.domain.evaluation.EvaluationSchedule`).

Parsing is strict (a bad cell names its file, line and column) and cached per process.
"""

from __future__ import annotations

import functools
from importlib import resources

from gpucast.catalog._csv import by_name, named_rows, parse_bool, provenance, require_float
from gpucast.domain.evaluation import EvaluationSchedule

EVAL_COLUMNS = (
    "name", "every_samples", "every_samples_per_batch", "every_round", "start_samples",
    "eval_samples", "skip_evaluations", "skip_evaluations_per_batch", "timed", "source_url",
    "as_of",
)  # fmt: skip
_PATH = "mlperf_eval.csv"
_POSITIVE = frozenset({"every_samples", "eval_samples"})


def parse_mlperf_eval(text: str, path: str = _PATH) -> dict[str, EvaluationSchedule]:
    """Schedules of ``mlperf_eval.csv`` by benchmark name."""
    out: dict[str, EvaluationSchedule] = {}
    for line, row, name in named_rows(text, path, EVAL_COLUMNS):
        where = provenance(row, path=path, line=line)
        value = {
            column: require_float(
                row[column], path=path, line=line, column=column, positive=column in _POSITIVE
            )
            for column in EVAL_COLUMNS[1:8]
        }
        out[name] = EvaluationSchedule(
            benchmark=name,
            **value,
            timed=parse_bool(row["timed"], path=path, line=line, column="timed"),
            source=f"catalog/data/mlperf_eval.csv {name} {where}",
        )
    return out


@functools.lru_cache(maxsize=1)
def load_mlperf_eval() -> dict[str, EvaluationSchedule]:
    """Every row of the built-in ``mlperf_eval.csv``."""
    text = resources.files("gpucast.catalog").joinpath("data", _PATH).read_text(encoding="utf-8")
    return parse_mlperf_eval(text, _PATH)


def mlperf_eval_schedule(benchmark: str) -> EvaluationSchedule:
    """One benchmark's schedule (an unknown name is one line naming the known ones)."""
    return by_name(load_mlperf_eval(), benchmark, field="benchmark", file=_PATH, kind="benchmark")
