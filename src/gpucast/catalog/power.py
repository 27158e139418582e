"""The power model gpucast ships: fitted on the Zeus power traces, stored as JSON.

``catalog/data/power.json`` is :class:`gpucast.predict.power.PowerModel` fitted by
``gpucast fit power --data-dir ../shared/data --out src/gpucast/catalog/data/power.json``
(its ``fitted_on`` says on what). It holds fitted constants and per-GPU factors, not the data.
Without the file the model falls back to its unfitted starting constants (and says so).
"""

from __future__ import annotations

import functools

from gpucast.catalog._shipped import shipped_json
from gpucast.predict.power import PowerModel

SHIPPED = "power.json"


@functools.lru_cache(maxsize=1)
def shipped_power_model() -> PowerModel | None:
    """The shipped fitted model (read once per process), or ``None`` when absent."""
    data = shipped_json(SHIPPED)
    return None if data is None else PowerModel.from_dict(data)
