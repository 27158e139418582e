"""Request streams, the same for every serving verb (:func:`arrivals`): Poisson, constant, the
bursty preset, or a trace file (Azure LLM, Azure Functions per-minute counts, ``arrival_s``
CSV, :func:`read_trace_arrivals`), time-scaled to a rate when one is given, a plan's busiest
window of it (:func:`busiest_part`), and the same process at any rate for a saturation search
(:func:`arrivals_at`).

Private part of :mod:`gpucast.inputs.serving`, which re-exports its public names.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.domain.units import count_of

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from gpucast.store.datasets.azure_functions import InvocationCounts

    FloatArray = npt.NDArray[np.float64]


#: The arrival kinds ``simulate serve --arrivals`` takes (besides ``trace:FILE``).
ARRIVAL_KINDS: tuple[str, ...] = ("poisson", "constant", "bursty")


TRACE_PREFIX = "trace:"


#: The bursty preset: calm at 0.5x and bursts at 3x the mean rate, mean sojourns 8 s / 2 s
#: (4:1 time share), rescaled so the long-run mean is the requested rate.
BURSTY_RATE_FACTORS = (0.5, 3.0)


BURSTY_SOJOURN_S = (8.0, 2.0)


#: The Azure Functions trace as the refusals of an unreadable trace name it
FUNCTIONS_TRACE_FORMAT = (
    "an Azure Functions per-minute count file (HashOwner,HashApp,HashFunction,Trigger,1,...,1440)"
)


#: What ``--arrivals trace:FILE`` reads, in the refusal of a file it cannot (QA 40 V #7)
SERVING_TRACE_FORMATS = (
    f"give a CSV with an arrival_s column, {FUNCTIONS_TRACE_FORMAT} or an Azure LLM trace "
    "(TIMESTAMP,ContextTokens,GeneratedTokens)"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Arrivals:
    """Arrival times (seconds from 0, sorted), the process they come from (``source``, as the
    output names it), the span they cover, and what was skipped."""

    times_s: FloatArray
    source: str
    duration_s: float
    warnings: tuple[str, ...] = ()
    #: a trace of which only part is replayed (its first ``duration_s`` or its busiest
    #: window): the rate that part offers is not the trace's mean
    cut: bool = False


def skipped_rows_warning(path: Path, skipped: Sequence[str]) -> str:
    """The one warning about a file's skipped malformed rows."""
    return f"skipped {len(skipped)} malformed row(s) of {Path(path).name}; first: {skipped[0]}"


def function_arrivals(
    counts: InvocationCounts,
    rng: np.random.Generator,
    *,
    rows: npt.ArrayLike | None = None,
    scale: float = 1.0,
) -> FloatArray:
    """Arrival times (s from the first minute) of the summed Azure Functions invocations of
    ``rows`` (default: every function), uniform inside each minute
    (:func:`gpucast.simulate.arrivals.from_counts`); ``scale`` multiplies the counts."""
    from gpucast.simulate.arrivals import from_counts
    from gpucast.store.datasets.azure_functions import MINUTE_S

    return from_counts(counts.total_per_minute(rows), MINUTE_S, rng, scale=scale)


#: Requests a trace needs before its rate means anything (two arrivals are one gap).
MIN_TRACE_REQUESTS = 3


def read_trace_arrivals(path: Path, seed: int, *, field: str = "trace") -> Arrivals:
    """Arrival times (s) of a trace file: an Azure Functions 2019 per-minute count file (all
    its functions summed, placed in each minute with ``seed``), an Azure LLM trace or an
    ``arrival_s`` CSV. Malformed rows are skipped and counted in ``warnings``."""
    import numpy as np

    from gpucast.simulate import arrivals as gen
    from gpucast.store.files import not_utf8, open_input_text

    path = Path(path)
    try:
        with open_input_text(path, field, fix="check the trace's path") as handle:
            head = handle.readline()
    except UnicodeDecodeError as exc:
        raise not_utf8(path, exc) from None
    if head.lstrip("\ufeff").startswith("HashOwner"):
        from gpucast.store.datasets.azure_functions import read_invocation_counts

        counts = read_invocation_counts(path)
        skipped = counts.skipped
        times = function_arrivals(counts, np.random.default_rng(seed))
        what = f"Azure Functions counts, {len(counts.functions)} functions"
    else:
        from gpucast.store.datasets.azure_traces import read_arrival_trace

        parsed = read_arrival_trace(path, formats=SERVING_TRACE_FORMATS)
        skipped = parsed.skipped
        times = gen.from_timestamps(parsed.frame["arrival_s"].to_numpy())
        what = count_of(len(parsed.frame), "request")
    if times.size < MIN_TRACE_REQUESTS or times[-1] <= 0:
        raise DataFormatError(
            str(path),
            f"has {times.size} requests over {float(times[-1]) if times.size else 0.0:g} s: "
            f"too few to have a rate (at least {MIN_TRACE_REQUESTS} spread over time)",
            fix="give a longer trace",
        )
    return Arrivals(
        times_s=times,
        source=f"trace {path.name} ({what}, {len(skipped)} malformed rows skipped)",
        duration_s=float(times[-1]),
        warnings=(skipped_rows_warning(path, skipped),) if skipped else (),
    )


def check_arrival_kind(kind: str, field: str = "arrivals") -> str:
    """``kind`` when it is poisson, constant, bursty or trace:FILE (one error otherwise)."""
    if kind in ARRIVAL_KINDS or (kind.startswith(TRACE_PREFIX) and len(kind) > len(TRACE_PREFIX)):
        return kind
    raise InvalidSpecError(
        field,
        "must be poisson, constant, bursty or trace:FILE",
        got=kind,
        fix=f"e.g. --{field} poisson",
    )


def trace_path(kind: str) -> Path | None:
    """The file of a ``trace:FILE`` arrival kind (None for the generated ones)."""
    return Path(kind[len(TRACE_PREFIX) :]) if kind.startswith(TRACE_PREFIX) else None


def arrival_rate_of(times_s: FloatArray) -> float:
    """Mean rate (requests/s) of sorted arrival times."""
    return (times_s.size - 1) / float(times_s[-1]) if times_s.size > 1 and times_s[-1] > 0 else 0.0


def busiest_part(times_s: FloatArray, window_s: float) -> tuple[slice, str]:
    """The requests a plan replays of a trace: those of its busiest ``window_s`` seconds
    (:func:`gpucast.simulate.arrivals.busiest_window`), and what the arrivals' source adds
    to say so (""  and every request when the trace is no longer than the window)."""
    from gpucast.domain.units import format_duration
    from gpucast.simulate import arrivals as gen

    n = times_s.size
    lo, hi = gen.busiest_window(times_s, window_s)
    if hi - lo == n:
        return slice(0, n), ""
    span = float(times_s[-1] - times_s[0])
    mean = (n - 1) / span if span > 0 else 0.0
    what = "hour" if window_s == 3600.0 else format_duration(window_s)
    text = (
        f", its busiest {what} ({format_duration(float(times_s[lo] - times_s[0]))} in: "
        f"{hi - lo:,} of {n:,} requests, {(hi - lo) / window_s:.3g} req/s offered, "
        f"{mean:.3g} over the whole trace), starting from idle servers: a plan sizes for the "
        "peak, where the SLO is hardest to meet (simulate serve replays the whole trace; "
        "--duration-s D replays the trace's first D s instead)"
    )
    return slice(lo, hi), text


def whole_trace_note(times_s: FloatArray) -> str:
    """What the arrivals' source adds where a simulation replays all of a trace longer than
    the window a plan replays: the plan's busiest hour, so the two verbs agree in words
    (QA 40 V #11; a language model's trace alike, :func:`gpucast.inputs.llm_serving.
    llm_traffic`); "" for a trace no longer than it."""
    from gpucast.domain.serving_plan import PLAN_TRACE_WINDOW_S
    from gpucast.domain.units import format_duration
    from gpucast.simulate import arrivals as gen

    lo, hi = gen.busiest_window(times_s, PLAN_TRACE_WINDOW_S)
    n = times_s.size
    if hi - lo == n:
        return ""
    span = float(times_s[-1] - times_s[0])
    return (
        f", replayed whole ({format_duration(span)}, {(n - 1) / span:.3g} req/s over it; "
        f"its busiest hour offers {(hi - lo) / PLAN_TRACE_WINDOW_S:.3g} req/s, what plan serve "
        "and plan llm-serve size for; --duration-s D replays the trace's first D s instead)"
    )


def _generated(kind: str, rate_rps: float, duration_s: float, seed: int) -> tuple[FloatArray, str]:
    import numpy as np

    from gpucast.simulate import arrivals as gen

    rng = np.random.default_rng(seed)
    if kind == "poisson":
        return gen.poisson(rate_rps, duration_s, rng), f"Poisson {rate_rps:g} req/s"
    if kind == "constant":
        return gen.constant(rate_rps, duration_s), f"constant {rate_rps:g} req/s"
    rates = tuple(rate_rps * f for f in BURSTY_RATE_FACTORS)
    scale = rate_rps / gen.bursty_mean_rate(rates, BURSTY_SOJOURN_S)
    rates = tuple(r * scale for r in rates)
    return (
        gen.bursty(rates, BURSTY_SOJOURN_S, duration_s, rng),
        f"bursty MMPP {rates[0]:.3g}/{rates[1]:.3g} req/s (mean {rate_rps:g}), sojourns 8 s/2 s",
    )


def arrivals(
    kind: str,
    rate_rps: float | None,
    duration_s: float | None,
    seed: int,
    *,
    field: str = "arrivals",
    window_s: float | None = None,
) -> Arrivals:
    """One model's request stream, the same for every serving verb.

    ``poisson`` / ``constant`` at ``rate_rps`` (required) over ``duration_s``; ``bursty``: the
    preset (:data:`BURSTY_RATE_FACTORS`, mean ``rate_rps``); ``trace:FILE``
    (:func:`read_trace_arrivals`): replayed, time-scaled to a mean of ``rate_rps`` when one
    is given, cut at ``duration_s`` when one is given, else its busiest ``window_s`` seconds
    when one is given (:func:`busiest_part`), else its whole span.
    """
    check_arrival_kind(kind, field)
    path = trace_path(kind)
    if path is None:
        if rate_rps is None:
            raise InvalidSpecError("rate", f"is needed for {kind} arrivals", fix="e.g. --rate 150")
        if duration_s is None:
            raise InvalidSpecError("duration-s", "is needed", fix="e.g. --duration-s 60")
        times, source = _generated(kind, rate_rps, duration_s, seed)
        return Arrivals(times_s=times, source=source, duration_s=duration_s)
    from gpucast.simulate import arrivals as gen

    trace = read_trace_arrivals(path, seed, field=field)
    times = trace.times_s
    source = trace.source
    if rate_rps is not None:
        times = gen.from_timestamps(times, target_rate_rps=rate_rps)
        source += f", time-scaled to {rate_rps:g} req/s (its mean over the whole trace)"
    # a trace shorter than the duration asked for ends where its requests end (its last
    # arrival plus one mean gap): the offered rate is the trace's, not diluted over seconds
    # nothing arrives in
    n = times.size
    own = float(times[-1]) * n / (n - 1) if n > 1 else float(times[-1])
    if duration_s is not None:
        times = gen.from_timestamps(times, duration_s=duration_s)
        if times.size == 0:
            raise InvalidSpecError(
                "duration-s", f"keeps no request of {path.name}", got=duration_s,
                fix="give a longer duration",
            )  # fmt: skip
    elif window_s is not None:
        part, note = busiest_part(times, window_s)
        if note:
            times = gen.from_timestamps(times[part])
            source += note
            return dataclasses.replace(
                trace, times_s=times, source=source, duration_s=window_s, cut=True
            )
    span = float(times[-1]) if duration_s is None else min(duration_s, own)
    if duration_s is None and window_s is None:
        source += whole_trace_note(times)
    if times.size < n:  # what is simulated: the requests kept and the rate they offer
        source += (
            f", first {duration_s:g} s ({times.size} of {n} requests, "
            f"{times.size / span:.3g} req/s offered)"
        )
    return dataclasses.replace(
        trace, times_s=times, source=source, duration_s=span, cut=times.size < n
    )


def arrivals_at(
    kind: str, seed: int, *, trace: Arrivals | None = None
) -> Callable[[float, float], FloatArray]:
    """``at(rate, duration)``: arrival times over ``duration`` seconds at any mean rate, of
    the same process as ``kind`` (a ``trace`` time-scaled, repeated to cover the run): what a
    saturation search offers."""
    from gpucast.simulate import arrivals as gen

    def at(rate_rps: float, duration_s: float) -> FloatArray:
        if trace is None:
            return _generated(kind, rate_rps, duration_s, seed)[0]
        return gen.rescaled(trace.times_s, rate_rps, duration_s)

    return at
