"""Token-level LLM serving: continuous batching as vLLM does it, seeded and fast.

Pure: requests (:class:`~gpucast.domain.llm_serving.LlmRequests`), the cost of one engine
iteration (:class:`~gpucast.domain.llm_serving.IterationCost`, from
:func:`gpucast.predict.llm_infer.iteration_cost`) and a scheduler in; per-request times out.
No RNG: routing is round robin in arrival order, so the same requests give the same result
bit for bit (the randomness of synthetic requests belongs to whoever draws them).

The model
---------
* **Replicas.** Requests are dealt round robin in arrival order to ``replicas`` identical
  instances (each ``tp`` GPUs); instances share nothing and are simulated one after another.
* **An instance** runs iterations back to back while it has work. Each iteration the running
  sequences decode one token. Without chunked prefill (vLLM V0's default) an iteration that
  admits waiting requests runs only their prompts (the decodes wait: their next token is
  late by the whole prefill); requests are admitted first come, first served while
  ``max_num_seqs`` sequences, the token budget and the paged KV cache allow (``block_size``-
  token blocks, the watermark kept free). The prefill emits the first token (TTFT); a request
  of ``O`` output tokens then needs ``O - 1`` decode iterations. With chunked prefill every
  iteration runs all decodes first and fills the rest of the token budget with prompt chunks
  (Sarathi-Serve / vLLM V1).
* **KV cache.** A sequence holding ``c`` tokens holds ``ceil(c / block_size)`` blocks; a
  decode appends one token. When a decode finds no free block the latest-arrived running
  sequence is preempted: *recompute* frees its blocks and puts it at the head of the queue
  to prefill prompt + generated tokens again; *swap* copies its blocks to CPU memory over
  PCIe (both ways: time added to the instance) and swaps it back in, before any new prompt,
  when blocks are free again (falling back to recompute when the swap space is full).
  Requests that cannot fit even alone (prompt + output beyond the context window, the KV
  capacity, or -- without chunked prefill -- the token budget) are dropped at arrival.
* **Disaggregation** (Splitwise): prefill instances run batches of prompts only; each
  request's KV cache then crosses the prefill instance's link to a decode instance (round
  robin in order of readiness), which admits it without a prefill and decodes it with
  continuous batching (a request it preempts is recomputed there). The link is a FIFO
  server: a transfer waits for the one before it, then holds the link for
  :meth:`Disaggregation.serialise_s` (plus the link's latency), so a slow link bounds the
  requests/s and its queue grows without bound under overload (:attr:`LlmServingResult.kv_link`
  says when the run is link-bound). The KV cache a queued transfer holds on the prefill
  instance is not charged to its blocks.

Why it is fast
--------------
Between two events (an arrival the scheduler could admit, a sequence finishing, the KV
cache running out of blocks) every iteration decodes the same sequences, and the time of a
decode step is linear in their total context, which grows by ``n`` per step. The loop
therefore jumps a whole stretch of ``k`` steps at once: the stretch time is an arithmetic
series, the step at which an arrival is seen solves a quadratic, the first finish is the top
of a heap, and the blocks ``k`` steps need are read off a histogram of the sequences' offsets
within their last block (all advance in lock step). One loop pass per event, a few events
per request: a million requests in seconds (``benchmarks/llm_serving_speed.py``).

The deployment is here (:func:`simulate_llm_serving`, :class:`RunSetup`, the prefill pool)
with the public names (``__all__``); the rest lives in private parts: the request statuses
and the statistics of per-request times (``_llm_serving_stats``), the result types
(``_llm_serving_results``) and one instance's continuous-batching loop
(``_llm_serving_instance``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.llm_serving import Disaggregation, IterationCost, LlmRequests, SchedulerConfig
from gpucast.domain.units import GIB
from gpucast.simulate._llm_serving_instance import (
    _DONE,
    _DROP,
    _WAITING,
    ClientLoop,
    _Outcome,
    _run_instance,
    _Shared,
)
from gpucast.simulate._llm_serving_results import (
    LINK_BOUND_UTILISATION,
    InstanceStats,
    KvLinkLoad,
    LlmServingResult,
)
from gpucast.simulate._llm_serving_stats import (
    DROPPED,
    FINISHED,
    PERCENTILE_RULE,
    PERCENTILES,
    RUNNING,
    UNARRIVED,
    FloatArray,
    IntArray,
    mixture_quantiles,
    offered_rps,
    run_end_s,
    summary,
    tail_percentiles,
)

__all__ = [
    "DEFAULT_SWAP_GBPS",
    "DROPPED",
    "FINISHED",
    "LINK_BOUND_UTILISATION",
    "PERCENTILES",
    "PERCENTILE_RULE",
    "RUNNING",
    "UNARRIVED",
    "ClientLoop",
    "FloatArray",
    "InstanceStats",
    "IntArray",
    "KvLinkLoad",
    "LlmServingResult",
    "RunSetup",
    "mixture_quantiles",
    "offered_rps",
    "replica_share",
    "run_end_s",
    "simulate_llm_serving",
    "summary",
    "tail_percentiles",
]


#: Default host-to-GPU bandwidth for swapping KV blocks (Gbit/s; PCIe Gen4 x16 ~ 25 GB/s).
DEFAULT_SWAP_GBPS = 200.0


# -- the prefill pool ----------------------------------------------------------------------


def _run_prefill_pool(
    ids: Sequence[int],
    ready: Sequence[float],
    st: _Shared,
    cost: IterationCost,
    sched: SchedulerConfig,
    *,
    budget: int,
    total_blocks: int,
    until: float,
    transfer: Disaggregation,
) -> _Outcome:
    """A prefill-only instance: FCFS batches of prompts within the token budget, sequence
    limit and KV cache; each request is ready on a decode instance after its KV transfer.
    A prompt beyond the budget (chunked prefill) runs alone in budget-sized chunks."""
    inp, out, gen, first, finish, state = st.inp, st.out, st.gen, st.first, st.finish, st.state
    bs = sched.block_size
    res = _Outcome()
    res.ready_out = [math.nan] * len(ids)
    t = 0.0
    i = 0
    m = len(ids)
    kv_token = cost.kv_bytes_per_token
    link_free = 0.0  # when the link has sent every transfer queued so far
    while i < m and t < until:
        if ready[i] > t:
            t = ready[i]
        batch: list[int] = []
        tokens = 0
        att = 0.0
        longest = 0
        blocks = 0
        while i + len(batch) < m and ready[i + len(batch)] <= t:
            r = ids[i + len(batch)]
            L = inp[r]
            need = -(-L // bs)
            if batch and (
                tokens + L > budget
                or len(batch) >= sched.max_num_seqs
                or blocks + need > total_blocks
            ):
                break
            batch.append(r)
            tokens += L
            att += 0.5 * L * L
            blocks += need
            longest = max(longest, L)
            if tokens >= budget:
                break
        if tokens > budget:  # one long prompt, chunked
            done = 0
            dt = 0.0
            while done < tokens:
                take = min(budget, tokens - done)
                dt += cost.iteration_s(take, 1, done + take, take * done + 0.5 * take * take)
                res.iterations += 1
                done += take
        else:
            dt = cost.iteration_s(tokens, len(batch), tokens, att, cost.passes(longest))
            res.iterations += 1
        t += dt
        res.busy_s += dt
        res.peak_blocks = max(res.peak_blocks, blocks)
        res.tokens += len(batch)
        for j, r in enumerate(batch):
            gen[r] = 1
            first[r] = t
            if out[r] <= 1:
                finish[r] = t
                state[r] = _DONE
            else:  # FIFO behind the transfers before it, then its bytes at the link's rate
                size = inp[r] * kv_token
                start = max(t, link_free)
                link_free = start + transfer.serialise_s(size)
                res.ready_out[i + j] = link_free + transfer.transfer_latency_s
                res.link_transfers += 1
                res.link_bytes += size
                res.link_busy_s += max(min(link_free, until) - min(start, until), 0.0)
        i += len(batch)
    return res


# -- the whole deployment --------------------------------------------------------------------


def _drops(
    requests: LlmRequests,
    cost: IterationCost,
    sched: SchedulerConfig,
    *,
    max_context: int,
    budget: int,
    total_blocks: int,
) -> tuple[npt.NDArray[np.bool_], dict[str, int]]:
    inp, out = requests.input_tokens, requests.output_tokens
    bs = sched.block_size
    watermark = int(sched.watermark * total_blocks)
    full = inp + out - 1  # tokens a sequence holds at its last step
    too_long = inp + out > max_context
    no_room = ((full + bs - 1) // bs) > total_blocks - watermark
    over_budget = (
        np.zeros(inp.size, dtype=bool) if sched.chunked_prefill else (full > budget) & ~too_long
    )
    reasons = {
        "beyond the context window": int(too_long.sum()),
        "larger than the KV cache of one instance": int((no_room & ~too_long).sum()),
        "prompt beyond the token budget (enable chunked prefill)": int(
            (over_budget & ~no_room).sum()
        ),
    }
    return too_long | no_room | over_budget, {k: v for k, v in reasons.items() if v}


def replica_share(
    requests: LlmRequests,
    cost: IterationCost,
    scheduler: SchedulerConfig,
    *,
    max_context: int,
    replicas: int,
    simulated: int,
) -> LlmRequests:
    """The requests the first ``simulated`` of ``replicas`` colocated instances serve, exactly
    as :func:`simulate_llm_serving` deals them (round robin in arrival order over the requests
    it does not drop), with the dropped requests at the same share: served on ``simulated``
    replicas they give those replicas' run as they ran in the whole deployment. Round robin
    makes the replicas alike, so a planner prices a large deployment from a share of it."""
    if not 1 <= simulated <= replicas:
        raise InvalidSpecError("simulated", f"must be 1..{replicas} replicas", got=simulated)
    dropped, _ = _drops(
        requests, cost, scheduler, max_context=max_context,
        budget=scheduler.budget(max_context),
        total_blocks=cost.kv_capacity_tokens // scheduler.block_size,
    )  # fmt: skip
    rank = np.cumsum(~dropped) - 1  # the order simulate_llm_serving deals them in
    index = np.arange(requests.count)
    keep = np.where(dropped, index % replicas < simulated, rank % replicas < simulated)
    return requests.take(np.flatnonzero(keep))


def simulate_llm_serving(
    requests: LlmRequests,
    cost: IterationCost,
    scheduler: SchedulerConfig,
    *,
    max_context: int,
    replicas: int = 1,
    disaggregation: Disaggregation | None = None,
    price_usd_per_hour: float = 0.0,
    slo_ttft_s: float | None = None,
    slo_tpot_s: float | None = None,
    until_s: float | None = None,
    swap_gbps: float = DEFAULT_SWAP_GBPS,
    sources: Mapping[str, str] | None = None,
) -> LlmServingResult:
    """Serve ``requests`` on ``replicas`` instances (or the pools of ``disaggregation``) of
    ``cost.gpus`` GPUs each (module docstring). ``price_usd_per_hour`` is the whole
    deployment's; ``until_s`` stops the run (default: every request finishes)."""
    run = RunSetup.of(
        requests, cost, scheduler, max_context=max_context, replicas=replicas,
        price_usd_per_hour=price_usd_per_hour, slo_ttft_s=slo_ttft_s, slo_tpot_s=slo_tpot_s,
        until_s=until_s, swap_gbps=swap_gbps,
    )  # fmt: skip
    arrival = requests.arrival_s
    live = np.flatnonzero(~run.dropped)
    stats: list[InstanceStats] = []
    until = run.until

    def run_pool(
        role: str, count: int, order: IntArray, ready: FloatArray, prefilled: bool
    ) -> None:
        for k in range(count):
            mine = order[k::count]
            o = run.instance(mine.tolist(), ready[k::count].tolist(), prefilled=prefilled)
            # the requests that arrived by the horizon (those after it never reached it)
            arrived = int(np.count_nonzero(arrival[mine] <= until))
            stats.append(run.stats(role, k, arrived, o))

    ready_all: FloatArray | None = None
    if disaggregation is None:
        run_pool("colocated", replicas, live, arrival[live], False)
        instances = replicas
    else:
        p, d = disaggregation.prefill_instances, disaggregation.decode_instances
        ready_all = np.full(requests.count, np.inf)
        for k in range(p):
            mine = live[k::p]
            o = _run_prefill_pool(
                mine.tolist(), arrival[mine].tolist(), run.st, cost, scheduler,
                budget=run.budget, total_blocks=run.total_blocks, until=until,
                transfer=disaggregation,
            )  # fmt: skip
            ready_all[mine] = np.asarray(o.ready_out, dtype=np.float64)
            arrived = int(np.count_nonzero(arrival[mine] <= until))
            stats.append(run.stats("prefill", k, arrived, o))
        going = np.flatnonzero(np.isfinite(ready_all))
        going = going[np.argsort(ready_all[going], kind="stable")]
        run_pool("decode", d, going, ready_all[going], True)
        instances = p + d
    return run.result(
        requests, np.arange(requests.count), stats, instances=instances,
        price_usd_per_hour=price_usd_per_hour, slo_ttft_s=slo_ttft_s, slo_tpot_s=slo_tpot_s,
        until_s=until_s, disaggregation=disaggregation, decode_ready_s=ready_all,
        sources=sources,
    )  # fmt: skip


@dataclass(slots=True)
class RunSetup:
    """What one run of :func:`simulate_llm_serving` (or of a closed loop,
    :mod:`gpucast.simulate.llm_closed_loop`) sets up before its instances run: the checked
    limits, the requests that cannot fit, the shared per-request state."""

    cost: IterationCost
    scheduler: SchedulerConfig
    budget: int
    total_blocks: int
    until: float
    swap_s_per_block: float
    swap_blocks: int
    dropped: npt.NDArray[np.bool_]
    reasons: dict[str, int]
    st: _Shared

    @classmethod
    def of(
        cls,
        requests: LlmRequests,
        cost: IterationCost,
        scheduler: SchedulerConfig,
        *,
        max_context: int,
        replicas: int,
        price_usd_per_hour: float,
        slo_ttft_s: float | None,
        slo_tpot_s: float | None,
        until_s: float | None,
        swap_gbps: float,
    ) -> RunSetup:
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
            raise InvalidSpecError("replicas", "must be an integer >= 1", got=replicas)
        for name, value in (("slo-ttft", slo_ttft_s), ("slo-tpot", slo_tpot_s), ("until", until_s)):
            if value is not None and not (math.isfinite(value) and value > 0):
                raise InvalidSpecError(name, "must be > 0 seconds", got=value)
        if not (math.isfinite(price_usd_per_hour) and price_usd_per_hour >= 0):
            raise InvalidSpecError("price", "must be >= 0 US$/h", got=price_usd_per_hour)
        if not (math.isfinite(swap_gbps) and swap_gbps > 0):
            raise InvalidSpecError("swap-gbps", "must be > 0", got=swap_gbps)
        bs = scheduler.block_size
        total_blocks = cost.kv_capacity_tokens // bs
        budget = scheduler.budget(max_context)
        if budget > cost.max_tokens:
            raise InvalidSpecError(
                "max-batched-tokens",
                f"exceeds the iteration cost table ({cost.max_tokens} tokens)",
                got=budget,
                fix="build the iteration cost with max_tokens >= the token budget",
            )
        n_req = requests.count
        dropped, reasons = _drops(
            requests, cost, scheduler, max_context=max_context, budget=budget,
            total_blocks=total_blocks,
        )  # fmt: skip
        nan = math.nan
        st = _Shared(
            inp=requests.input_tokens.tolist(),
            out=requests.output_tokens.tolist(),
            gen=[0] * n_req,
            first=[nan] * n_req,
            finish=[nan] * n_req,
            state=[_DROP if d else _WAITING for d in dropped.tolist()],
            preempted=[0] * n_req,
            itl_lo=[],
            itl_hi=[],
            itl_w=[],
        )
        block_bytes = bs * cost.kv_bytes_per_token
        return cls(
            cost=cost,
            scheduler=scheduler,
            budget=budget,
            total_blocks=total_blocks,
            until=math.inf if until_s is None else float(until_s),
            swap_s_per_block=block_bytes * 8.0 / (swap_gbps * 1e9),
            swap_blocks=(
                int(scheduler.swap_space_gib * GIB // block_bytes) if block_bytes > 0 else 0
            ),
            dropped=dropped,
            reasons=reasons,
            st=st,
        )

    def instance(
        self,
        ids: list[int],
        ready: list[float],
        *,
        prefilled: bool = False,
        clients: ClientLoop | None = None,
    ) -> _Outcome:
        """One instance serving ``ids`` arriving at ``ready`` (:func:`_run_instance`)."""
        return _run_instance(
            ids, ready, self.st, self.cost, self.scheduler, budget=self.budget,
            total_blocks=self.total_blocks, prefilled=prefilled, until=self.until,
            swap_s_per_block=self.swap_s_per_block, swap_blocks=self.swap_blocks,
            clients=clients,
        )  # fmt: skip

    def stats(self, role: str, replica: int, requests: int, o: _Outcome) -> InstanceStats:
        return _stats(role, replica, requests, o, self.cost.gpus, self.total_blocks)

    def result(
        self,
        requests: LlmRequests,
        index: IntArray,
        stats: list[InstanceStats],
        *,
        instances: int,
        price_usd_per_hour: float,
        slo_ttft_s: float | None,
        slo_tpot_s: float | None,
        until_s: float | None,
        disaggregation: Disaggregation | None = None,
        decode_ready_s: FloatArray | None = None,
        sources: Mapping[str, str] | None = None,
        drop_reasons: Mapping[str, int] | None = None,
    ) -> LlmServingResult:
        """The run as a result: ``requests`` (sorted by arrival) are the setup's at ``index``
        (all of them in an open loop; those a closed loop sent, in arrival order, with the
        ``drop_reasons`` of those)."""
        st = self.st
        arrival = requests.arrival_s
        first = np.asarray(st.first, dtype=np.float64)[index]
        finish = np.asarray(st.finish, dtype=np.float64)[index]
        dropped = self.dropped[index]
        status = np.where(dropped, DROPPED, np.where(np.isfinite(finish), FINISHED, RUNNING))
        if until_s is not None:  # arriving after the horizon: never queued, so never running
            status = np.where((status == RUNNING) & (arrival > self.until), UNARRIVED, status)
        end = run_end_s(arrival, finish, bool(np.any(status == RUNNING)), until_s)
        start = float(arrival[0]) if arrival.size else 0.0
        span = max(end - start, 0.0)
        ordered = sorted(stats, key=lambda s: (s.role, s.replica))
        return LlmServingResult(
            requests=requests,
            first_token_s=first,
            finish_s=finish,
            status=status.astype(np.int64),
            preemptions=np.asarray(st.preempted, dtype=np.int64)[index],
            instances=tuple(_with_busy_fraction(s, span) for s in ordered),
            price_usd_per_hour=price_usd_per_hour,
            gpus=instances * self.cost.gpus,
            itl_lo_s=np.asarray(st.itl_lo, dtype=np.float64),
            itl_hi_s=np.asarray(st.itl_hi, dtype=np.float64),
            itl_weight=np.asarray(st.itl_w, dtype=np.float64),
            slo_ttft_s=slo_ttft_s,
            slo_tpot_s=slo_tpot_s,
            until_s=until_s,
            kv_link_gbps=None if disaggregation is None else disaggregation.kv_link_gbps,
            decode_ready_s=decode_ready_s,
            drop_reasons=self.reasons if drop_reasons is None else drop_reasons,
            sources=sources or {},
        )


def _stats(
    role: str, replica: int, requests: int, o: _Outcome, gpus: int, total_blocks: int
) -> InstanceStats:
    return InstanceStats(
        role=role,
        replica=replica,
        gpus=gpus,
        requests=requests,
        iterations=o.iterations,
        busy_s=o.busy_s,
        busy_fraction=0.0,
        preemptions=o.preemptions,
        peak_kv_utilisation=o.peak_blocks / total_blocks if total_blocks else 0.0,
        mean_running=o.decode_seq_steps / o.decode_steps if o.decode_steps else 0.0,
        max_waiting=o.max_waiting,
        tokens=o.tokens,
        decode_steps=o.decode_steps,
        link_transfers=o.link_transfers,
        link_bytes=o.link_bytes,
        link_busy_s=o.link_busy_s,
    )


def _with_busy_fraction(s: InstanceStats, span_s: float) -> InstanceStats:
    def share(busy: float) -> float:
        return min(1.0, busy / span_s) if span_s > 0 else 0.0

    return dataclasses.replace(
        s, busy_fraction=share(s.busy_s), link_busy_fraction=share(s.link_busy_s)
    )
