"""The data-parallel all-reduce inside a node at the tensor-parallel rule (issue #22): NVLink
through a switch at the datasheet link, bridged pairs beyond a pair and GPUs without NVLink at
NCCL's PCIe figures (catalog/data/pcie_allreduce.csv); ``plan train``'s catalog offers and a
cluster's, ``predict train --cluster`` and the step-time fit's MLPerf rows take the same figure."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import gpucast
from gpucast.catalog import load_catalog
from gpucast.catalog.pcie_allreduce import (
    data_parallel_gbps,
    pcie_allreduce_gb_per_s,
    pcie_group_gbps,
)
from gpucast.domain.catalog import PCIE_X16_GBIT_PER_S
from gpucast.inputs.clusters import load_cluster, node_link_gbps
from gpucast.plan.space import OfferTable

CLUSTER = """\
name: {name}
gpu: H100-PCIe
gpus_per_node: 8
nodes: 1
intra_node: {intra}
intra_node_gbps: {gbps}
inter_node_gbps: 400
network: infiniband
price_usd_per_gpu_hour: 2.0
"""


def _cluster(tmp_path: Path, name: str, intra: str, gbps: float) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(CLUSTER.format(name=name, intra=intra, gbps=gbps))
    return path


def test_nvlink_through_a_switch_keeps_the_datasheet_link() -> None:
    gpu = load_catalog().gpu("H100-SXM")
    assert gpu.interconnect_gbps is not None
    for n in (2, 4, 8):
        assert data_parallel_gbps(gpu, n) == gpu.interconnect_gbps * 8.0


def test_bridged_pairs_keep_the_bridge_for_a_pair_and_cross_pcie_beyond() -> None:
    gpu = load_catalog().gpu("H100-PCIe")  # bridged in pairs (catalog systems.csv)
    assert gpu.interconnect_gbps is not None
    assert data_parallel_gbps(gpu, 2) == gpu.interconnect_gbps * 8.0
    figure = pcie_allreduce_gb_per_s(gpu.pcie_generation, 8)
    assert figure is not None
    assert data_parallel_gbps(gpu, 8) == figure.value * 8.0 == pcie_group_gbps(5, 8)
    assert data_parallel_gbps(gpu, 8) < PCIE_X16_GBIT_PER_S[5] < gpu.interconnect_gbps * 8.0


@pytest.mark.parametrize("gpus", [4, 8])
def test_gpus_without_nvlink_reach_nccls_pcie_figure(gpus: int) -> None:
    gpu = load_catalog().gpu("L40S")
    assert gpu.interconnect_gbps is None
    rate = data_parallel_gbps(gpu, gpus)
    assert rate == pcie_group_gbps(gpu.pcie_generation, gpus)
    assert rate < PCIE_X16_GBIT_PER_S[gpu.pcie_generation]  # not the x16 link's nominal rate


def test_catalog_offers_carry_the_rule_into_the_planner() -> None:
    catalog = load_catalog()
    links = node_link_gbps(catalog)
    offers = [o for o in catalog.offers if o.gpu is not None and str(o.gpu) == "L40S"]
    several = [o for o in offers if o.gpus > 1]
    assert several, "the catalog offers L40S nodes of several GPUs"
    table = OfferTable.build(offers, [], {"L40S": 0}, links)
    rows = np.arange(len(offers))
    nominal = np.full(len(offers), PCIE_X16_GBIT_PER_S[5])
    got = table.intra_link_gbps(rows, nominal)
    for o, rate in zip(offers, got, strict=True):
        want = data_parallel_gbps(catalog.gpu("L40S"), o.gpus) if o.gpus > 1 else nominal[0]
        assert rate == want


def test_a_bridged_ring_is_priced_at_the_pcie_figure(tmp_path: Path) -> None:
    """8 bridged H100-PCIe cards: the ring's all-reduce is the one a PCIe node at NCCL's
    figure for 8 Gen5 GPUs prices; a pair keeps the bridge (a shorter all-reduce)."""
    bridged = _cluster(tmp_path, "bridged", "nvlink-bridge", 600)
    pcie = _cluster(tmp_path, "pcie", "pcie", pcie_group_gbps(5, 8) / 8.0)
    db = tmp_path / "empty.db"

    def allreduce_s(cluster: Path, gpus: int) -> float:
        dp = gpucast.predict_train(
            workload="resnet50", batch_size=64, cluster=str(cluster), gpus=gpus, db=db
        ).data_parallel
        assert dp is not None
        return dp.allreduce_s

    assert allreduce_s(bridged, 8) == pytest.approx(allreduce_s(pcie, 8), rel=1e-12)
    assert links_of(bridged)[("H100-PCIe", 2)] == 600 * 8.0
    assert allreduce_s(bridged, 2) < allreduce_s(pcie, 2)


def links_of(cluster: Path) -> dict[tuple[str, int], float]:
    catalog = load_catalog()
    return node_link_gbps(catalog, load_cluster(str(cluster), catalog))


def test_plan_train_and_predict_train_agree_on_a_bridged_cluster(tmp_path: Path) -> None:
    bridged = _cluster(tmp_path, "bridged", "nvlink-bridge", 600)
    db = tmp_path / "empty.db"
    plan = gpucast.plan_train(
        workload="cifar-resnet20", epochs=10, dataset_size=50000, cluster=str(bridged),
        strategy="ddp", batch_sizes=(64,), db=db,
    )  # fmt: skip
    assert {c.gpus for c in plan.candidates} >= {2, 4, 8}
    for c in plan.candidates:
        dp = gpucast.predict_train(
            workload="cifar-resnet20", batch_size=c.per_worker_batch, cluster=str(bridged),
            gpus=c.gpus, db=db,
        ).data_parallel  # fmt: skip
        assert dp is not None
        assert dp.step_time_s == pytest.approx(c.step_time_s, rel=1e-12)
        assert dp.exposed_allreduce_s == pytest.approx(
            c.breakdown_s["exposed_communication_s"], rel=1e-12, abs=1e-15
        )
