"""Unit conversions and parsing of human quantities ("24h", "90m")."""

from __future__ import annotations

import math
import re
from decimal import Decimal

from gpucast.domain.errors import InvalidSpecError

GIB = 1024**3
MIB = 1024**2
TERA = 1e12

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|hr|d)?\s*$", re.IGNORECASE)
_SECONDS_PER = {
    "s": 1.0,
    "sec": 1.0,
    "m": 60.0,
    "min": 60.0,
    "h": 3600.0,
    "hr": 3600.0,
    "d": 86400.0,
}


def percent_text(share: float, decimals: int = 1) -> str:
    """``share`` (0.02) as a percentage with ``decimals`` decimals (``2.0%``), or two
    significant digits where those decimals round a nonzero share to nothing (0.0001 is
    ``0.01%``, not ``0.0%``: QA 38 M F8, a ``--target-ci 0.0001`` printed ``target ±0.0%``),
    in fixed point however small (``0.000002%``, not ``2e-06%``: QA 41 QF F9)."""
    text = f"{share:.{decimals}%}"
    if share and float(text[:-1]) == 0:
        # fixed point below 1e-4 %, where ``g`` turns scientific (2 in 101 M: ``2e-06%``)
        text = f"{format(Decimal(f'{share * 100:.2g}'), 'f')}%"
    return text


def usd_per_million(usd_per_hour: float, served_per_s: float) -> float:
    """US$ per million units (requests, tokens, samples) of what costs ``usd_per_hour`` and
    serves ``served_per_s`` of them a second: the rate actually served, not the offered one,
    so it is what one served unit costs (infinite when nothing is served)."""
    return usd_per_hour / (served_per_s * 3600.0) * 1e6 if served_per_s > 0 else math.inf


#: The fix of a duration out of range, typed or given as seconds
DURATION_FIX = "give a duration like 90s, 15m, 24h or 2d"


def parse_duration_s(text: str, *, field: str = "duration", allow_zero: bool = False) -> float:
    """Parse ``"90"``, ``"90s"``, ``"15m"``, ``"24h"`` or ``"2d"`` into seconds (> 0, or >= 0
    with ``allow_zero``: ``"0"``, ``"0h"``)."""
    match = _DURATION.match(text)
    if match is None:
        kind = "a duration" if allow_zero else "a positive duration"
        raise InvalidSpecError(field, f"must be {kind} like 90s, 15m, 24h or 2d", got=text)
    value = float(match.group(1)) * _SECONDS_PER[(match.group(2) or "s").lower()]
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise InvalidSpecError(
            field,
            "must be >= 0" if allow_zero else "must be > 0",
            got=text,
            fix=DURATION_FIX,
        )
    return value


def require_positive(field: str, value: float, *, allow_zero: bool = False) -> float:
    """Return ``value`` if it is finite and > 0 (or >= 0), else raise naming ``field``."""
    ok = math.isfinite(value) and (value >= 0 if allow_zero else value > 0)
    if not ok:  # QA 40 P #4, #6: "must be > 0 (got inf)" -- inf is > 0 -- and no fix
        finite = "" if math.isfinite(value) else "a finite number "
        bound = f"must be {finite}{'>=' if allow_zero else '>'} 0"
        raise InvalidSpecError(field, bound, got=value, fix=DURATION_FIX)
    return value


def duration_s(value: object, *, field: str = "duration", allow_zero: bool = False) -> float:
    """Seconds from a number (seconds) or text like ``"90m"`` / ``"24h"`` (> 0, or >= 0 with
    ``allow_zero``)."""
    if isinstance(value, bool):
        raise InvalidSpecError(field, "must be a duration like 90s, 15m, 24h or 2d", got=value)
    if isinstance(value, int | float):
        return require_positive(field, float(value), allow_zero=allow_zero)
    return parse_duration_s(str(value), field=field, allow_zero=allow_zero)


def duration_flag(seconds: float) -> str:
    """``seconds`` as a DURATION option is typed (what :func:`parse_duration_s` reads back):
    whole hours as ``24h``, whole minutes as ``15m``, else ``90s``; ``0`` as ``0``."""
    if seconds == 0:
        return "0"
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds >= size and float(seconds) % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def format_duration(seconds: float) -> str:
    """``seconds`` as a person reads it: ``45 s``, ``12 min``, ``3.5 h``, ``9.2 days``,
    ``31.7 years``."""
    if not math.isfinite(seconds):
        return "forever"
    for unit, size in (("years", 365.25 * 86400), ("days", 86400.0), ("h", 3600.0),
                       ("min", 60.0)):  # fmt: skip
        if seconds >= size:
            value = f"{seconds / size:,.3g}"
            return f"{value} {unit.removesuffix('s') if value == '1' else unit}"
    return f"{seconds:.3g} s"


def format_ratio(ratio: float) -> str:
    """A ratio as a person reads it: ``14,838x``, ``2.5x``, ``0.202x``, ``<0.01x`` (never a
    ``0x`` for a small but non-zero ratio)."""
    if math.isnan(ratio):
        return "n/a"
    if ratio >= 100:
        return f"{ratio:,.0f}x"
    if ratio >= 0.01 or ratio <= 0:
        return f"{ratio:.3g}x"
    return "<0.01x"


def format_amount(value: float) -> str:
    """An amount (GPU-hours, kWh, kg CO2e) to three significant figures, trailing zeros kept
    (``27.0``, ``7.10``, ``4.00``: not ``27``, ``7.1``, ``4`` beside ``8.84``), whole and
    thousands separated from 100 on: a one-GPU plan's 0.00412 GPU-hours is not ``0`` or
    ``0.0``; ``<0.0001`` below that (never a zero for a small amount that is not one), ``0``
    for none, ``n/a`` when not finite."""
    if not math.isfinite(value):
        return "n/a"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if 0 < abs(value) < 1e-4:
        return "<0.0001"
    rounded = float(f"{value:.3g}")  # 99.96 is 100, not 100.0; 9.996 is 10.0
    return f"{rounded:,.0f}" if abs(rounded) >= 100 else format_sig(rounded, 3)


def count_of(n: float, noun: str) -> str:
    """``n`` of ``noun``, singular for one: ``1 GPU``, ``8 GPUs``, ``1,024 GPUs``."""
    return f"{n:,.0f} {noun}" + ("" if n == 1 else "s")


def format_share(share: float) -> str:
    """A share as a whole percentage, ``<1%`` for a small but non-zero one (never ``0%`` for
    a link that carries traffic)."""
    if 0 < share < 0.005:
        return "<1%"
    return f"{share:.0%}"


def format_pct_against(share: float, limit: float, *, decimals: int = 1) -> str:
    """``share`` (a fraction) as a percentage (no ``%`` sign) with ``decimals`` decimals, more
    where fewer would hide which side of ``limit`` it is on (at least ``limit`` or below):
    0.94996 against 0.95 is ``94.996``, not ``95.0`` (which reads as reached); at most 6."""
    pct, limit_pct = share * 100.0, limit * 100.0
    if not (math.isfinite(pct) and math.isfinite(limit_pct)):
        return f"{pct:.{decimals}f}"
    reached = pct >= limit_pct
    while decimals < 6 and (round(pct, decimals) >= limit_pct) != reached:
        decimals += 1
    return f"{pct:.{decimals}f}"


def format_ms_against(value_s: float, limit_s: float, *, decimals: int = 1) -> str:
    """``value_s`` in milliseconds (no unit) with ``decimals`` decimals, more where fewer would
    hide which side of ``limit_s`` it is on: 1.0097 ms against a 1 ms limit is ``1.01``, not
    ``1.0`` (which reads as within it), or that it is not zero (two significant digits: 20 us
    is ``0.020``); at most 6 decimals."""
    value_ms, limit_ms = value_s * 1e3, limit_s * 1e3
    if not (math.isfinite(value_ms) and math.isfinite(limit_ms)):
        return f"{value_ms:,.{decimals}f}"
    decimals = min(_small_decimals(value_ms, decimals), 6)  # 20 us: 0.020, not 0.0
    above = value_ms > limit_ms
    while decimals < 6 and (round(value_ms, decimals) > limit_ms) != above:
        decimals += 1
    return f"{value_ms:,.{decimals}f}"


def format_ms_sig(seconds: float) -> str:
    """Seconds as milliseconds (no unit), three significant digits, never in scientific
    notation: ``17,700``, ``534``, ``4.43``, ``0.420``."""
    return format_sig(seconds * 1e3, max_decimals=3)


def format_ms(seconds: float, *, decimals: int = 1) -> str:
    """A latency in milliseconds (no unit) with ``decimals`` decimals, more for one below the
    last decimal's unit so that it keeps two significant digits (at most 6 decimals): 20 us
    is ``0.020``, never ``0.0`` (which reads as no time at all); 0 is ``0``; thousands
    separated (``7,766.3``). NaN: ``-``."""
    if math.isnan(seconds):
        return "-"
    ms = seconds * 1e3
    if ms == 0 or not math.isfinite(ms):
        return f"{ms:.0f}"
    return f"{ms:,.{min(_small_decimals(ms, decimals), 6)}f}"


def _small_decimals(value: float, decimals: int) -> int:
    """``decimals``, or for a non-zero ``value`` below one unit of its last decimal (which
    would read as 0 or one digit) the decimals that show two significant digits."""
    if not value or abs(value) >= 10.0**-decimals:
        return decimals
    return 1 - math.floor(math.log10(abs(value)))


def format_usd(value: float) -> str:
    """A plan's cost: whole dollars from $1 (``$1,234``), cents below (``$0.38``: a run of
    seconds was ``$0``, QA 39 L #11), two significant digits under a cent (``$0.0041``),
    ``$0`` for nothing (no price), ``n/a`` when not finite."""
    if not math.isfinite(value):
        return "n/a"
    if value == 0 or abs(value) >= 0.995:  # $0.996 rounds to $1.00: say $1
        return f"${value:,.0f}"
    if abs(value) < 0.005:
        return f"${value:.2g}"
    return f"${value:.2f}"


def format_seconds(value: float | None) -> str:
    """A duration with a readable unit, three significant figures with their trailing zeros:
    ``812 µs``, ``12.0 ms`` (not ``12 ms`` beside ``11.8 ms``), ``1.53 s``; ``-`` for none.
    ``runs list`` and the runs report (``report --runs``) write a step time so."""
    if value is None:
        return "-"
    if value < 1e-3:
        return f"{format_sig(value * 1e6)} µs"
    if value < 1.0:
        return f"{format_sig(value * 1e3)} ms"
    return f"{format_sig(value)} s"


def format_cents(value: float) -> str:
    """A cost to the cent (``$9.75``, ``$1,036.43``), two significant digits under a cent
    (``$0.0025``: never a priced ``$0.00``), ``n/a`` when not finite; the HTML reports' and
    the plan table's money (QA 35 R #22 in the table, QA 41 R1 in the report)."""
    if not math.isfinite(value):
        return "n/a"
    if 0 < abs(value) < 0.005:
        return f"${value:.2g}"
    return f"${value:,.2f}"


def format_sig(value: float, digits: int = 3, *, max_decimals: int = 6) -> str:
    """``value`` with ``digits`` significant digits in fixed point, thousands separated, never
    in scientific notation: ``24.3``, ``3.36``, ``0.00853``, ``110,836``; at most
    ``max_decimals`` decimals (``0.0503`` reads ``0.050`` with ``max_decimals=3``), and a
    non-zero value below the last of them reads ``<0.001``."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    if abs(value) < 10.0**-max_decimals:
        return f"<{10.0**-max_decimals:.{max_decimals}f}"
    decimals = min(max_decimals, max(0, digits - 1 - math.floor(math.log10(abs(value)))))
    return f"{value:,.{decimals}f}"


def format_span(low: float, high: float, unit: str) -> str:
    """``low-high unit`` with two significant digits, more where fewer would print the ends
    alike (``0.28-0.32 s``, never ``0.3-0.3 s``); one value where they are equal (to 6 decimals)."""
    decimals = 1 if low <= 0 or not math.isfinite(low) else max(0, 1 - math.floor(math.log10(low)))
    while low != high and decimals < 6 and f"{low:.{decimals}f}" == f"{high:.{decimals}f}":
        decimals += 1
    a, b = f"{low:,.{decimals}f}", f"{high:,.{decimals}f}"
    return f"{a} {unit}" if a == b else f"{a}-{b} {unit}"


def format_slo_latency(seconds: float) -> str:
    """An SLO's latency as a person writes it: ``50 ms`` below a second, ``3 s`` from one on
    (``p99<3s`` reads ``3 s`` everywhere, never ``3000 ms`` in one line and ``3 s`` in the next)."""
    return f"{seconds * 1e3:g} ms" if seconds < 1.0 else f"{seconds:g} s"


def format_latency(seconds: float, *, digits: int = 0, unit: bool = True) -> str:
    """A latency in milliseconds (``digits`` decimals, `` ms``) under 10 s, beyond it as
    :func:`format_duration` gives it: ``34.4 min``, not ``2061395 ms``. A table cell under a
    heading in ms takes ``unit=False``: milliseconds always, whole and thousands separated from
    10 s on (``2,061,395``; never ``34.4 min`` under an ms heading). NaN: ``-``."""
    if math.isnan(seconds):
        return "-"
    if not unit:
        return f"{seconds * 1e3:,.{digits if seconds < 10.0 else 0}f}"
    if seconds < 10.0:
        return f"{seconds * 1e3:.{digits}f} ms"
    return format_duration(seconds)
