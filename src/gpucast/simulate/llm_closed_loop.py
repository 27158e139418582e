"""Closed-loop clients of a language model, inside the token-level simulator.

``clients`` users each keep one request outstanding: a user sends, waits for the last token,
thinks a fixed ``think_s`` and sends the next (vLLM's ``benchmark_serving.py
--max-concurrency N`` is this with no think time). Arrivals are made as completions happen:
every finish in :func:`gpucast.simulate._llm_serving_instance._run_instance` queues that
user's next request ``think_s`` later, until ``duration_s``. The requests' token counts come from a
pool drawn beforehand (taken in the order they are sent); a request that cannot run at all
(beyond the context window or the KV cache) is rejected at once and its user sends the next.

Users are dealt round robin to the replicas and stay there (a session's affinity); with
``clients`` a multiple of the replicas that is the open loop's round robin in steady state.
Disaggregated pools are not looped (their prefill and decode instances run one after the
other here, and a user waits on both). By Little's law the run holds
``clients = throughput x (latency + think)``: the achieved rate follows the latency.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.llm_serving import IterationCost, LlmRequests, SchedulerConfig
from gpucast.domain.serving import ClosedLoop
from gpucast.simulate.llm_serving import (
    DEFAULT_SWAP_GBPS,
    InstanceStats,
    LlmServingResult,
    RunSetup,
    _drops,
)


@dataclass(slots=True)
class _Pool:
    """The requests drawn for the loop, sent in order; ``sent_s``: when (NaN: never)."""

    live: list[bool]
    sent_s: list[float]
    taken: int = 0

    def send(self, at_s: float) -> int | None:
        """The next request that can run, sent at ``at_s`` (those before it that cannot run
        are sent and rejected at once); None when the pool is spent."""
        while self.taken < len(self.live):
            r = self.taken
            self.taken += 1
            self.sent_s[r] = at_s
            if self.live[r]:
                return r
        return None


@dataclass(slots=True)
class _Users:
    """The users of one instance: its request ids and arrival times, grown as they finish."""

    pool: _Pool
    think_s: float
    stop_s: float
    ids: list[int] = field(default_factory=list)
    ready: list[float] = field(default_factory=list)

    def finished(self, t: float, count: int) -> None:
        at = t + self.think_s
        if at > self.stop_s:
            return
        for _ in range(count):
            r = self.pool.send(at)
            if r is None:
                return
            self.ids.append(r)
            self.ready.append(at)


def simulate_llm_closed_loop(
    pool: LlmRequests,
    cost: IterationCost,
    scheduler: SchedulerConfig,
    *,
    loop: ClosedLoop,
    duration_s: float,
    max_context: int,
    replicas: int = 1,
    price_usd_per_hour: float = 0.0,
    slo_ttft_s: float | None = None,
    slo_tpot_s: float | None = None,
    until_s: float | None = None,
    swap_gbps: float = DEFAULT_SWAP_GBPS,
    sources: Mapping[str, str] | None = None,
) -> tuple[LlmServingResult, bool]:
    """``loop.clients`` users (fixed think time ``loop.think_s``) sending requests until
    ``duration_s`` to ``replicas`` instances (module docstring); their token counts are
    ``pool``'s in order (its arrival times unused). The result holds the requests sent, in
    arrival order, as :func:`~gpucast.simulate.llm_serving.simulate_llm_serving`'s does; the
    flag says whether the pool ran out (the users then stopped before ``duration_s``)."""
    if loop.think != "constant":
        raise InvalidSpecError(
            "think", "must be constant in the token-level closed loop", got=loop.think,
            fix="ClosedLoop(..., think='constant')",
        )  # fmt: skip
    if not (math.isfinite(duration_s) and duration_s > 0):
        raise InvalidSpecError("duration-s", "must be > 0 seconds", got=duration_s)
    if loop.think_s < 0:
        raise InvalidSpecError("think-ms", "must be >= 0 ms", got=loop.think_s * 1e3)
    run = RunSetup.of(
        pool, cost, scheduler, max_context=max_context, replicas=replicas,
        price_usd_per_hour=price_usd_per_hour, slo_ttft_s=slo_ttft_s, slo_tpot_s=slo_tpot_s,
        until_s=until_s, swap_gbps=swap_gbps,
    )  # fmt: skip
    sent = _Pool(live=(~run.dropped).tolist(), sent_s=[math.nan] * pool.count)
    users = [_Users(pool=sent, think_s=loop.think_s, stop_s=duration_s) for _ in range(replicas)]
    for c in range(loop.clients):  # everyone sends at once, as the benchmark starts
        r = sent.send(0.0)
        if r is None:
            break
        users[c % replicas].ids.append(r)
        users[c % replicas].ready.append(0.0)
    stats: list[InstanceStats] = []
    for k, mine in enumerate(users):
        o = run.instance(mine.ids, mine.ready, clients=mine)
        arrived = sum(1 for at in mine.ready if at <= run.until)
        stats.append(run.stats("colocated", k, arrived, o))
    times = np.asarray(sent.sent_s, dtype=np.float64)
    index = np.flatnonzero(np.isfinite(times))
    index = index[np.argsort(times[index], kind="stable")]
    requests = LlmRequests(
        arrival_s=times[index],
        input_tokens=pool.input_tokens[index],
        output_tokens=pool.output_tokens[index],
        source=loop.describe(),
    )
    _, reasons = _drops(
        requests, cost, scheduler, max_context=max_context, budget=run.budget,
        total_blocks=run.total_blocks,
    )  # fmt: skip
    result = run.result(
        requests, index, stats, instances=replicas, price_usd_per_hour=price_usd_per_hour,
        slo_ttft_s=slo_ttft_s, slo_tpot_s=slo_tpot_s, until_s=until_s, sources=sources,
        drop_reasons=reasons,
    )  # fmt: skip
    return result, sent.taken >= pool.count
