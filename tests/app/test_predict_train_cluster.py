"""``predict train --cluster``: the synchronous data-parallel step on the cluster's GPUs, the
same figure ``plan train`` gives that layout; one GPU keeps the old figure; bad ``--gpus``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import gpucast
from gpucast.cli.app import app
from gpucast.domain.errors import InvalidSpecError

ONPREM = """\
name: onprem
gpu: H100-SXM
gpus_per_node: 8
nodes: 4
intra_node: nvswitch
intra_node_gbps: 900
inter_node_gbps: 400
price_usd_per_gpu_hour: 2.5
"""

runner = CliRunner()


@pytest.fixture
def onprem(tmp_path: Path) -> Path:
    path = tmp_path / "onprem.yaml"
    path.write_text(ONPREM)
    return path


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "empty.db"  # no stored measurement: every figure uncalibrated


def test_every_layout_plan_train_prices_is_the_step_predict_train_gives(
    onprem: Path, db: Path
) -> None:
    """A consistency test: plan train's DDP candidates on the cluster (1..8 GPUs of a node,
    whole nodes) against predict train at the same GPUs and per-GPU batch, both at their
    default precision (auto: bf16 on the cluster's H100s)."""
    plan = gpucast.plan_train(
        workload="cifar-resnet20", epochs=10, dataset_size=50000, cluster=str(onprem),
        strategy="ddp", batch_sizes=(64,), db=db,
    )  # fmt: skip
    assert {c.gpus for c in plan.candidates} >= {1, 4, 8, 16, 32}
    for c in plan.candidates:
        dp = gpucast.predict_train(
            workload="cifar-resnet20", batch_size=c.per_worker_batch, cluster=str(onprem),
            gpus=c.gpus, db=db,
        ).data_parallel  # fmt: skip
        assert dp is not None
        assert dp.step_time_s == pytest.approx(c.step_time_s, rel=1e-12)
        assert dp.compute_s == pytest.approx(c.breakdown_s["compute_s"], rel=1e-12)
        assert dp.exposed_allreduce_s == pytest.approx(
            c.breakdown_s["exposed_communication_s"], rel=1e-12, abs=1e-15
        )
        assert dp.global_batch == c.global_batch and dp.nodes == c.nodes
        assert dp.usd_per_hour == pytest.approx(c.usd_per_hour)


@pytest.mark.parametrize("nodes", [1, 2, 4])
def test_simulate_train_runs_whole_nodes_at_the_same_step(
    onprem: Path, db: Path, nodes: int
) -> None:
    """simulate train's on-demand run at the central step time: each extra million steps
    takes a million of predict train's data-parallel steps (the start-up cancels), both at
    their default precision (auto)."""
    dp = gpucast.predict_train(
        workload="resnet50", batch_size=256, cluster=str(onprem), gpus=8 * nodes, db=db
    ).data_parallel
    assert dp is not None

    def duration_s(steps: int) -> float:
        sim = gpucast.simulate_train(
            cluster=str(onprem), workers=nodes, strategy="allreduce", workload="resnet50",
            batch_size=256, steps=steps, runs=20, db=db,
        )  # fmt: skip
        return sim.on_demand.central(sim.on_demand.duration_s)

    per_step = (duration_s(2_000_000) - duration_s(1_000_000)) / 1_000_000
    assert per_step == pytest.approx(dp.step_time_s, rel=1e-9)


def test_the_default_is_the_whole_cluster_and_is_said(onprem: Path, db: Path) -> None:
    result = gpucast.predict_train(workload="resnet50", batch_size=256, cluster=str(onprem), db=db)
    dp = result.data_parallel
    assert dp is not None and dp.gpus == 32 and dp.gpus_default
    assert (dp.nodes, dp.gpus_per_node, dp.global_batch) == (4, 8, 32 * 256)
    assert "default: all of them" in dp.gpus_text()
    # the step is compute plus the exposed all-reduce; samples/s and cost follow from it
    assert dp.step_time_s == pytest.approx(dp.compute_s + dp.exposed_allreduce_s)
    assert dp.step_lower_s < dp.step_time_s < dp.step_upper_s
    assert dp.samples_per_s == pytest.approx(32 * 256 / dp.step_time_s)
    assert dp.usd_per_hour == pytest.approx(32 * 2.5)
    assert dp.usd_per_million_samples == pytest.approx(80.0 / 3600 / dp.samples_per_s * 1e6)
    assert 0.0 < dp.scaling_efficiency < 1.0  # the all-reduce costs something
    assert dp.one_gpu_samples_per_s == pytest.approx(result.samples_per_s)
    assert dp.validation.model == "allreduce" and "32 GPUs" in dp.validation.regime
    # the one-GPU figure stays where it was (to rounding: two sums of the same terms)
    assert result.step_time_s == pytest.approx(dp.compute_s, rel=1e-12)
    given = gpucast.predict_train(
        workload="resnet50", batch_size=256, cluster=str(onprem), gpus=32, db=db
    ).data_parallel
    assert given is not None and not given.gpus_default
    assert given.step_time_s == dp.step_time_s


def test_more_nodes_more_allreduce(onprem: Path, db: Path) -> None:
    steps = {
        n: gpucast.predict_train(
            workload="resnet50", batch_size=256, cluster=str(onprem), gpus=n, db=db
        ).data_parallel
        for n in (8, 16, 32)
    }
    one_node, two, four = (steps[n] for n in (8, 16, 32))
    assert one_node is not None and two is not None and four is not None
    assert one_node.compute_s == two.compute_s == four.compute_s
    assert one_node.allreduce_s < two.allreduce_s <= four.allreduce_s
    assert one_node.step_time_s < two.step_time_s <= four.step_time_s
    assert one_node.scaling_efficiency > two.scaling_efficiency >= four.scaling_efficiency


def test_one_gpu_is_the_old_figure(onprem: Path, db: Path) -> None:
    one = gpucast.predict_train(
        workload="resnet50", batch_size=256, cluster=str(onprem), gpus=1, db=db
    )
    named = gpucast.predict_train(workload="resnet50", batch_size=256, gpu="H100", db=db)
    dp = one.data_parallel
    assert dp is not None and dp.allreduce_s == 0.0 and dp.exposed_allreduce_s == 0.0
    assert dp.step_time_s == pytest.approx(named.step_time_s, rel=1e-12)
    assert dp.step_lower_s == pytest.approx(named.estimate.lower, rel=1e-9)
    assert dp.step_upper_s == pytest.approx(named.estimate.upper, rel=1e-9)
    assert dp.scaling_efficiency == pytest.approx(1.0)


def test_without_a_cluster_nothing_changes(db: Path) -> None:
    """The single-GPU output: the same lines as before --cluster priced a data-parallel step,
    and the JSON's one new key is empty."""
    result = runner.invoke(
        app,
        ["--db", str(db), "predict", "train", "--workload", "mlp", "--batch-size", "32",
         "--gpu", "A100"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    heads = [line.split(":")[0].strip() for line in result.output.splitlines() if line[:2] == "  "]
    labels = [h for h in heads if h in {"calibration", "validated", "precision", "memory"}]
    assert labels == ["calibration", "validated", "precision", "memory"]
    assert "data-parallel (DDP)" not in result.output and "cluster:" not in result.output
    assert not any(line.startswith("  step ") for line in result.output.splitlines())
    as_json = runner.invoke(
        app,
        ["--db", str(db), "predict", "train", "--workload", "mlp", "--batch-size", "32",
         "--gpu", "A100", "--json"],
    )  # fmt: skip
    data = json.loads(as_json.output)
    assert data["data_parallel"] is None and data["cluster"] is None
    api = gpucast.predict_train(workload="mlp", batch_size=32, gpu="A100", db=db)
    assert data["step_time_s"]["value"] == api.step_time_s


def test_cli_text_and_json(onprem: Path, db: Path) -> None:
    argv = ["--db", str(db), "predict", "train", "--workload", "resnet50", "--batch-size", "256",
            "--cluster", str(onprem), "--gpus", "16"]  # fmt: skip
    text = runner.invoke(app, argv)
    assert text.exit_code == 0, text.output
    assert "data-parallel (DDP) on 16 of the cluster's 32 GPUs (2 nodes x 8" in text.output
    assert "--gpus 16" in text.output and "exposed all-reduce" in text.output
    assert "scaling efficiency" in text.output and "per 1M samples" in text.output
    assert "all-reduce validated:" in text.output
    as_json = runner.invoke(app, [*argv, "--json"])
    dp = json.loads(as_json.output)["data_parallel"]
    api = gpucast.predict_train(
        workload="resnet50", batch_size=256, cluster=str(onprem), gpus=16, db=db
    ).data_parallel
    assert api is not None and dp == json.loads(json.dumps(api.to_dict()))
    assert set(dp["breakdown_s"]) == {
        "compute_s", "offload_s", "allreduce_s", "exposed_allreduce_s", "hidden_allreduce_s"
    }  # fmt: skip


def test_a_cluster_without_a_price_has_no_cost(onprem: Path, db: Path) -> None:
    path = onprem.with_name("free.yaml")
    path.write_text(ONPREM.replace("price_usd_per_gpu_hour: 2.5\n", ""))
    dp = gpucast.predict_train(
        workload="mlp", batch_size=32, cluster=str(path), gpus=8, db=db
    ).data_parallel
    assert dp is not None and dp.usd_per_hour is None and dp.usd_per_million_samples is None
    assert "$" not in "\n".join(dp.lines())


def test_catalog_shape_with_nodes_and_price_flags(db: Path) -> None:
    dp = gpucast.predict_train(
        workload="mlp", batch_size=32, cluster="DGX-H100", nodes=2, price_per_gpu_hour=3.0,
        db=db,
    ).data_parallel  # fmt: skip
    assert dp is not None and dp.gpus == 16 and dp.nodes == 2
    assert dp.usd_per_hour == pytest.approx(16 * 3.0)
    assert dp.collective.startswith("RDMA")  # DGX-H100's InfiniBand


@pytest.mark.parametrize(
    ("gpus", "message"),
    [
        (0, r"^gpus: must be >= 1"),
        (-3, r"^gpus: must be >= 1"),
        (33, r"^gpus: exceeds the 32 GPUs of the cluster onprem"),
        (12, r"^gpus: is not a whole number of 8-GPU nodes .*use --gpus 8 or 16"),
    ],
)
def test_bad_gpus(onprem: Path, gpus: int, message: str) -> None:
    with pytest.raises(InvalidSpecError, match=message):
        gpucast.predict_train(workload="mlp", batch_size=32, cluster=str(onprem), gpus=gpus)


def test_gpus_without_a_cluster_is_refused_on_one_line() -> None:
    with pytest.raises(InvalidSpecError, match=r"^gpus: prices a data-parallel step on a "):
        gpucast.predict_train(workload="mlp", batch_size=32, gpu="A100", gpus=8)
    result = runner.invoke(
        app,
        ["predict", "train", "--workload", "mlp", "--batch-size", "32", "--gpu", "A100",
         "--gpus", "8"],
    )  # fmt: skip
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "gpus" in lines[0] and "--cluster" in lines[0]


def test_a_user_model_on_the_cluster(
    onprem: Path, db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``module:factory`` workloads price on the cluster as built-ins do."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # profile, don't reuse
    model = Path(__file__).resolve().parents[1] / "workloads" / "example_user_model.py"
    result = gpucast.predict_train(
        workload=f"{model}:build", batch_size=16, cluster=str(onprem), gpus=16, db=db
    )
    dp = result.data_parallel
    assert dp is not None and dp.gpus == 16 and dp.global_batch == 16 * 16
    assert dp.allreduce_s > 0 and dp.step_time_s > dp.compute_s == result.step_time_s


def test_one_nvlink_node_never_reaches_its_nics(tmp_path: Path, db: Path) -> None:
    """8 GPUs of one NVSwitch node paid the TCP fit's 4.79 ms a step (none hidden) when the
    cluster's NICs were TCP, 0.2 ms with InfiniBand NICs: a one-node all-reduce runs over
    NVLink whatever the NICs (QA 39 R #8). Two nodes do cross them."""
    tcp, rdma = tmp_path / "tcp.yaml", tmp_path / "ib.yaml"
    tcp.write_text(ONPREM)  # no network: line: TCP NICs
    rdma.write_text(ONPREM + "network: infiniband\n")

    def step(cluster: Path, gpus: int) -> float:
        dp = gpucast.predict_train(
            workload="resnet50", batch_size=256, cluster=str(cluster), gpus=gpus, db=db
        ).data_parallel
        assert dp is not None
        return dp.exposed_allreduce_s

    one_tcp, one_ib = step(tcp, 8), step(rdma, 8)
    assert one_tcp == pytest.approx(one_ib, rel=1e-9) and one_tcp < 1e-3
    assert step(tcp, 16) > 10 * step(rdma, 16)
