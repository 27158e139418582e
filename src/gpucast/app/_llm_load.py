"""``simulate serve --model LLM --clients N`` and ``--find-saturation``: the load options of
:class:`gpucast.app.llm_serve.SimulateLlmServeRequest`, checked and run here.

* ``--clients N [--think-ms T]``: a closed loop of N users inside the token-level simulator
  (:mod:`gpucast.simulate.llm_closed_loop`); their token counts are drawn as a pool sized
  from the analytic capacity (the users cannot send more than the deployment serves, plus
  one each), within the work ceiling of ``--allow-large``.
* ``--find-saturation``: the highest request rate the deployment holds, by the CNN path's
  search (:func:`gpucast.simulate.llm_load.find_llm_saturation`) started at the analytic
  capacity (:func:`gpucast.simulate.llm_load.analytic_capacity_rps`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.units import count_of

if TYPE_CHECKING:
    from gpucast.domain.llm_serving import IterationCost, LlmRequests
    from gpucast.simulate.llm_serving import LlmServingResult
    from gpucast.simulate.serving import Saturation

#: Token counts drawn to size a closed loop's pool or start the saturation search
SAMPLE_REQUESTS = 1000
#: The longest think time, ms: a day (longer, a user sends once)
DAY_MS = 86_400_000.0
#: A closed loop's pool holds this many times the requests the analytic capacity serves in
#: ``--duration-s`` (plus one per user): the capacity is an upper bound, this a margin on it
POOL_MARGIN = 1.25


def check_think_needs_clients(think_ms: float, clients: int | None) -> None:
    """A think time belongs to a closed loop: given without ``--clients`` it would be
    ignored by open-loop traffic (a CNN's or a language model's), so it is refused."""
    if think_ms and clients is None:
        raise InvalidSpecError(
            "think-ms", "is the closed loop's think time", got=think_ms,
            fix="add --clients N, or drop --think-ms",
        )  # fmt: skip


def check_load_options(request: Any) -> None:
    """The rules of ``--clients``, ``--think-ms`` and ``--find-saturation`` for a language
    model: one clear error each."""
    clients, think_ms = request.clients, request.think_ms
    if clients is not None:
        if isinstance(clients, bool) or not isinstance(clients, int) or clients < 1:
            raise InvalidSpecError(
                "clients", "must be an integer >= 1 (users, each with one request out)",
                got=clients, fix="e.g. --clients 16",
            )  # fmt: skip
        clash = [
            flag
            for flag, given in (
                ("rate", request.rate is not None),
                ("arrivals", request.arrivals != "poisson"),
                ("time-scale", request.time_scale is not None),
                ("find-saturation", request.find_saturation),
                ("prefill-instances", request.prefill_instances > 0),
            )
            if given
        ]
        if clash:
            raise InvalidSpecError(
                "clients",
                "is a closed loop: its users set the rate (no --rate, --arrivals or "
                "--time-scale), the saturation search offers open-loop rates, and "
                "disaggregated pools are not looped",
                got=f"--clients with --{clash[0]}",
                fix=f"drop --{clash[0]}, or drop --clients for open-loop traffic",
            )
    if isinstance(think_ms, bool) or not (math.isfinite(think_ms) and 0 <= think_ms <= DAY_MS):
        raise InvalidSpecError(
            "think-ms", f"must be >= 0 and at most {DAY_MS:,.0f} ms (a day)", got=think_ms,
            fix="e.g. --think-ms 500",
        )  # fmt: skip
    check_think_needs_clients(think_ms, clients)
    if request.find_saturation and request.time_scale is not None:
        raise InvalidSpecError(
            "time-scale", "is set by the saturation search (it replays the trace at each rate "
            "it tries)", got=request.time_scale, fix="drop --time-scale",
        )  # fmt: skip


def pool_size(clients: int, duration_s: float, capacity_rps: float) -> int:
    """Requests a closed loop of ``clients`` users can send in ``duration_s`` at most: one
    each at the start, then one per completion, which the analytic capacity bounds."""
    return clients + math.ceil(POOL_MARGIN * capacity_rps * duration_s)


def search(
    run: Callable[[float, float], LlmServingResult],
    sample: LlmRequests,
    cost: IterationCost,
    max_num_seqs: int,
    *,
    replicas: int,
    prefill_instances: int,
    decode_instances: int,
    duration_s: float,
) -> Saturation:
    """The saturation of the deployment ``run`` simulates, started at the analytic capacity
    of ``sample``'s requests; its rates clipped to that capacity of the probes' requests."""
    from gpucast.simulate.llm_load import analytic_capacity_rps, find_llm_saturation

    def capacity_of(requests: LlmRequests) -> float:
        return analytic_capacity_rps(
            requests, cost, max_num_seqs, instances=replicas,
            prefill_instances=prefill_instances, decode_instances=decode_instances,
        )  # fmt: skip

    return find_llm_saturation(
        run, start_rps=capacity_of(sample), duration_s=duration_s,
        pools=prefill_instances > 0, capacity_of=capacity_of,
    )  # fmt: skip


def run_rate(saturation: Saturation) -> float:
    """The rate the run is at when ``--find-saturation`` comes without ``--rate``: the rate
    found (the lowest tried when none held)."""
    if saturation.saturation_rps > 0:
        return saturation.saturation_rps
    return min(p.offered_rps for p in saturation.probes)


def closed_loop_dict(result: LlmServingResult, clients: int, think_s: float) -> dict[str, Any]:
    """The closed loop's users, the rate they achieved (the requests their responses set off,
    per second of sending) and Little's law over the steady window of the run's rates
    (:attr:`LlmServingResult.rate_window_s`): throughput x (mean latency + think) against
    the users."""
    import numpy as np

    from gpucast.simulate.llm_serving import FINISHED

    window = result.rate_window_s
    arrival = result.requests.arrival_s
    mine = result.status == FINISHED
    # the requests the responses set off, per second of sending (the users' first ones, all
    # at 0, set no rate)
    last = float(arrival[-1]) if arrival.size else 0.0
    achieved = (arrival.size - min(clients, arrival.size)) / last if last > 0 else 0.0
    if window is not None:
        mine &= (arrival >= window[0]) & (arrival <= window[1])
    latency = result.latency_s[mine]
    latency = latency[np.isfinite(latency)]
    mean = float(np.mean(latency)) if latency.size else None
    served = float(result.to_dict()["throughput_rps"])  # type: ignore[arg-type]
    return {
        "clients": clients,
        "think_s": think_s,
        "achieved_rps": achieved,
        # None: no request finished (a --horizon-s before the first one did)
        "mean_latency_s": mean,
        "littles_law_clients": None if mean is None else served * (mean + think_s),
    }


#: A closed loop whose run sends for fewer users' cycles (latency + think) than this is still
#: filling (every user's first request was sent at 0), and :data:`STEADY_CYCLES` cycles is
#: the --duration-s suggested.
MIN_CYCLES = 2
STEADY_CYCLES = 4


def closed_loop_warning(loop: dict[str, Any], duration_s: float, replicas: int = 1) -> list[str]:
    """One line when more replicas than users leaves some without a user (each user keeps
    the replica it was dealt), and one when the run sent for fewer than :data:`MIN_CYCLES`
    of the users' cycles: its rates are not the steady loop's, and Little's law does not
    hold over them."""
    out = []
    if replicas > loop["clients"]:
        idle = replicas - loop["clients"]
        out.append(
            f"{count_of(replicas, 'replica')} for {count_of(loop['clients'], 'user')}: "
            f"{count_of(idle, 'replica')} got no user and served nothing (users are dealt "
            f"round robin and keep their replica); use --replicas {loop['clients']} or fewer, "
            f"or --clients {replicas} or more"
        )
    mean = loop["mean_latency_s"]
    if mean is None:
        return out
    cycle = mean + loop["think_s"]
    if duration_s >= MIN_CYCLES * cycle:
        return out
    out.append(
        f"the closed loop sent for {duration_s:g} s, fewer than {MIN_CYCLES} of its users' "
        f"cycles (latency {mean:.2f} s + think {loop['think_s']:g} s): the loop never reached "
        f"a steady state, so its rates are not the steady loop's (Little's law reads "
        f"{loop['littles_law_clients']:.1f} users for {loop['clients']}); a --duration-s of "
        f"at least {math.ceil(STEADY_CYCLES * cycle):,} ({STEADY_CYCLES} cycles) measures it"
    )
    return out


def closed_loop_text(loop: dict[str, Any]) -> str:
    head = (
        f"closed loop: {count_of(loop['clients'], 'user')}, think {loop['think_s'] * 1e3:g} ms: "
        f"{loop['achieved_rps']:.2f} req/s achieved"
    )
    if loop["littles_law_clients"] is None:
        return f"{head}; no request finished (Little's law n/a)"
    return (
        f"{head}; throughput x (latency {loop['mean_latency_s']:.2f} s + think) = "
        f"{loop['littles_law_clients']:.1f} users (Little's law)"
    )
