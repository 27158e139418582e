"""The searches over simulated deployments: the fewest replicas meeting the SLOs
(:func:`fewest_meeting`, :func:`_search_replicas`, :func:`_replica_search`), prefill/decode
pools (:func:`_search_split`), the pick simulated whole (:func:`_whole_pick`) and at the edges
of its iteration-time band (:func:`_band_edge`); the tasks a worker process runs.

Private part of :mod:`gpucast.plan.llm_serve`, which re-exports its public names.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from gpucast.domain.llm_serving import IterationCost
from gpucast.plan._llm_serve_choices import GpuChoice
from gpucast.plan._llm_serve_evaluate import SAMPLED_REQUESTS, _evaluate, _Setting
from gpucast.plan._llm_serve_result import LlmServeCandidate, _rank
from gpucast.simulate.llm_load import work_s
from gpucast.simulate.llm_serving import LlmServingResult

#: The replica search stops within this fraction of the fewest (exact below 200 replicas):
#: a 1% step is well inside the model's error.
SEARCH_WITHIN = 0.01


#: The replica search starts at this many times the work's lower bound (every instance busy
#: all the time, which no latency SLO allows) and grows by :data:`SEARCH_GROWTH` twice, then
#: doubles, until one meets: on the built-in models' plans the fewest meeting are 1.2-3.5x
#: the bound, and this start and growth simulate ~20% fewer deployments than doubling from
#: the bound (`llama-3-8b:100`: 198 of 244).
SEARCH_START = 1.5


SEARCH_GROWTH = 1.3


def _search_replicas(
    s: _Setting,
    choice: GpuChoice,
    tp: int,
    cost: IterationCost,
    low: int,
    max_replicas: int,
    rows: list[LlmServeCandidate],
    *,
    failing: int = 0,
    full: bool = False,
) -> int | None:
    """The fewest replicas meeting the SLO: growing from ``low``, then bisection down to
    ``failing`` (:func:`fewest_meeting`); ``full``: every replica simulated."""
    seen: dict[int, bool] = {}

    def meets(r: int) -> bool:
        if r not in seen:
            row, _ = _evaluate(s, choice, tp, cost, replicas=r, split=None, full=full)
            rows.append(row)
            seen[r] = row.meets_slo
        return seen[r]

    return fewest_meeting(meets, low, max_replicas, failing=failing, within=SEARCH_WITHIN)


def _replica_search(
    s: _Setting, choice: GpuChoice, tp: int, cost: IterationCost, low: int, max_replicas: int
) -> tuple[int | None, list[LlmServeCandidate]]:
    """One GPU x degree's replica search from :data:`SEARCH_START` times ``low``, the work's
    lower bound, which fails (:func:`_search_replicas`): its fewest meeting replicas and the
    rows it simulated (a task a worker process runs)."""
    rows: list[LlmServeCandidate] = []
    start = math.ceil(low * SEARCH_START)
    best = _search_replicas(s, choice, tp, cost, start, max_replicas, rows, failing=low - 1)
    return best, rows


def _band_edge(
    s: _Setting,
    choice: GpuChoice,
    tp: int,
    cost: IterationCost,
    replicas: int,
    split: tuple[int, int] | None,
) -> LlmServeCandidate:
    """The pick with every iteration at one edge of the engine's band (``cost`` scaled): its
    row (a task a worker process runs; the run itself stays there)."""
    return _evaluate(s, choice, tp, cost, replicas=replicas, split=split)[0]


def _whole_pick(
    s: _Setting,
    rows: list[LlmServeCandidate],
    built: dict[tuple[str, int], tuple[GpuChoice, IterationCost]],
    max_replicas: int,
) -> dict[int, LlmServingResult]:
    """The pick simulated whole: while the cheapest row meeting the SLOs was simulated from a
    share of its instances (:data:`SAMPLED_REQUESTS`), its row is replaced by the whole
    deployment's; where the whole misses (the share met by the luck of its sample), a
    colocated GPU x degree is searched on, whole, from one replica more. Returns the runs
    simulated whole here, by their rows' ``id``."""
    runs: dict[int, LlmServingResult] = {}
    while True:
        ok = [r for r in rows if r.meets_slo and r.within_budget]
        if not ok:
            return runs
        row = min(ok, key=_rank)
        if row.simulated_instances == row.gpus // row.tp:  # whole already
            return runs
        choice, cost = built[(row.gpu, row.tp)]
        split = None if row.mode == "colocated" else (row.prefill_instances, row.decode_instances)
        whole, run = _evaluate(
            s, choice, row.tp, cost, replicas=row.replicas, split=split, full=True
        )
        runs[id(whole)] = run
        rows[rows.index(row)] = whole
        if not whole.meets_slo and split is None and row.replicas < max_replicas:
            _search_replicas(
                s, choice, row.tp, cost, row.replicas + 1, max_replicas, rows,
                failing=row.replicas, full=True,
            )  # fmt: skip


def fewest_meeting(
    meets: Callable[[int], bool],
    low: int,
    high: int,
    *,
    failing: int = 0,
    within: float = 0.0,
    grow: float = SEARCH_GROWTH,
) -> int | None:
    """The fewest ``r`` in ``[1, high]`` with ``meets(r)`` (``meets`` rising with ``r``):
    growing ``grow`` times (at least by one) from ``low`` twice, then doubling, then
    bisecting down to ``failing``, a count known to fail (0: none; ``low - 1``: nothing
    below ``low`` is tried); None when ``high`` fails. ``within``: the bisection stops once
    ``r`` is within that fraction of a failing count (0: exact)."""
    r = min(max(low, 1), high)
    fail = min(failing, r - 1)
    misses = 0
    while not meets(r):
        fail = r
        if r >= high:
            return None
        misses += 1
        r = min(max(r + 1, math.ceil(r * (grow if misses <= 2 else 2.0))), high)
    while r - fail > max(1, math.floor(r * within)):
        mid = (r + fail) // 2
        if meets(mid):
            r = mid
        else:
            fail = mid
    return r


def _search_split(
    s: _Setting,
    choice: GpuChoice,
    tp: int,
    cost: IterationCost,
    colocated: int,
) -> list[LlmServeCandidate]:
    """Prefill/decode pools of ``colocated`` instances in all or fewer: the fewest total
    meeting the SLOs, searched as the replicas are (:func:`fewest_meeting`), each total tried
    at ``p`` prefill instances from the share of the work that is prefill, and one either
    side. A run of more than :data:`SAMPLED_REQUESTS` requests searches in ``m`` alike pods
    (:func:`_evaluate`): totals and pools in steps of ``m``. Returns the rows simulated."""
    rows: list[LlmServeCandidate] = []
    req = s.requests
    prefill, decode = work_s(req, cost, s.scheduler.max_num_seqs)
    share = prefill / max(prefill + decode, 1e-12)
    m = max(1, min(req.count // SAMPLED_REQUESTS, colocated // 2))
    top = max(colocated // m, 2)  # instances per pod at most

    def meets(u: int) -> bool:  # u + 1 instances per pod (a pod needs 2)
        t = u + 1
        base = min(max(1, round(t * share)), t - 1)
        met = False
        for p in sorted({base, max(1, base - 1), min(t - 1, base + 1)}):
            split = (m * p, m * (t - p))
            row, _ = _evaluate(s, choice, tp, cost, replicas=1, split=split, pods=m)
            rows.append(row)
            met = met or row.meets_slo
        return met

    fewest_meeting(meets, top - 1, top - 1, within=SEARCH_WITHIN)
    return rows
