"""``--cluster`` through the Python API: plan, simulate and predict train on a user's cluster."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import gpucast
from gpucast.domain.errors import InvalidSpecError

WORK = {"workload": "cifar-resnet20", "epochs": 10, "dataset_size": 50000, "deadline": "6h"}

ONPREM = """\
name: onprem-h100
gpu: H100
gpus_per_node: 8
nodes: 4
intra_node: nvswitch
intra_node_gbps: 900
inter_node_gbps: 400
network: infiniband
provider: on-prem
"""


@pytest.fixture
def onprem(tmp_path: Path) -> Path:
    path = tmp_path / "onprem.yaml"
    path.write_text(ONPREM)
    return path


def test_plan_on_an_onprem_4x8_h100_cluster_without_a_price(onprem: Path) -> None:
    plan = gpucast.plan_train(**WORK, cluster=str(onprem))
    assert plan.candidates and plan.best is not None
    for c in plan.candidates:
        assert c.provider == "on-prem" and c.gpu == "H100-SXM"
        assert c.instance_type.startswith("onprem-h100")
        assert c.cost_usd == 0.0 and c.market == "on-demand"
        assert 1 <= c.gpus <= 32 and c.nodes <= 4
    assert max(c.gpus for c in plan.candidates) == 32  # the whole cluster, not --max-gpus 64
    cluster = plan.assumption("cluster")
    assert cluster is not None and cluster.source == str(onprem)
    assert plan.assumption("catalog") is None  # the cloud catalog was not searched
    assert any("no price given" in n for n in plan.notes)
    as_json = plan.to_dict()
    assert as_json["request"]["cluster"] == str(onprem)


def test_plan_on_the_catalog_shape_dgx_h100_with_two_nodes() -> None:
    plan = gpucast.plan_train(
        **WORK, cluster="DGX-H100", nodes=2, price_per_gpu_hour=2.5, strategy="ddp"
    )
    cluster = plan.assumption("cluster")
    assert cluster is not None and cluster.source == "catalog systems.csv: DGX-H100"
    assert "--nodes 2" in cluster.value and "$2.5 per GPU-hour" in cluster.value
    assert {c.instance_type for c in plan.candidates} <= {
        "DGX-H100",
        *(f"DGX-H100[{k} of 8]" for k in range(1, 8)),
    }
    assert max(c.gpus for c in plan.candidates) <= 16
    for c in plan.candidates:
        assert c.usd_per_hour == pytest.approx(2.5 * c.gpus)
    assert not plan.notes


def test_cluster_options_refuse_catalog_filters_and_need_a_cluster() -> None:
    with pytest.raises(InvalidSpecError, match=r"^region: filters the cloud catalog"):
        gpucast.plan_train(**WORK, cluster="DGX-H100", region="us-east1")
    with pytest.raises(InvalidSpecError, match=r"^nodes: describes a --cluster, and none is"):
        gpucast.plan_train(**WORK, nodes=2)
    with pytest.raises(InvalidSpecError, match=r"^allow-mixed: plans two GPU types"):
        gpucast.plan_train(**WORK, cluster="DGX-H100", allow_mixed=True)


def test_predict_train_takes_the_gpu_of_the_cluster(onprem: Path) -> None:
    on_cluster = gpucast.predict_train(workload="mlp", batch_size=32, cluster=str(onprem))
    named = gpucast.predict_train(workload="mlp", batch_size=32, gpu="H100")
    assert on_cluster.gpu == "H100-SXM" and on_cluster.step_time_s == named.step_time_s
    assert on_cluster.cluster is not None and on_cluster.cluster.source == str(onprem)
    assert on_cluster.to_dict()["cluster"]["name"] == "cluster"
    assert "the step above is one GPU's of its 32" in on_cluster.cluster.value
    assert "plan train with the same --cluster" in on_cluster.cluster.value
    assert on_cluster.data_parallel is not None and on_cluster.data_parallel.gpus == 32
    assert named.to_dict()["cluster"] is None
    with pytest.raises(InvalidSpecError, match=r"^gpu: the cluster onprem-h100 has H100-SXM"):
        gpucast.predict_train(workload="mlp", batch_size=32, cluster=str(onprem), gpu="A100")


@pytest.mark.parametrize("network", ["infiniband", "ethernet"])
def test_simulate_train_on_a_cluster_agrees_with_its_plan(tmp_path: Path, network: str) -> None:
    """Both price the all-reduce alike: nominal links on RDMA, the fitted TCP share else."""
    path = tmp_path / "priced.yaml"
    path.write_text(
        ONPREM.replace("network: infiniband", f"network: {network}")
        + "price_usd_per_gpu_hour: 2.0\n"
    )
    plan = gpucast.plan_train(**WORK, cluster=str(path), strategy="ddp")
    whole = [c for c in plan.candidates if c.instance_type == "onprem-h100"]
    assert whole
    for c in whole[:2]:
        sim = gpucast.simulate_train(
            cluster=str(path),
            workers=c.nodes,
            strategy="allreduce",
            workload=WORK["workload"],
            batch_size=c.per_worker_batch,
            steps=c.steps,
            runs=300,
        )
        assert float(np.median(sim.on_demand.duration_s)) == pytest.approx(c.time_s, rel=0.05)
        assert float(np.median(sim.on_demand.cost_usd)) == pytest.approx(c.cost_usd, rel=0.05)
        assert sim.assumptions[0].name == "cluster"
        assert sim.assumptions[0].source == str(path)
        assert "x 8 GPUs per node" in sim.sources["prices"]


def test_simulate_train_refuses_what_the_cluster_gives(onprem: Path) -> None:
    base = {"workload": "cifar-resnet20", "steps": 100, "cluster": str(onprem)}
    with pytest.raises(InvalidSpecError, match=r"^gpu: is given by the --cluster"):
        gpucast.simulate_train(**base, gpu="H100")
    with pytest.raises(InvalidSpecError, match=r"^workers: must be at most the 4 node"):
        gpucast.simulate_train(**base, workers=5)
    with pytest.raises(InvalidSpecError, match=r"^spot: the cluster onprem-h100 has no spot"):
        gpucast.simulate_train(**base, spot=True, strategy="allreduce")


def test_catalog_systems_lists_the_cluster_names() -> None:
    """Every shape `--cluster NAME` accepts, with its source; a GPU filter by alias; an unknown
    GPU names the close ones."""
    from gpucast.domain.errors import UnknownGpuError

    every = gpucast.catalog_systems()
    names = {s.name for s in every.systems}
    assert {"DGX-H100", "GB200-NVL72", "p5.48xlarge", "a4-highgpu-8g"} <= names
    assert all(row["source_url"].startswith("https://") for row in every.to_dict()["systems"])
    h100 = gpucast.catalog_systems(gpu="H100")
    assert h100.systems and {s.gpu for s in h100.systems} == {"H100-SXM"}
    assert len(h100.to_frame()) == len(h100.systems)
    with pytest.raises(UnknownGpuError):
        gpucast.catalog_systems(gpu="H1000")
    plan = gpucast.plan_train(**WORK, cluster=next(iter(h100.systems)).name)
    assert plan.best.gpu == "H100-SXM"


def test_a_budget_on_an_unpriced_cluster_is_refused(onprem: Path) -> None:
    """QA session 38: every plan of a cluster without a price costs $0, so --budget 0.01 was
    silently met; now one line naming the fix (a price, or no budget)."""
    with pytest.raises(InvalidSpecError, match="budget: cannot bind") as info:
        gpucast.plan_train(**WORK, cluster=str(onprem), budget=0.01)
    assert "--price-per-gpu-hour" in str(info.value) and info.value.exit_code == 2
    priced = gpucast.plan_train(**WORK, cluster=str(onprem), budget=1000, price_per_gpu_hour=2)
    assert priced.best is not None and priced.best.cost_usd <= 1000


def test_an_unpriced_cluster_keeps_the_front_on_gpu_hours() -> None:
    """QA2 #3: without a price every plan costs $0, so a front on $ was one point and the
    single-node layouts (3-8 GPUs) vanished; on GPU-hours the same rows as at $2/GPU-h stay."""
    work = {"workload": "resnet50", "cluster": "DGX-H100", "nodes": 2, "deadline": "24h"}
    free = gpucast.plan_train(**work)
    priced = gpucast.plan_train(**work, price_per_gpu_hour=2)
    gpus = sorted(c.gpus for c in free.candidates)
    assert gpus == sorted(c.gpus for c in priced.candidates)
    assert {2, 8, 16} <= set(gpus) and len(gpus) >= 8
    assert len(free.pareto) == len(priced.pareto) == len(gpus)  # every layout on the front
    assert free.best is not None and priced.best is not None
    assert free.best.gpus == priced.best.gpus  # the pick: fewest GPU-hours = cheapest at $2
    assert any("'cheapest' ranks by GPU-hours" in n for n in free.notes)


@pytest.mark.parametrize("limit", [1, 6])
def test_the_limit_hint_shows_only_when_rows_are_hidden(limit: int) -> None:
    """QA2 #12: --limit 6 showed all 8 rows (front and pick are always shown) and still said
    '--limit N shows more of the 8 candidates'."""
    from typer.testing import CliRunner

    from gpucast.cli.app import app

    argv = ["plan", "train", "--workload", "resnet50", "--cluster", "DGX-H100", "--nodes", "2",
            "--deadline", "24h", "--price-per-gpu-hour", "2", "--limit", str(limit)]  # fmt: skip
    result = CliRunner().invoke(app, argv, terminal_width=200)
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if "H100-SXM │" in line]
    plan = gpucast.plan_train(
        workload="resnet50", cluster="DGX-H100", nodes=2, deadline="24h", price_per_gpu_hour=2
    )
    candidates = len(plan.candidates)
    assert len(rows) == candidates  # every row is on the front
    assert "--limit N shows more" not in result.output
