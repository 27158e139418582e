"""The planner on a user's cluster: its offers, its links, its price (synthetic, no torch)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from plan_factories import DAY, URL, context, request

from gpucast.domain.catalog import PCIE_X16_GBIT_PER_S
from gpucast.domain.systems import ClusterSpec, NodeShape
from gpucast.plan.space import build_space, cluster_offers
from gpucast.plan.train import plan_training, search, with_cluster


def shape(**changes: Any) -> NodeShape:
    base: dict[str, Any] = {
        "name": "lab",
        "gpu": "FAST",
        "gpus_per_node": 8,
        "intra_node": "nvswitch",
        "intra_node_gbps": 300.0,
        "inter_node_gbps": 100.0,
        "network": "ethernet",
        "cpu": "",
        "source_url": URL,
        "as_of": DAY,
    }
    base.update(changes)
    return NodeShape(**base)


def cluster(nodes: int = 4, **changes: Any) -> ClusterSpec:
    shape_keys = {"intra_node", "intra_node_gbps", "inter_node_gbps", "network", "gpus_per_node"}
    shaped = {k: v for k, v in changes.items() if k in shape_keys}
    rest = {k: v for k, v in changes.items() if k not in shape_keys}
    return ClusterSpec(shape=shape(**shaped), nodes=nodes, source="lab.yaml", **rest)


def test_cluster_offers_are_gpu_counts_of_a_node_then_whole_nodes() -> None:
    ctx = context()
    table = cluster_offers(cluster(price_usd_per_gpu_hour=2.0), ctx.catalog.gpu("FAST"), 0)
    assert list(table.gpus_per_node) == [1, 2, 3, 4, 5, 6, 7, 8]
    assert list(table.max_nodes) == [1] * 7 + [4]  # type: ignore[arg-type]
    assert table.instance_type[0] == "lab[1 of 8]" and table.instance_type[-1] == "lab"
    assert table.on_demand_usd_per_hour.tolist() == [2.0 * c for c in range(1, 9)]
    assert np.isnan(table.spot_usd_per_hour).all()  # no spot price: no spot market
    assert table.intra_node_gbps.tolist() == [300.0 * 8] * 8  # type: ignore[union-attr]
    assert table.network_gbps.tolist() == [100.0] * 8
    assert table.cpu_usd_per_hour.tolist() == [0.0] * 8  # PS on the cluster's own hosts


def test_nvlink_bridges_cross_pcie_beyond_a_pair() -> None:
    ctx = context()
    spec = cluster(intra_node="nvlink-bridge", intra_node_gbps=600.0)
    table = cluster_offers(spec, ctx.catalog.gpu("FAST"), 0)
    pcie = PCIE_X16_GBIT_PER_S[3]
    assert table.intra_node_gbps.tolist()[:3] == [4800.0, 4800.0, pcie]  # type: ignore[union-attr]


def test_the_space_stays_inside_the_cluster() -> None:
    ctx = context()
    spec = cluster(nodes=3)
    table = cluster_offers(spec, ctx.catalog.gpu("FAST"), 0)
    space, _ = build_space(request(max_gpus=64, allow_spot=False), table)
    nodes = space.nodes
    whole = space.offer == len(table) - 1
    assert nodes[whole].max() == 3 and nodes[~whole].max() == 1
    assert space.workers.max() == 24


def test_plan_on_a_cluster_without_price_costs_nothing_and_says_so() -> None:
    ctx = replace(context(), cluster=cluster())
    plan = plan_training(request(), ctx)  # max_gpus 16 given: 2 of the 4 nodes at most
    assert plan.candidates
    for c in plan.candidates:
        assert (c.provider, c.region) == ("on-prem", "local")
        assert c.market == "on-demand" and c.cost_usd == 0.0
        assert c.gpus <= 16 and c.nodes <= 2
        assert "no price given: cost shown as $0" in c.notes
    assert any("no price given" in n for n in plan.notes)
    best = plan.best
    assert best is not None  # 'cheapest' without prices: the fewest GPU-hours
    assert best.gpu_hours == min(c.gpu_hours for c in plan.candidates)


def test_plan_on_a_priced_cluster_with_spot() -> None:
    spec = cluster(nodes=2, price_usd_per_gpu_hour=2.0, spot_usd_per_gpu_hour=0.5)
    plan = plan_training(request(mc_runs=200), replace(context(), cluster=spec))
    markets = {c.market for c in plan.candidates}
    assert markets == {"on-demand", "spot"}
    od = [c for c in plan.candidates if c.market == "on-demand"]
    for c in od:
        assert c.usd_per_hour == pytest.approx(2.0 * c.gpus)
        assert c.cost_usd == pytest.approx(c.usd_per_hour * c.time_s / 3600.0)
    assert not plan.notes


def _one_node_ddp_comm(spec: ClusterSpec) -> float:
    ctx = replace(context(), cluster=spec)
    res = search(request(strategies=("ddp",), batch_size=32, allow_spot=False), ctx)
    space = res.space
    row = np.flatnonzero((space.workers == 8) & (space.nodes == 1))
    assert row.size == 1
    return float(res.evaluation.comm_s[row[0]])


def test_the_clusters_intra_node_figure_wins_over_the_gpus() -> None:
    # FAST's datasheet link is 300 GB/s NVLink; the same GPUs on a PCIe-only node are slower
    fast = _one_node_ddp_comm(cluster(intra_node_gbps=300.0))
    slow = _one_node_ddp_comm(cluster(intra_node="pcie", intra_node_gbps=16.0))
    assert slow > 10 * fast


def test_rdma_networks_use_the_rdma_constants() -> None:
    ib = replace(context(), cluster=cluster(network="infiniband"))
    assert {"lab", "lab[4 of 8]"} <= with_cluster(ib).perf.rdma_instances
    eth = replace(context(), cluster=cluster(network="ethernet"))
    assert with_cluster(eth).perf.rdma_instances == eth.perf.rdma_instances
