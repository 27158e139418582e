"""The published characteristics of a FaaS workload (``data/faas_workload.csv``): invocation
rate bands, trigger shares, inter-arrival regularity, execution times -- one row each with its
source and date (Shahrad et al., USENIX ATC'20, unless a row says otherwise).

Parsing is strict (a bad cell names its file, line and column) and cached per process.
"""

from __future__ import annotations

import functools
from importlib import resources

from gpucast.catalog._csv import parse_date, read_rows, require_float, require_text
from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.domain.serverless import TRIGGERS, FaasMix

FAAS_COLUMNS = ("name", "value", "source_url", "as_of")
_PATH = "faas_workload.csv"
#: row name -> FaasMix field (the trigger.* rows fill trigger_shares)
_FIELDS = {
    "share_at_most_hourly": "share_at_most_hourly",
    "share_at_most_per_minute": "share_at_most_per_minute",
    "max_per_day": "max_per_day",
    "timer_invocation_share": "timer_invocation_share",
    "timer_jitter_s": "timer_jitter_s",
    "periodic_share_nontimer": "periodic_share",
    "periodic_jitter_cv": "periodic_jitter_cv",
    "bursty_share_nontimer": "bursty_share",
    "bursty_cv_max": "bursty_cv_max",
    "duration_lognormal_mu": "duration_mu",
    "duration_lognormal_sigma": "duration_sigma",
}


def parse_faas_mix(text: str, path: str = _PATH) -> FaasMix:
    """A :class:`FaasMix` from CSV text in the format of ``data/faas_workload.csv``."""
    values: dict[str, float] = {}
    triggers: dict[str, float] = {}
    sources: dict[str, str] = {}
    for line, row in read_rows(text, path, FAAS_COLUMNS):
        name = require_text(row["name"], path=path, line=line, column="name").lower()
        value = require_float(
            row["value"], path=path, line=line, column="value", positive=False
        ) if name != "duration_lognormal_mu" else float(row["value"])  # fmt: skip
        url = require_text(row["source_url"], path=path, line=line, column="source_url")
        as_of = parse_date(row["as_of"], path=path, line=line, column="as_of")
        if name.startswith("trigger."):
            trigger = name.removeprefix("trigger.")
            if trigger not in TRIGGERS:
                raise DataFormatError(
                    path, f"unknown trigger {trigger!r} (one of {', '.join(TRIGGERS)})", line=line
                )
            triggers[trigger] = value
        elif name in _FIELDS:
            if name in values:
                raise DataFormatError(path, f"{name!r} appears twice", line=line)
            values[name] = value
        else:
            raise DataFormatError(path, f"unknown row {name!r}", line=line, column="name")
        sources[name] = f"catalog/data/{path} {name} ({url}, as of {as_of})"
    missing = sorted(set(_FIELDS) - set(values))
    if missing:
        raise DataFormatError(path, f"missing row(s) {', '.join(missing)}")
    try:
        return FaasMix(
            **{_FIELDS[k]: v for k, v in values.items()},
            trigger_shares=triggers,
            sources=sources,
        )
    except InvalidSpecError as exc:
        raise DataFormatError(path, exc.message) from exc


@functools.lru_cache(maxsize=1)
def load_faas_mix() -> FaasMix:
    """The built-in ``faas_workload.csv``."""
    text = resources.files("gpucast.catalog").joinpath("data", _PATH).read_text(encoding="utf-8")
    return parse_faas_mix(text, _PATH)
