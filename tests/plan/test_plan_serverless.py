"""plan.serverless: serverless vs always-on for the same load, the cheapest within the SLO."""

from __future__ import annotations

import numpy as np
import pytest

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.serverless import parse_policy
from gpucast.plan.serverless import plan_serverless

POLICIES = [parse_policy("fixed:10m"), parse_policy("histogram")]


def _sparse(n: int = 40, minutes: int = 600) -> np.ndarray:
    """Functions invoked once every 2 hours: keep-alive waste dominates always-on."""
    counts = np.zeros((n, minutes), dtype=np.int64)
    for f in range(n):
        counts[f, (f * 7) % 120 :: 120] = 1
    return counts


def _plan(counts: np.ndarray, **kw: object):  # type: ignore[no-untyped-def]
    args: dict[str, object] = dict(
        exec_s=0.05, cold_s=2.0, memory_gib=4.0, swap_s=0.3, gpu_memory_gib=16.0,
        price_usd_per_hour=1.0, policies=POLICIES, slo_percentile=99.0, slo_s=5.0,
    )  # fmt: skip
    args.update(kw)
    return plan_serverless(counts, **args)  # type: ignore[arg-type]


def test_rare_functions_with_a_loose_slo_go_serverless_with_execution_billing() -> None:
    plan = _plan(_sparse(), billing="execution")
    assert plan.choice is not None and plan.choice.kind == "serverless"
    # 40 x 4 GiB of models need 10 T4-sized GPUs always on; serverless bills seconds
    always = next(o for o in plan.options if o.kind == "always-on")
    assert always.gpus == 10
    assert always.cost_usd == pytest.approx(10 * 10.0)  # 10 GPUs x 10 h x 1 US$/h
    assert plan.choice.cost_usd < always.cost_usd
    assert "serverless" in plan.reason and "always-on" in plan.reason
    costs = [o.cost_usd for o in plan.options]
    assert costs == sorted(costs)
    assert {"serverless fixed:10m", "serverless histogram"} <= {o.name for o in plan.options}


def test_a_tight_slo_rules_out_cold_starts() -> None:
    plan = _plan(_sparse(), slo_s=0.5, billing="execution")
    assert plan.choice is not None and plan.choice.kind != "serverless"
    serverless = [o for o in plan.options if o.kind == "serverless"]
    assert all(not o.meets_slo and o.slo_latency_s > 0.5 for o in serverless)
    assert "too slow" in plan.reason


def test_pool_with_swapping_is_tried_when_models_do_not_fit_the_compute_size() -> None:
    plan = _plan(_sparse(), slo_s=0.5)
    pools = [o for o in plan.options if o.kind == "pool"]
    assert pools and pools[0].gpus == 1 and pools[0].swaps > 0
    # a swap (0.3 s) fits a 0.5 s SLO: the one-GPU pool is the cheapest that meets it
    assert plan.choice is not None and plan.choice.kind == "pool"


def test_instance_billing_counts_the_keep_alive() -> None:
    by_billing = {
        b: {o.name: o.gpu_hours for o in _plan(_sparse(), billing=b).options}
        for b in ("instance", "execution")
    }
    name = "serverless fixed:10m"
    # 40 functions x 5 calls x (10 min kept + the busy minute) vs 200 x (0.05 s + cold 2 s)
    assert by_billing["instance"][name] > 10 * by_billing["execution"][name]


def test_busy_functions_need_gpus_for_the_peak() -> None:
    counts = np.full((4, 60), 600, dtype=np.int64)  # 600 calls/min x 0.5 s = 5 GPU-s per s
    plan = _plan(counts, exec_s=0.5, memory_gib=1.0, max_utilisation=0.5)
    assert plan.peak_gpus == int(np.ceil(4 * 600 * 0.5 / 60 / 0.5))


def test_no_candidate_meets_an_impossible_slo() -> None:
    plan = _plan(_sparse(), slo_s=0.01)
    assert plan.choice is None and "no candidate meets" in plan.reason


@pytest.mark.parametrize(
    "kw",
    [
        {"billing": "monthly"},
        {"max_utilisation": 0.0},
        {"slo_s": -1.0},
        {"policies": []},
        {"price_usd_per_hour": float("nan")},
    ],
)
def test_bad_input(kw: dict[str, object]) -> None:
    with pytest.raises(InvalidSpecError):
        _plan(_sparse(4, 60), **kw)


def test_a_narrow_miss_is_visible_in_the_reason() -> None:
    # 1.0097 ms against 1 ms: the reason must not print "1.0 ms", which reads as met
    counts = np.full((2, 30), 5, dtype=np.int64)
    plan = _plan(counts, exec_s=0.0010097, slo_percentile=50.0, slo_s=0.001)
    assert plan.choice is None
    assert "1.01 ms" in plan.reason and "1.0 ms" not in plan.reason
