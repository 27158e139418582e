"""GNN pricing: sparse vs dense aggregation, sampling, halo nodes of a partition."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from gpucast.domain.errors import InvalidSpecError
from gpucast.predict import gnn

HAS_METIS = importlib.util.find_spec("pymetis") is not None


def _power_law_graph(nodes: int, edges: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    w = np.arange(1, nodes + 1, dtype=float) ** -0.6
    w /= w.sum()
    s, d = rng.choice(nodes, edges, p=w), rng.choice(nodes, edges, p=w)
    keep = s != d
    s, d = s[keep], d[keep]
    return np.concatenate([s, d]), np.concatenate([d, s])  # undirected: both directions


def test_full_graph_cost_by_hand() -> None:
    spec = gnn.GnnSpec(model="gcn", feature_dim=8, hidden=4, classes=2)
    cost = gnn.full_graph_cost(spec, nodes=10, edges=30)
    assert cost.transform_flops == pytest.approx(3 * 2 * 10 * (8 * 4 + 4 * 2))
    assert cost.aggregation_bytes == pytest.approx(3 * 4 * ((30 + 10) * 8 + (30 + 10) * 4))
    assert cost.dense_aggregation_flops == pytest.approx(3 * 2 * 10 * 10 * (8 + 4))
    sage = gnn.full_graph_cost(
        gnn.GnnSpec(model="sage", feature_dim=8, hidden=4, classes=2), nodes=10, edges=30
    )
    assert sage.transform_flops == pytest.approx(2 * cost.transform_flops)


def test_a_step_takes_at_least_its_kernel_launches() -> None:
    """A 2-layer GCN step: 4 kernels a layer and 2 for the loss forward, x3 with the backward,
    12 for Adam; a mini-batch copies its features and 2 index arrays a layer. On a tiny graph
    the launches pace the step; on a large one the work does."""
    spec = gnn.GnnSpec(model="gcn", feature_dim=8, hidden=4, classes=2)
    assert gnn.training_kernels(spec) == 3 * (2 * 4 + 2) + 12
    batch = gnn.GnnSpec(model="sage", feature_dim=8, hidden=4, classes=2, batch=4, fanouts=(2, 2))
    assert gnn.training_kernels(batch) == 3 * (2 * 6 + 2) + 12 + 1 + 2 * 2
    tiny = gnn.full_graph_cost(spec, nodes=10, edges=30)
    rates = {"tflops": 100.0, "memory_gbps": 1000.0}
    assert tiny.step_time_s(**rates) < 1e-6  # the work alone: a microsecond
    assert tiny.step_time_s(**rates, kernel_overhead_s=1e-5) == pytest.approx(42 * 1e-5)
    assert tiny.dense_step_time_s(tflops=100.0, kernel_overhead_s=1e-5) == pytest.approx(42e-5)
    big = gnn.full_graph_cost(spec, nodes=10**7, edges=10**9)
    assert big.step_time_s(**rates, kernel_overhead_s=1e-5) == pytest.approx(
        big.step_time_s(**rates)
    )
    with pytest.raises(InvalidSpecError, match="kernel_overhead_s"):
        gnn.launch_floor_s(1.0, 10, -1.0)


def test_full_graph_bytes_by_hand() -> None:
    """Edges as two 4-byte ids; features, activations and their gradients in fp32."""
    spec = gnn.GnnSpec(model="gcn", feature_dim=8, hidden=4, classes=2)
    assert gnn.full_graph_bytes(spec, nodes=10, edges=30) == 8 * 30 + 2 * 10 * (8 + 4 + 2) * 4


def test_dense_pricing_is_far_off_on_a_large_sparse_graph() -> None:
    spec = gnn.GnnSpec(model="gcn", feature_dim=128, hidden=128, classes=16)
    cost = gnn.full_graph_cost(spec, nodes=100_000, edges=2_000_000)
    sparse = cost.step_time_s(tflops=1.0, memory_gbps=20.0)
    assert cost.dense_step_time_s(tflops=1.0) > 10 * sparse


def test_sampled_nodes_grow_and_saturate() -> None:
    hops = gnn.sampled_nodes(1000, 100, [10, 10, 10])
    assert hops[0] == 100 and bool(np.all(np.diff(hops) >= 0)) and hops[1] > 600
    assert hops[-1] <= 1000 and hops[-1] > 990  # nearly every node after three hops
    spec = gnn.GnnSpec(
        model="sage", feature_dim=64, hidden=32, classes=4, fanouts=(10, 5), batch=64
    )
    cost = gnn.sampled_cost(spec, nodes=1_000_000, edges=20_000_000)
    assert cost.nodes_per_hop[0] == 64
    # every node of a hop draws again at the next (DGL blocks): 64 + 640 + 704 x 5, few repeats
    assert cost.nodes_per_hop[2] == pytest.approx(64 + 640 + 704 * 5, rel=0.01)
    assert cost.feature_fetch_bytes == pytest.approx(cost.nodes_per_hop[2] * 64 * 4)


def test_halo_of_a_partition_by_hand() -> None:
    # 0-1-2 | 3-4 with an edge 2-3 across and 1-3 across
    s = np.array([0, 1, 1, 2, 2, 3, 1, 3, 3, 4])
    d = np.array([1, 0, 2, 1, 3, 2, 3, 1, 4, 3])
    parts = np.array([0, 0, 0, 1, 1])
    halo = gnn.halo_nodes(s, d, parts)
    assert halo.tolist() == [1, 2]  # part 0 needs node 3; part 1 needs nodes 1 and 2
    spec = gnn.GnnSpec(model="gcn", feature_dim=8, hidden=4, classes=2)
    # 3 halo nodes x (both layers' inputs forward + the second's gradient back) x 4 bytes
    assert gnn.halo_bytes_per_epoch(halo, spec) == pytest.approx(3 * (8 + 4 + 4) * 4)


def test_random_partition_halo_from_degrees_alone() -> None:
    s, d = _power_law_graph(20_000, 100_000)
    rng = np.random.default_rng(1)
    for k in (2, 4, 8):
        parts = rng.integers(0, k, 20_000)
        actual = gnn.halo_nodes(s, d, parts).sum()
        expected = gnn.expected_random_halo(np.bincount(s, minlength=20_000), k)
        assert expected == pytest.approx(actual, rel=0.02)


@pytest.mark.skipif(not HAS_METIS, reason="pymetis not installed (pip install 'gpucast[graph]')")
def test_metis_cuts_fewer_halo_nodes_than_random() -> None:
    s, d = _power_law_graph(5_000, 20_000)
    parts = gnn.metis_partition(5_000, s, d, 4)
    assert set(np.unique(parts)) == {0, 1, 2, 3}
    metis = gnn.halo_nodes(s, d, parts).sum()
    random = gnn.expected_random_halo(np.bincount(s, minlength=5_000), 4)
    assert metis < random


@pytest.mark.skipif(not HAS_METIS, reason="pymetis not installed (pip install 'gpucast[graph]')")
def test_metis_partitions_the_linked_nodes_and_isolated_ones_fill_the_parts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """QA 37: 3 edges among 1,000,000 ids (--nodes above the ids used, or a stray id) ran
    METIS for minutes, at 90M ids to "Caught an unknown exception!": it now sees the linked
    nodes only, and the isolated ones (no halo) even out the parts' node counts."""
    import pymetis

    seen: list[int] = []
    real = pymetis.part_graph

    def spy(parts: int, adjacency: object) -> object:
        seen.append(len(adjacency.adj_starts) - 1)  # type: ignore[attr-defined]
        return real(parts, adjacency=adjacency)

    monkeypatch.setattr(pymetis, "part_graph", spy)
    s, d = _power_law_graph(2_000, 8_000)
    nodes = 100_000  # ids 2,000..99,999 have no edge
    parts = gnn.metis_partition(nodes, s, d, 4)
    assert seen == [np.unique(np.concatenate([s, d])).size]  # one call, linked nodes only
    assert np.bincount(parts, minlength=4).max() - np.bincount(parts).min() <= 1
    few = gnn.metis_partition(10, np.array([0]), np.array([1]), 4)  # fewer linked than parts
    assert sorted(np.bincount(few, minlength=4)) == [2, 2, 3, 3] and few[0] != few[1]


def test_bad_specs() -> None:
    with pytest.raises(InvalidSpecError, match="fanouts"):
        gnn.GnnSpec(model="gcn", feature_dim=8, hidden=4, classes=2, fanouts=(0, 5))
    with pytest.raises(InvalidSpecError, match="fanouts"):
        gnn.GnnSpec(model="gcn", feature_dim=8, hidden=4, classes=2, fanouts=(5,))
    with pytest.raises(InvalidSpecError, match="model"):
        gnn.GnnSpec(model="gat", feature_dim=8, hidden=4, classes=2)  # type: ignore[arg-type]
    with pytest.raises(InvalidSpecError, match="node ids"):
        gnn.halo_nodes([0, 5], [1, 0], [0, 1])
    spec = gnn.GnnSpec(model="gcn", feature_dim=8, hidden=4, classes=2)
    with pytest.raises(InvalidSpecError, match="batch"):
        gnn.sampled_cost(spec, nodes=10, edges=10)


def test_dense_pricing_fetches_the_same_features() -> None:
    """QA 37: the dense alternative left out the mini-batch's PCIe feature fetch the sparse
    step pays, so on a small batch (fetch most of the step) it read faster than sparse."""
    spec = gnn.GnnSpec(model="sage", feature_dim=128, hidden=8, classes=2, batch=100,
                       fanouts=(10, 5))  # fmt: skip
    cost = gnn.sampled_cost(spec, nodes=1_000_000, edges=10_000_000)
    fetch_s = cost.feature_fetch_bytes / 1e9  # at 1 GB/s
    assert fetch_s > 1e-3
    rates = {"tflops": 100.0, "kernel_overhead_s": 1e-5}
    dense = cost.dense_step_time_s(**rates, host_link_gbps=1.0)
    assert dense == pytest.approx(cost.dense_step_time_s(**rates) + fetch_s)
    assert dense >= cost.step_time_s(memory_gbps=1000.0, host_link_gbps=1.0, **rates)
