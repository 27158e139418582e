"""The step-time model gpucast ships: fitted on the published data, stored as JSON.

``catalog/data/steptime.json`` is :class:`gpucast.predict.steptime.StepTimeModel` fitted by
``gpucast fit steptime --data-dir ../shared/data --out src/gpucast/catalog/data/steptime.json``
(its ``fitted_on`` says on what, its interval table what cross-validation earned). It is a
fitted model, not a copy of the data: efficiencies, per-GPU and per-workload factors and
residual quantiles. Without the file the roofline falls back to its documented priors.
"""

from __future__ import annotations

import functools

from gpucast.catalog._shipped import shipped_json
from gpucast.predict.steptime import StepTimeModel

SHIPPED = "steptime.json"


@functools.lru_cache(maxsize=1)
def shipped_step_time_model() -> StepTimeModel | None:
    """The shipped fitted model (read once per process), or ``None`` when absent."""
    data = shipped_json(SHIPPED)
    return None if data is None else StepTimeModel.from_dict(data)
