"""Validation of workload options: each bad value names the option, the rule and a fix."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from gpucast.domain.errors import InvalidSpecError


def positive_int(field: str, value: Any) -> int:
    """``value`` as an int >= 1, or an InvalidSpecError naming ``field``. A whole number
    written as a float (``-o seq_len=1e3``) is that integer, as ``--batch-size 1e3`` is."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidSpecError(
            field, "must be an integer >= 1", got=value, fix=f"e.g. -o {field}=64 (any N >= 1)"
        )
    return value


def positive_ints(field: str, value: Any, *, min_len: int = 1) -> tuple[int, ...]:
    """A non-empty sequence of ints >= 1 (a comma-separated string is accepted too)."""
    if isinstance(value, str):
        try:
            value = [int(part) for part in value.split(",") if part.strip()]
        except ValueError:
            raise InvalidSpecError(
                field,
                "must be integers separated by commas",
                got=value,
                fix=f"e.g. -o {field}=512,256,64",
            ) from None
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = (value,)  # one layer; a whole float is that integer (positive_int)
    if not isinstance(value, Sequence) or len(value) < min_len:
        raise InvalidSpecError(field, f"must be a list of at least {min_len} integers", got=value)
    return tuple(positive_int(field, v) for v in value)


def probability(field: str, value: Any) -> float:
    """A float in [0, 1)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1:
        raise InvalidSpecError(field, "must be a number in [0, 1)", got=value)
    return float(value)


def reject_unknown(workload: str, options: Mapping[str, Any], known: Sequence[str]) -> None:
    """Raise for options a workload does not take, listing the ones it does."""
    unknown = sorted(set(options) - set(known))
    if unknown:
        takes = ", ".join(sorted(known)) if known else "no options"
        raise InvalidSpecError(
            f"{workload} option {unknown[0]!r}",
            "is not an option of this workload",
            fix=f"{workload} takes {takes}",
        )


_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})


def boolean(field: str, value: Any) -> bool:
    """A bool, or its spelling as text (``true``/``false``, ``yes``/``no``, ``1``/``0``)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    raise InvalidSpecError(field, "must be true or false", got=value, fix=f"e.g. -o {field}=false")
