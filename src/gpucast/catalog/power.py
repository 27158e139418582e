"""The power model gpucast ships: fitted on the Zeus power traces, stored as JSON.

``catalog/data/power.json`` is :class:`gpucast.predict.power.PowerModel` fitted by
``gpucast fit power --data-dir ../shared/data --out src/gpucast/catalog/data/power.json``
(its ``fitted_on`` says on what). It holds fitted constants and per-GPU factors, not the data.
Without the file the model falls back to its unfitted starting constants (and says so).
"""

from __future__ import annotations

import functools
import json
from importlib import resources

from gpucast.domain.errors import DataFormatError
from gpucast.predict.power import PowerModel

SHIPPED = "power.json"


@functools.lru_cache(maxsize=1)
def shipped_power_model() -> PowerModel | None:
    """The shipped fitted model (read once per process), or ``None`` when absent."""
    path = resources.files("gpucast.catalog") / "data" / SHIPPED
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DataFormatError(f"gpucast/catalog/data/{SHIPPED}", f"unreadable ({exc})") from None
    return PowerModel.from_dict(data)
