"""The power options shared by ``predict energy`` and ``plan train`` (one definition each)."""

from __future__ import annotations

import math
from typing import Any

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.options import option

#: Zeus's default trade-off knob (NSDI 2023: eta = 0.5 weighs energy and time equally).
DEFAULT_ETA = 0.5
JOULES_PER_KWH = 3.6e6


def parse_power_limit(value: Any) -> float | str | None:
    """``None`` (the GPU's default limit), ``"auto"``, or watts (``"200"``, ``"200W"``)."""
    if value is None:
        return None
    text = str(value).strip().lower()
    if text in ("", "default"):
        return None
    if text == "auto":
        return "auto"
    text = text.removesuffix("w").strip()
    try:
        watts = float(text)
    except ValueError:
        raise InvalidSpecError(
            "power-limit",
            "must be watts, 'auto' or 'default'",
            got=value,
            fix="e.g. --power-limit 200 or --power-limit auto",
        ) from None
    if not (math.isfinite(watts) and watts > 0):
        raise InvalidSpecError(
            "power-limit",
            "must be a finite number of watts > 0",
            got=value,
            fix="e.g. --power-limit 200",
        )
    return watts


def power_limit_option(what: str = "") -> Any:
    return option(
        None,
        help="Power limit in watts, 'auto' (per GPU type and batch, the limit minimising Zeus's "
        "energy-time cost with --eta) or 'default' [default: each GPU's default limit]." + what,
        example="auto",
        kind="text",
        parse=parse_power_limit,
    )


def eta_option(default: float | None = DEFAULT_ETA) -> Any:
    """``--eta``; ``default`` None (plan train): unset unless given, so that a value given
    without ``--power-limit auto`` -- 0.5 included -- can be refused rather than ignored."""
    return option(
        default,
        help="Zeus's knob for --power-limit auto: cost = eta x energy + (1 - eta) x max power "
        "x time (1: energy only, 0: time only)."
        + (f" [default: {DEFAULT_ETA:g}]" if default is None else ""),
        example="0.5",
    )


def check_eta(eta: float | None) -> None:
    if eta is None:
        return
    if isinstance(eta, bool) or not (math.isfinite(eta) and 0.0 <= eta <= 1.0):
        raise InvalidSpecError("eta", "must be in [0, 1]", got=eta, fix="e.g. --eta 0.5")
