"""Partitioned full-graph GNN epochs: per-part loads, halo exchange, the slowest part."""

from __future__ import annotations

import numpy as np
import pytest

from gpucast.domain.errors import InvalidSpecError
from gpucast.predict import gnn
from gpucast.predict.gnn_partition import (
    PartitionLinks,
    PartLoad,
    exchange_s,
    gnn_parameters,
    part_loads,
    partitioned_epoch,
    random_part_loads,
)

SPEC = gnn.GnnSpec(model="gcn", feature_dim=8, hidden=4, classes=2)
RATES = {"tflops": 10.0, "memory_gbps": 100.0}
FAST = PartitionLinks(gpus_per_node=8, intra_node_gbps=100.0, network_gbps=5.0)

# 0-1-2 | 3-4 with edges 2-3 and 1-3 across (both directions), as in test_gnn
SRC = np.array([0, 1, 1, 2, 2, 3, 1, 3, 3, 4])
DST = np.array([1, 0, 2, 1, 3, 2, 3, 1, 4, 3])
PARTS = np.array([0, 0, 0, 1, 1])


def test_part_loads_by_hand() -> None:
    one_per_node = part_loads(SRC, DST, PARTS, gpus_per_node=1)
    a, b = one_per_node
    assert (a.nodes, b.nodes) == (3, 2)
    assert (a.edges, b.edges) == (6, 4)  # in-edges: the aggregation of each part's nodes
    # part 0 needs node 3, part 1 needs nodes 1 and 2; each sends what the other needs
    assert (a.halo_in_network, b.halo_in_network) == (1, 2)
    assert (a.halo_out_network, b.halo_out_network) == (2, 1)
    assert a.halo_in_node == a.halo_out_node == 0  # one GPU a machine: all over the NIC
    same_node = part_loads(SRC, DST, PARTS, gpus_per_node=2)
    assert [p.halo_in_node for p in same_node] == [1, 2]
    assert all(p.halo_in_network == p.halo_out_network == 0 for p in same_node)
    assert sum(p.halo_in for p in same_node) == gnn.halo_nodes(SRC, DST, PARTS).sum()


def test_one_gpu_is_the_full_graph_step() -> None:
    (load,) = part_loads(SRC, DST, np.zeros(5, dtype=np.int64), gpus_per_node=8)
    epoch = partitioned_epoch(SPEC, (load,), links=FAST, **RATES)
    step = gnn.full_graph_cost(SPEC, nodes=5, edges=10).step_time_s(**RATES)
    assert epoch.epoch_s == pytest.approx(step) and epoch.halo_share == 0.0
    (random,) = random_part_loads(nodes=5, edges=10, parts=1, gpus_per_node=8)
    assert partitioned_epoch(SPEC, (random,), links=FAST, **RATES).epoch_s == pytest.approx(step)


def test_exchange_is_the_halo_bytes_over_the_link() -> None:
    epoch = partitioned_epoch(
        SPEC, part_loads(SRC, DST, PARTS, gpus_per_node=1), links=FAST, **RATES
    )
    # inputs of both layers forward, fp32; backward only the second's (features take no gradient)
    per_node = (8 + 4 + 4) * 4
    assert epoch.bytes_per_halo_node == per_node
    assert epoch.halo_bytes == gnn.halo_bytes_per_epoch(gnn.halo_nodes(SRC, DST, PARTS), SPEC)
    # full duplex: each part's larger direction (2 nodes) over the NIC
    assert epoch.exchange_s == pytest.approx((2 * per_node / 5e9, 2 * per_node / 5e9))
    both = PartLoad(nodes=1, edges=0, halo_in_node=10, halo_in_network=1, halo_out_node=3)
    links = PartitionLinks(gpus_per_node=2, intra_node_gbps=10.0, network_gbps=1.0)
    # intra-node link and NIC at once: the slower counts (10 on 10 GB/s vs 1 on 1 GB/s: tie)
    assert exchange_s(both, per_node_bytes=1e9, links=links) == pytest.approx(1.0)


def test_slowest_part_sets_the_epoch_and_cost() -> None:
    loads = (PartLoad(nodes=100, edges=1000), PartLoad(nodes=100, edges=9000, halo_in_network=5))
    epoch = partitioned_epoch(SPEC, loads, links=FAST, allreduce_s=0.5, **RATES)
    assert epoch.slowest == 1
    assert epoch.epoch_s == pytest.approx(epoch.compute_s[1] + epoch.exchange_s[1] + 0.5)
    assert epoch.usd_per_epoch(3.6) == pytest.approx(2 * 3.6 * epoch.epoch_s / 3600)
    out = epoch.to_dict()
    assert out["gpus"] == 2 and out["slowest_part"] == 1 and 0 < out["halo_share"] < 1


def test_random_partition_from_statistics() -> None:
    nodes, edges, k = 100_000, 2_000_000, 8
    loads = random_part_loads(nodes=nodes, edges=edges, parts=k, gpus_per_node=4)
    assert len(loads) == k and loads[0].nodes == nodes / k and loads[0].edges == edges / k
    total = nodes * gnn.expected_random_halo(np.array([edges / nodes]), k)
    assert sum(p.halo_in for p in loads) == pytest.approx(total)
    # 3 of the 7 other parts share the machine
    assert loads[0].halo_in_node == pytest.approx(loads[0].halo_in * 3 / 7)
    assert loads[0].halo_out_network == pytest.approx(loads[0].halo_in_network)
    # uniform degrees at the mean bound the halo of a skewed graph from above
    rng = np.random.default_rng(0)
    skewed = rng.pareto(1.5, nodes)
    skewed *= (edges / nodes) / skewed.mean()
    assert gnn.expected_random_halo(skewed, k) < total


def test_more_gpus_are_faster_until_the_halo_dominates() -> None:
    spec = gnn.GnnSpec(model="sage", feature_dim=128, hidden=256, classes=47)
    links = PartitionLinks(gpus_per_node=8, intra_node_gbps=150.0, network_gbps=3.0)
    rates = {"tflops": 100.0, "memory_gbps": 1000.0}
    epochs, shares = [], []
    for k in (1, 2, 4, 8, 16):
        loads = random_part_loads(nodes=2_000_000, edges=100_000_000, parts=k, gpus_per_node=8)
        e = partitioned_epoch(spec, loads, links=links, **rates)
        epochs.append(e.epoch_s)
        shares.append(e.halo_share)
    assert epochs[0] > epochs[1] > epochs[2] > epochs[3]  # NVLink inside one node
    assert shares == sorted(shares) and shares[0] == 0.0
    assert epochs[4] > epochs[3] and shares[4] > 0.5  # across nodes the NIC dominates


def test_parameters_and_bad_input() -> None:
    assert gnn_parameters(SPEC) == 8 * 4 + 4 + 4 * 2 + 2
    sage = gnn.GnnSpec(model="sage", feature_dim=8, hidden=4, classes=2)
    assert gnn_parameters(sage) == 2 * 8 * 4 + 4 + 2 * 4 * 2 + 2
    with pytest.raises(InvalidSpecError, match="gpus: must be <= the 5 nodes"):
        random_part_loads(nodes=5, edges=10, parts=6, gpus_per_node=8)
    with pytest.raises(InvalidSpecError, match="parts"):
        random_part_loads(nodes=5, edges=10, parts=0, gpus_per_node=8)
    with pytest.raises(InvalidSpecError, match="gpus_per_node"):
        PartitionLinks(gpus_per_node=0, intra_node_gbps=1.0, network_gbps=1.0)
    with pytest.raises(InvalidSpecError, match="network_gbps"):
        PartitionLinks(gpus_per_node=1, intra_node_gbps=1.0, network_gbps=float("nan"))
    batch = gnn.GnnSpec(model="gcn", feature_dim=8, hidden=4, classes=2, batch=4, fanouts=(2, 2))
    with pytest.raises(InvalidSpecError, match="full-graph"):
        partitioned_epoch(batch, (PartLoad(nodes=1, edges=1),), links=FAST, **RATES)


def test_cpu_sampling_and_the_step_it_bounds() -> None:
    assert gnn.cpu_sampling_s(2e6, edges_per_s=1e6, workers=4) == pytest.approx(0.5)
    assert gnn.bounded_step_s(0.2, 0.5, prefetch=True) == 0.5
    assert gnn.bounded_step_s(0.2, 0.5, prefetch=False) == pytest.approx(0.7)
    assert gnn.bounded_step_s(0.9, 0.5, prefetch=True) == 0.9
    with pytest.raises(InvalidSpecError, match="sampler workers"):
        gnn.cpu_sampling_s(1.0, edges_per_s=1.0, workers=0)
    with pytest.raises(InvalidSpecError, match="sampler rate"):
        gnn.cpu_sampling_s(1.0, edges_per_s=0.0, workers=1)
