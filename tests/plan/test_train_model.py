"""The planner's pieces: Pareto, statistical efficiency, the vectorised model vs scalar formulas."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from plan_factories import context, request

from gpucast.plan.efficiency import epochs_needed, workload_family
from gpucast.plan.inputs import PerfParams
from gpucast.plan.pareto import nondominated, pareto_front_2d
from gpucast.plan.risk import approx_spot_time_s
from gpucast.plan.space import DDP, FSDP, PS
from gpucast.plan.train import search
from gpucast.predict import comm

points = st.lists(st.tuples(st.integers(0, 20), st.integers(0, 20)), min_size=0, max_size=40)


@settings(max_examples=200, deadline=None)
@given(points)
def test_pareto_2d_matches_brute_force(pts: list[tuple[int, int]]) -> None:
    x = np.array([p[0] for p in pts], dtype=float)
    y = np.array([p[1] for p in pts], dtype=float)
    front = pareto_front_2d(x, y)
    on = {(x[i], y[i]) for i in front}
    for i in range(len(pts)):
        dominated = any(
            x[j] <= x[i] and y[j] <= y[i] and (x[j], y[j]) != (x[i], y[i]) for j in range(len(pts))
        )
        assert ((x[i], y[i]) in on) == (not dominated)
    assert len(front) == len(on)  # one representative per point


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(*[st.integers(0, 6)] * 3), min_size=1, max_size=30))
def test_nondominated_3d(pts: list[tuple[int, int, int]]) -> None:
    p = np.array(pts, dtype=float)
    keep = nondominated(p)
    for i in keep:
        assert not any(np.all(p[j] <= p[i]) and np.any(p[j] < p[i]) for j in range(len(p)))
    for i in set(range(len(p))) - set(keep.tolist()):
        dominated = any(np.all(p[j] <= p[i]) and np.any(p[j] < p[i]) for j in range(len(p)))
        duplicate = any(np.array_equal(p[j], p[i]) for j in keep)
        assert dominated or duplicate


@given(st.floats(1, 1e6), st.floats(1, 1e6))
def test_epochs_grow_with_global_batch(b1: float, b2: float) -> None:
    e = epochs_needed(
        np.array([b1, b2]), epochs_at_reference=90, reference_batch=256, critical_batch=32768
    )
    assert (e[0] <= e[1]) == (b1 <= b2) or math.isclose(b1, b2)
    at_ref = epochs_needed(
        np.array([256.0]), epochs_at_reference=90, reference_batch=256, critical_batch=32768
    )
    assert at_ref[0] == pytest.approx(90)


def test_families_have_sources() -> None:
    assert workload_family("resnet50").critical_batch == 32768
    assert workload_family("cifar-resnet32").family == "cifar-cnn"
    assert workload_family("pkg.mod:factory").family == "other"
    assert "McCandlish" in workload_family("resnet50").source


def test_vectorised_collectives_match_comm_formulas() -> None:
    ctx = context()
    res = search(request(allow_spot=False, deadline_s=None), ctx)
    space, ev = res.space, res.evaluation
    rng = np.random.default_rng(1)
    rows = rng.choice(np.flatnonzero((space.strategy != PS) & ev.fits & ~ev.checkpointing), 60)
    for i in rows:
        o = space.offer[i]
        g = space.offers.gpu[o]
        n = int(ev.workers[i])
        total = float(
            comm.hierarchical_collective_s(
                ctx.facts.gradient_bytes,
                n,
                int(space.offers.gpus_per_node[o]),
                float(res.gpus.intra_node_gbps[g]),
                float(space.offers.network_gbps[o]),
                ctx.perf.hop_latency_s,
                passes=3.0 if space.strategy[i] == FSDP else 2.0,
            )
        )
        assert ev.comm_s[i] == pytest.approx(total, rel=1e-12, abs=1e-15)
        step = ev.compute_s[i] + comm.exposed_comm_s(total, float(ev.compute_s[i]))
        assert ev.step_s[i] == pytest.approx(step, rel=1e-12)


def test_tcp_networks_use_the_fitted_collective_constants() -> None:
    """On a network without RDMA the all-reduce runs at the fitted share of the NIC (and of
    PCIe for GPUs without NVLink), pays the fixed cost and overlaps as fitted -- except on one
    node of NVLink GPUs, which never reaches its NICs: the RDMA (nominal) constants."""
    import dataclasses

    from gpucast.predict.collective import RDMA, TCP_DEFAULT

    ctx = dataclasses.replace(context(), perf=PerfParams())  # TCP everywhere: no RDMA types
    res = search(request(allow_spot=False, deadline_s=None), ctx)
    space, ev = res.space, res.evaluation
    multi = np.flatnonzero((space.strategy == DDP) & ev.fits & (ev.workers > 1))
    assert multi.size
    for i in multi[:: max(1, multi.size // 40)]:
        o, g, n = space.offer[i], space.offers.gpu[space.offer[i]], int(ev.workers[i])
        one_node = n <= int(space.offers.gpus_per_node[o])
        c = (
            TCP_DEFAULT
            if not res.gpus.nvlink[g]
            else RDMA
            if one_node
            else dataclasses.replace(TCP_DEFAULT, intra_efficiency=1.0)
        )
        total = float(
            c.total_s(
                ctx.facts.gradient_bytes,
                n,
                int(space.offers.gpus_per_node[o]),
                float(res.gpus.intra_node_gbps[g]),
                float(space.offers.network_gbps[o]),
            )
        )
        assert ev.comm_s[i] == pytest.approx(total, rel=1e-12)
        if c is not RDMA:
            assert total > TCP_DEFAULT.latency_s  # at least the fixed cost
        exposed = float(c.exposed_s(total, float(ev.compute_s[i])))
        assert ev.step_s[i] == pytest.approx(float(ev.compute_s[i]) + exposed, rel=1e-12)


def test_gpu_table_reproduces_the_roofline() -> None:
    from gpucast.predict.roofline import predict_step_time

    ctx = context()
    res = search(request(allow_spot=False), ctx)
    for name in res.gpus.names:
        spec = ctx.catalog.gpu(name)
        for b in (1, 7, 64):
            est = predict_step_time(ctx.facts.roofline_workload(b), spec, "fp32")
            terms = res.gpus.step_terms(np.array([res.gpus.index(name)]), np.array([float(b)]))
            assert terms.sum() == pytest.approx(est.value, rel=1e-9)


def test_the_pruning_estimate_grows_with_the_hazard() -> None:
    t = approx_spot_time_s(
        np.array([3600.0, 3600.0]),
        np.array([0.0, 1e-3]),
        checkpoint_s=10,
        restart_s=60,
        startup_s=60,
    )
    assert t[1] > t[0] >= 3600.0


@pytest.mark.shared_data
def test_ps_constants_come_from_a_fit_on_the_published_cluster_data(shared_data: Path) -> None:
    from gpucast.plan.inputs import PerfParams
    from gpucast.predict.cluster import ClusterModel
    from gpucast.store.datasets.cmdare_cluster import cluster_fit_table

    table = cluster_fit_table(shared_data / "cmdare" / "cluster_scaling")
    model = ClusterModel().fit(table.frame)
    perf = PerfParams.from_cluster_model(model, fitted_on="cluster_scaling")
    assert perf.ps_network_efficiency == model.network_efficiency_
    assert perf.ps_per_tensor_cost_s == model.per_tensor_cost_s_
    assert perf.ps_cv_mape_pct == model.cv_mape_pct_
    # the built-in defaults (used without the data) stay close to a fit on it
    defaults = PerfParams()
    assert defaults.ps_network_efficiency == pytest.approx(perf.ps_network_efficiency, abs=0.1)
    assert defaults.ps_per_tensor_cost_s == pytest.approx(perf.ps_per_tensor_cost_s, rel=0.25)
