"""Plain JSON values of results: what ``--json`` prints and what files hold.

JSON has no NaN or infinity: they become ``null`` (readers map them back where a field can be
infinite, e.g. :meth:`gpucast.domain.plan.PlanCandidate.from_dict`). Paths become text,
tuples lists, mapping keys text.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


def jsonable(value: Any) -> Any:
    """``value`` with non-finite floats as ``None``, paths as text, tuples as lists."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def json_text(value: Any) -> str:
    """Strict JSON text of ``value`` (via :func:`jsonable`), indented, ending in a newline."""
    return json.dumps(jsonable(value), indent=2, allow_nan=False, default=str) + "\n"
