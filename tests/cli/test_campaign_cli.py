"""`gpucast campaign run|status` and `measure train --distributed` through Typer's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpucast.cli import campaign
from gpucast.cli.app import app

runner = CliRunner()


@pytest.fixture(scope="module", autouse=True)
def _registered() -> None:
    # cli/verbs.py registers the verb once the lead adds its line; until then, register here.
    if not any(g.name == "campaign" for g in app.registered_groups):
        app.add_typer(campaign.app, name="campaign")


def test_run_then_status_as_json(tmp_path: Path) -> None:
    sweep = tmp_path / "tiny.yaml"
    sweep.write_text(
        "workloads: [mlp]\nbatch_sizes: [2, 4]\ndevices: [cpu]\n"
        "settings: {max_time_s: 0.2, min_samples: 3, target_ci: 0.5}\n"
    )
    db = tmp_path / "c.db"
    result = runner.invoke(app, ["--db", str(db), "campaign", "run", str(sweep), "--json"])
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["campaign"] == "tiny" and data["done"] == 2 and data["status"] == "done"
    status = runner.invoke(app, ["--db", str(db), "campaign", "status", "--campaign", "tiny"])
    assert status.exit_code == 0 and "done" in status.stdout
    listed = runner.invoke(app, ["--db", str(db), "runs", "list", "--json"])
    assert listed.exit_code == 0


def test_bad_sweep_is_exit_2_with_key_and_line(tmp_path: Path) -> None:
    sweep = tmp_path / "bad.yaml"
    sweep.write_text("workloads: [mlp]\nbatch_sizes: [2]\nstrategy: [ddp]\n")
    result = runner.invoke(app, ["--db", str(tmp_path / "c.db"), "campaign", "run", str(sweep)])
    assert result.exit_code == 2
    assert "line 3" in result.stderr and "'strategy'" in result.stderr
    assert not (tmp_path / "c.db").exists()


def test_status_needs_exactly_one_selector(tmp_path: Path) -> None:
    result = runner.invoke(app, ["--db", str(tmp_path / "c.db"), "campaign", "status"])
    assert result.exit_code == 2 and "--campaign" in result.stderr


def test_measure_train_distributed_json(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    args = ["--db", str(db), "measure", "train", "mlp", "--distributed", "ddp", "--nproc", "2",
            "--device", "cpu", "--batch-sizes", "4,8", "--steps", "3", "--warmup-steps", "1",
            "--json"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    for key in ("compute_s", "communication_s", "exposed_communication_s", "bytes_per_step"):
        assert data[key] >= 0
    assert data["step_time_s"]["median"] > 0 and data["step_time_s"]["mean"] > 0
    assert [r["batch_size"] for r in data["ranks"]] == [4, 8]
    assert all(r["median_step_s"] > 0 for r in data["ranks"])
    from gpucast.store import Store
    from gpucast.store.campaigns import load_distributed

    with Store(db) as store:
        (stored,) = load_distributed(store)
    assert stored.to_dict()["step_times_s"] == data["step_times_s"]


def test_measure_train_distributed_bad_option_is_exit_2(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["measure", "train", "mlp", "--distributed", "ps", "--nproc", "2", "--ps-shards", "2"]
    )
    assert result.exit_code == 2 and "ps_shards" in result.stderr
