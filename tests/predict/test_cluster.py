"""Cluster-scaling model: pure formulas, estimator contract, invariants, accuracy on CM-DARE."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpucast.domain.errors import InvalidInputError, InvalidSpecError, NotFittedError
from gpucast.predict import comm
from gpucast.predict.base import estimator_from_dict
from gpucast.predict.cluster import ClusterModel


# ---------------------------------------------------------------- pure formulas
def test_one_node_collective_is_a_ring_over_nvlink() -> None:
    # 1 GB over 8 Gbit/s = 1 s per full copy; 4 workers on one node move 2*3/4 of it.
    t = comm.hierarchical_collective_s(1e9, 4, 8, 8.0, 1.0, 0.0)
    assert float(t) == pytest.approx(1.5)
    assert float(comm.hierarchical_collective_s(1e9, 1, 8, 8.0, 1.0, 1e-3)) == 0.0
    assert float(comm.hierarchical_collective_s(0.0, 5, 8, 8.0, 1.0, 1e-3)) == pytest.approx(8e-3)


def test_fsdp_moves_one_and_a_half_times_allreduce_bytes() -> None:
    ar = comm.hierarchical_collective_s(2e9, 8, 8, 100.0, 100.0, 0.0)
    fsdp = comm.hierarchical_collective_s(2e9, 8, 8, 100.0, 100.0, 0.0, passes=3.0)
    assert float(fsdp) == pytest.approx(1.5 * float(ar))


def test_across_nodes_latency_grows_with_log_nodes_not_gpus() -> None:
    hop = 25e-6
    latency = [
        float(comm.hierarchical_collective_s(0.0, 8 * m, 8, 7200.0, 3200.0, hop))
        for m in (2, 16, 128, 1024)
    ]
    intra = 2 * 7 * hop  # the NVLink phase of 8 GPUs
    assert latency[0] == pytest.approx(intra + 2 * 1 * hop)  # two nodes: one ring hop
    assert latency[-1] == pytest.approx(intra + 2 * 10 * hop)  # 1,024 nodes: a tree of depth 10
    assert latency[-1] < 5 * latency[0]
    # bandwidth: across nodes every node's NIC carries the bytes; 8 nodes: the ring's
    # 2 (m-1)/m beats the tree's 2 (1 GB at 1 GB/s; NVLink made free here)
    big = float(comm.hierarchical_collective_s(1e9, 64, 8, 1e12, 8.0, 0.0))
    assert big == pytest.approx(2 * 7 / 8, rel=1e-6)


def test_slowest_link_switches_to_network_across_nodes() -> None:
    assert comm.slowest_link_gbps(4, 8, 600.0, 100.0) == 600.0
    assert comm.slowest_link_gbps(16, 8, 600.0, 100.0) == 100.0


def test_exposed_comm_hides_under_backward_at_most() -> None:
    assert comm.exposed_comm_s(1.0, 3.0, overlap_fraction=0.7) == pytest.approx(0.3)
    # backward of 0.3 s (2/3 of 0.45 s) hides only 0.3 s of 1 s
    assert comm.exposed_comm_s(1.0, 0.45, overlap_fraction=0.7) == pytest.approx(0.7)
    assert comm.exposed_comm_s(1.0, 3.0, overlap_fraction=0.0) == pytest.approx(1.0)


def test_mva_is_linear_when_idle_and_saturates_at_ps_bound() -> None:
    workers = np.arange(1, 65, dtype=np.int64)
    ones = np.ones(64)
    x, util = comm.mva_async_throughput(ones * 1.0, ones * 0.01, ones * 0.0, ones, workers)
    assert x[0] == pytest.approx(1 / 1.01)
    assert x[1] == pytest.approx(2 / 1.01, rel=0.01)
    assert np.all(x <= 100.0 + 1e-9) and np.all(np.diff(x) > 0)
    assert np.all(util <= 1.0 + 1e-12)
    # Heavily loaded: demand 0.1 s, think 0.1 s -> bound 10 updates/s
    heavy, u = comm.mva_async_throughput(ones * 0.1, ones * 0.1, ones * 0.0, ones, workers)
    assert heavy[-1] == pytest.approx(10.0, rel=1e-3)
    assert u[-1] == pytest.approx(1.0, rel=1e-3)


def test_shard_demands_keep_the_largest_tensor_whole() -> None:
    # 1 s of bytes each direction, 0.4 s of apply: the largest tensor is half the bytes
    push, pull = comm.shard_demands_s(1.0, 0.4, 4.0, 0.5)
    assert float(pull) == pytest.approx(0.5)
    assert float(push) == pytest.approx(0.5 + 0.1)  # tensors spread evenly: 1/4 of the apply
    push, pull = comm.shard_demands_s(1.0, 0.4, 4.0, 0.0)
    assert float(pull) == pytest.approx(0.25) and float(push) == pytest.approx(0.35)
    push, pull = comm.shard_demands_s(1.0, 0.4, 1.0, 0.9)
    assert float(pull) == pytest.approx(1.0) and float(push) == pytest.approx(1.4)


def test_one_worker_pays_a_pull_and_a_push() -> None:
    # one PS, NIC no faster than the worker's: push (bytes + apply) then pull (bytes)
    push, pull = comm.shard_demands_s(0.01, 0.004, 1.0, 0.0)
    assert float(comm.ps_step_latency_s(push, pull, 0.005)) == pytest.approx(0.024)
    # 4 shards: each carries a quarter; the worker's own NIC (all the bytes, 8 ms each way)
    # is now the slower end of both transfers
    push, pull = comm.shard_demands_s(0.01, 0.004, 4.0, 0.0)
    assert float(comm.worker_nic_delay_s(pull, 0.008)) == pytest.approx(2 * (0.008 - 0.0025))
    assert float(comm.ps_step_latency_s(push, pull, 0.008)) == pytest.approx(0.001 + 2 * 0.008)


def test_ps_mva_saturates_at_the_push_station() -> None:
    workers = np.arange(1, 65, dtype=np.int64)
    ones = np.ones(64)
    x, util = comm.ps_async_throughput(ones * 0.1, ones * 0.05, ones * 0.02, workers)
    assert x[0] == pytest.approx(1 / 0.17)
    assert x[-1] == pytest.approx(20.0, rel=1e-3)
    assert np.all(np.diff(x) >= -1e-12) and np.all(util <= 1.0 + 1e-12)
    table = comm.ps_async_table(
        np.array([0.1, 0.3]), np.array([0.05, 0.01]), np.array([0.02, 0.01]), 8
    )
    for n in range(1, 9):
        xn, _ = comm.ps_async_throughput(
            np.array([0.1, 0.3]), np.array([0.05, 0.01]), np.array([0.02, 0.01]), np.full(2, n)
        )
        np.testing.assert_allclose(table[:, n - 1], xn, rtol=1e-12)


def test_sync_step_at_one_worker_is_the_idle_latency() -> None:
    push, pull = comm.shard_demands_s(0.01, 0.004, 2.0, 0.0)
    one = float(comm.sync_ps_step_time_s(0.1, push, pull, 0.003, 1.0))
    assert one == pytest.approx(0.1 + float(comm.ps_step_latency_s(push, pull, 0.003)))
    four = float(comm.sync_ps_step_time_s(0.1, push, pull, 0.003, 4.0))
    assert four == pytest.approx(0.1 + 4 * 0.002 + 2 * 4 * 0.005)


def test_equivalent_think_time_is_exact_for_identical_workers() -> None:
    assert comm.equivalent_think_time_s(np.full(6, 0.2), 0.05) == pytest.approx(0.2)
    # one fast (idle rate 1/0.25 = 4) and one slow (1/1.05): n / sum -> Z_eq + D
    z = comm.equivalent_think_time_s(np.array([0.2, 1.0]), 0.05)
    assert 2 / (z + 0.05) == pytest.approx(4 + 1 / 1.05)


# ---------------------------------------------------------------- estimator on synthetic data
def _synthetic(eff: float = 0.5, per_tensor_s: float = 1e-4) -> pd.DataFrame:
    """Cluster speeds generated by the model's own physics (noise-free)."""
    truth = ClusterModel()
    truth.network_efficiency_ = eff
    truth.per_tensor_cost_s_ = per_tensor_s
    rows = []
    for model, params, tensors in (("a", 1e6, 50), ("b", 5e6, 200), ("c", 3e7, 200)):
        for gpu, t1 in (("slow", 0.5), ("fast", 0.12)):
            for n in range(1, 9):
                est = truth.predict(t1, n, param_bytes=params * 4, n_tensors=tensors)
                rows.append(
                    {
                        "gpu": gpu,
                        "model": model,
                        "workers": n,
                        "speed_steps_per_s": est.value,
                        "n_parameters": params,
                        "n_tensors": tensors,
                    }
                )
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def fitted() -> ClusterModel:
    return ClusterModel(efficiency_prior_weight=0.0).fit(_synthetic())


def test_predict_before_fit_raises() -> None:
    with pytest.raises(NotFittedError):
        ClusterModel().predict(0.1, 4, param_bytes=1e6, n_tensors=10)
    with pytest.raises(NotFittedError):
        ClusterModel().to_dict()


def test_fit_recovers_generating_parameters(fitted: ClusterModel) -> None:
    assert fitted.network_efficiency_ == pytest.approx(0.5, rel=0.02)
    assert fitted.per_tensor_cost_s_ == pytest.approx(1e-4, rel=0.05)
    assert fitted.train_mape_pct_ is not None and fitted.train_mape_pct_ < 0.5


def test_fit_does_not_mutate_input() -> None:
    data = _synthetic()
    before = data.copy(deep=True)
    ClusterModel().fit(data)
    pd.testing.assert_frame_equal(data, before)


def test_round_trip_gives_identical_predictions(fitted: ClusterModel) -> None:
    blob = json.loads(json.dumps(fitted.to_dict()))
    again = estimator_from_dict(blob)
    assert isinstance(again, ClusterModel)
    for strategy in ("ps-async", "ps-sync", "allreduce", "fsdp"):
        a = fitted.predict(0.2, 6, 2, strategy, param_bytes=4e7, n_tensors=100)
        b = again.predict(0.2, 6, 2, strategy, param_bytes=4e7, n_tensors=100)
        assert a == b


def test_from_dict_rejects_other_kind(fitted: ClusterModel) -> None:
    blob = fitted.to_dict()
    blob["kind"] = "speed"
    with pytest.raises(InvalidInputError):
        ClusterModel.from_dict(blob)


def test_fit_requires_columns() -> None:
    with pytest.raises(InvalidInputError, match="n_tensors"):
        ClusterModel().fit(_synthetic().drop(columns=["n_tensors"]))


def test_ps_saturation_is_named_with_shards_that_remove_it(fitted: ClusterModel) -> None:
    est = fitted.predict(0.12, 8, param_bytes=1.2e8, n_tensors=200)
    assert est.bottleneck == "ps_network"
    assert est.value < 8 / 0.12 * 0.6
    needed = int(est.breakdown["ps_shards_needed"])
    assert needed > 1
    assert any("add 1 PS shard" in n for n in est.notes)
    relieved = fitted.predict(0.12, 8, needed, param_bytes=1.2e8, n_tensors=200)
    assert relieved.bottleneck == "compute"
    assert relieved.value > est.value


def test_many_small_tensors_make_cpu_the_bottleneck(fitted: ClusterModel) -> None:
    est = fitted.predict(0.01, 8, param_bytes=1e5, n_tensors=2000)
    assert est.bottleneck == "ps_cpu"


def test_sync_waits_for_slowest_worker(fitted: ClusterModel) -> None:
    same = fitted.predict([0.5, 0.5, 0.5, 0.5], None, 1, "ps-sync", param_bytes=1e6, n_tensors=10)
    slow = fitted.predict([0.5, 0.5, 0.5, 2.0], None, 1, "ps-sync", param_bytes=1e6, n_tensors=10)
    all_slow = fitted.predict(2.0, 4, 1, "ps-sync", param_bytes=1e6, n_tensors=10)
    assert slow.value == pytest.approx(all_slow.value)
    assert slow.value < same.value


def test_async_heterogeneous_adds_rates_below_ps_limit(fitted: ClusterModel) -> None:
    est = fitted.predict([0.5, 1.0], None, param_bytes=1e5, n_tensors=5)
    assert est.value == pytest.approx(1 / 0.5 + 1 / 1.0, rel=0.02)
    assert est.bottleneck == "compute"


def test_allreduce_within_node_beats_across_nodes(fitted: ClusterModel) -> None:
    kw = {"param_bytes": 4e8, "n_tensors": 300}
    inside = fitted.predict(0.1, 8, 1, "allreduce", gpus_per_node=8, intra_node_gbps=600.0, **kw)
    across = fitted.predict(0.1, 8, 1, "allreduce", gpus_per_node=1, network_gbps=10.0, **kw)
    assert inside.value > across.value
    assert across.bottleneck == "allreduce"
    fsdp = fitted.predict(0.1, 8, 1, "fsdp", gpus_per_node=1, network_gbps=10.0, **kw)
    assert fsdp.value < across.value


def test_cross_region_latency_slows_ps_training(fitted: ClusterModel) -> None:
    near = fitted.predict(0.05, 4, param_bytes=1e6, n_tensors=20)
    far = fitted.predict(0.05, 4, param_bytes=1e6, n_tensors=20, cross_region_rtt_s=0.08)
    assert far.value < near.value


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"strategy": "mpi"}, "strategy"),
        ({"ps_shards": 0}, "ps_shards"),
        ({"workers": 0}, "workers"),
    ],
)
def test_bad_arguments_name_the_field(
    fitted: ClusterModel, kwargs: dict[str, object], field: str
) -> None:
    args: dict[str, object] = {"workers": 4, "param_bytes": 1e6, "n_tensors": 10} | kwargs
    with pytest.raises(InvalidSpecError) as info:
        fitted.predict(0.1, **args)  # type: ignore[arg-type]
    assert info.value.field == field


def test_frame_prediction_matches_scalar(fitted: ClusterModel) -> None:
    frame = pd.DataFrame(
        {
            "single_worker_step_time_s": [0.12, 0.5, 0.12, 0.3],
            "workers": [8, 3, 4, 6],
            "ps_shards": [1, 2, 1, 1],
            "param_bytes": [1.2e8, 4e6, 1e6, 5e7],
            "n_tensors": [200, 50, 20, 100],
            "max_tensor_bytes": [3e7, 4e5, 1e5, 1e6],
            "strategy": ["ps-async", "ps-async", "ps-sync", "allreduce"],
        }
    )
    out = fitted.predict_frame(frame)
    for i, row in frame.iterrows():
        est = fitted.predict(
            float(row.single_worker_step_time_s),
            int(row.workers),
            int(row.ps_shards),
            str(row.strategy),
            param_bytes=float(row.param_bytes),
            n_tensors=int(row.n_tensors),
            max_tensor_bytes=float(row.max_tensor_bytes),
        )
        assert out.loc[i, "speed_steps_per_s"] == pytest.approx(est.value, rel=1e-9)
        assert out.loc[i, "bottleneck"] == est.bottleneck
        assert out.loc[i, "ps_shards_needed"] == int(est.breakdown.get("ps_shards_needed", 1))


# ---------------------------------------------------------------- properties
_STEP = st.floats(0.005, 5.0)
_BYTES = st.floats(1e4, 1e9)
_TENSORS = st.integers(1, 2000)
_WORKERS = st.integers(1, 32)


_LARGEST = st.floats(0.0, 1.0)
_WORKER_GBPS = st.sampled_from([1.0, 8.0, 10.0, 100.0])


@settings(max_examples=60, deadline=None)
@given(
    step=_STEP,
    pbytes=_BYTES,
    tensors=_TENSORS,
    workers=_WORKERS,
    shards=st.integers(1, 8),
    largest=_LARGEST,
    worker_gbps=_WORKER_GBPS,
    includes_ps=st.booleans(),
)
def test_more_shards_never_slower(
    fitted: ClusterModel,
    step: float,
    pbytes: float,
    tensors: int,
    workers: int,
    shards: int,
    largest: float,
    worker_gbps: float,
    includes_ps: bool,
) -> None:
    kw = {
        "param_bytes": pbytes,
        "n_tensors": tensors,
        "max_tensor_bytes": max(largest * pbytes, 1.0),
        "network_gbps": worker_gbps,
        "step_time_includes_ps": includes_ps,
    }
    for strategy in ("ps-async", "ps-sync"):
        speeds = [
            fitted.predict(step, workers, k, strategy, **kw).value  # type: ignore[arg-type]
            for k in (shards, shards + 1, 2 * shards, 4 * shards)
        ]
        assert all(b >= a * (1 - 1e-9) for a, b in itertools.pairwise(speeds))


@settings(max_examples=60, deadline=None)
@given(
    step=_STEP,
    pbytes=_BYTES,
    tensors=_TENSORS,
    workers=_WORKERS,
    shards=st.sampled_from([1, 2, 4, 8, 64]),
    largest=st.floats(0.01, 1.0),
    worker_gbps=_WORKER_GBPS,
)
def test_shard_gains_bounded_by_the_largest_tensor_and_the_busiest_shard(
    fitted: ClusterModel,
    step: float,
    pbytes: float,
    tensors: int,
    workers: int,
    shards: int,
    largest: float,
    worker_gbps: float,
) -> None:
    kw = {
        "param_bytes": pbytes,
        "n_tensors": tensors,
        "max_tensor_bytes": largest * pbytes,
        "network_gbps": worker_gbps,
    }
    one_ps = fitted.predict(step, workers, 1, **kw)  # type: ignore[arg-type]
    est = fitted.predict(step, workers, shards, **kw)  # type: ignore[arg-type]
    bd = est.breakdown
    # the busiest shard's push station (its bytes + its apply) bounds the update rate
    assert est.value <= 1.0 / bd["ps_push_s"] * (1 + 1e-9)
    assert bd["ps_utilization"] <= 1.0 + 1e-9
    # however many shards: the one holding the largest tensor moves at least its bytes, each
    # way, and no worker is faster than its compute plus those two transfers
    net_one_ps = one_ps.breakdown["ps_network_s"]
    assert est.value <= 1.0 / (largest * net_one_ps) * (1 + 1e-9)
    assert est.value <= workers / (bd["compute_s"] + 2 * largest * net_one_ps) * (1 + 1e-9)


@settings(max_examples=60, deadline=None)
@given(
    step=_STEP,
    pbytes=_BYTES,
    tensors=_TENSORS,
    workers=_WORKERS,
    shards=st.sampled_from([1, 2, 4, 8]),
    strategy=st.sampled_from(["ps-async", "ps-sync", "allreduce", "fsdp"]),
)
def test_speed_at_most_n_times_single_and_bottleneck_named(
    fitted: ClusterModel,
    step: float,
    pbytes: float,
    tensors: int,
    workers: int,
    shards: int,
    strategy: str,
) -> None:
    one = fitted.predict(step, 1, shards, strategy, param_bytes=pbytes, n_tensors=tensors)
    many = fitted.predict(step, workers, shards, strategy, param_bytes=pbytes, n_tensors=tensors)
    assert many.value <= workers * one.value * (1 + 1e-9)
    assert many.bottleneck in {"compute", "ps_network", "ps_cpu", "allreduce", "fsdp_comm"}
    assert many.lower <= many.value <= many.upper


@settings(max_examples=40, deadline=None)
@given(
    think=st.lists(st.floats(1e-3, 2.0), min_size=1, max_size=6),
    push=st.floats(1e-5, 0.5),
    pull_share=st.floats(0.0, 1.0),
    n_max=st.integers(1, 40),
)
def test_ps_mva_between_the_bounds(
    think: list[float], push: float, pull_share: float, n_max: int
) -> None:
    z = np.array(think)
    pull = push * pull_share
    table = comm.ps_async_table(z, np.full_like(z, push), np.full_like(z, pull), n_max)
    n = np.arange(1, n_max + 1)
    assert np.all(table <= 1.0 / push * (1 + 1e-9))
    assert np.all(table <= n / (z[:, None] + push + pull) * (1 + 1e-9))
    assert np.all(np.diff(table, axis=1) >= -1e-12)


# ---------------------------------------------------------------- accuracy on CM-DARE
@pytest.mark.shared_data
def test_leave_one_model_out_accuracy_on_cmdare(
    shared_data: Path, load_benchmark: Callable[[str], Any]
) -> None:
    bench = load_benchmark("cluster_accuracy")
    from gpucast.store.datasets.cmdare_cluster import cluster_fit_table

    table = cluster_fit_table(shared_data / "cmdare" / "cluster_scaling")
    res = bench.leave_one_model_out(table.frame)
    assert len(res) == 48
    # Measured with the changepoint steady state: 4.96% (naive n x single: 21.8%); K80 2.7%,
    # P100 7.2% (6.1% with the earlier 10%-warm-up estimator). Thresholds a little above;
    # the one-station PS before it measured 5.69% (K80 2.28%, P100 9.11%).
    assert res["ape_pct"].mean() < 5.4
    assert res.loc[res["gpu"] == "K80", "ape_pct"].mean() < 3.0
    assert res.loc[res["gpu"] == "P100", "ape_pct"].mean() < 8.0
    assert res["ape_pct"].mean() < 0.4 * res["naive_ape_pct"].mean()
    p100 = res[(res["gpu"] == "P100") & (res["workers"] == 8)]
    assert set(p100["bottleneck"]) <= {"ps_network", "ps_cpu"}
