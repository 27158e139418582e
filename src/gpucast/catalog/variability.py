"""GPU-to-GPU speed variability profiles as data (``data/gpu_variability.csv``).

Each row is a :class:`~gpucast.predict.variability.SpeedVariability` derived from published
fleet measurements, with its source, date and how the parameters were read from them.
"""

from __future__ import annotations

import functools
from importlib import resources

from gpucast.catalog._csv import read_rows, require_float
from gpucast.domain.errors import DataFormatError
from gpucast.predict.variability import SpeedVariability

_COLUMNS = ("name", "sigma_log", "outlier_share", "outlier_max_factor", "source_url", "as_of")


@functools.cache
def variability_profiles() -> dict[str, SpeedVariability]:
    """Every published profile by name."""
    path = "gpucast/catalog/data/gpu_variability.csv"
    text = resources.files("gpucast.catalog").joinpath("data/gpu_variability.csv").read_text()
    out: dict[str, SpeedVariability] = {}
    for line, row in read_rows(text, path, _COLUMNS):

        def number(column: str, *, line: int = line, row: dict[str, str] = row) -> float:
            return require_float(row[column], path=path, line=line, column=column, positive=False)

        try:
            out[row["name"]] = SpeedVariability(
                sigma_log=number("sigma_log"),
                outlier_share=number("outlier_share"),
                outlier_max_factor=number("outlier_max_factor"),
                source=f"{row['source_url']} ({row['as_of']}): {row['name']} profile",
            )
        except DataFormatError:
            raise
        except Exception as exc:  # a value out of the model's range
            raise DataFormatError(path, str(exc), line=line) from None
    return out
