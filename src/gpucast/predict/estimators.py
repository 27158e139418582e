"""Every registered estimator, imported, so a saved model loads by its ``kind`` alone.

:func:`gpucast.predict.base.estimator_from_dict` finds a class in the registry its module
fills when imported; :func:`load_estimator` imports them all first (the one list of model
modules: a new estimator module is added here).
"""

from __future__ import annotations

from typing import Any

from gpucast.predict import (  # noqa: F401 -- imported to register their estimators
    bursty,
    cluster,
    collective,
    llm_infer,
    overheads,
    power,
    revocation,
    serving,
    speed,
    steptime,
)
from gpucast.predict.base import Estimator, estimator_from_dict


def load_estimator(data: dict[str, Any]) -> Estimator:
    """Rebuild any saved estimator (``Estimator.to_dict()``) of any registered kind."""
    return estimator_from_dict(data)
