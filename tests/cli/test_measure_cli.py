"""`gpucast measure` through Typer's CliRunner, on the CPU with the small mlp workload."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from gpucast.cli.app import app
from gpucast.store import open_store

runner = CliRunner()
QUICK = ["--device", "cpu", "--batch-size", "4", "--max-time-s", "0.5", "--min-samples", "5"]


def test_json_output_is_saved_and_complete(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    result = runner.invoke(app, ["--db", str(db), "measure", "train", "mlp", *QUICK, "--json"])
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["workload"] == "mlp" and data["mode"] == "train" and data["device"] == "cpu"
    assert data["batch_size"] == 4 and data["n_samples"] == len(data["step_times_s"]) >= 5
    assert data["median_s"] > 0 and data["ci_low_s"] <= data["mean_s"] <= data["ci_high_s"]
    assert data["environment"]["torch_version"] == torch.__version__
    with open_store(db) as store:
        stored = store.get_measurement(data["run_id"])
    assert stored.step_times_s == tuple(data["step_times_s"])


def test_table_output_and_default_store(tmp_path: Path) -> None:
    # no --db: the autouse fixture points $GPUCAST_DB into tmp_path
    result = runner.invoke(app, ["measure", "infer", "mlp", *QUICK, "--precision", "bf16"])
    assert result.exit_code == 0, result.stderr
    for label in ("median step", "mean step", "CI of mean", "p5 / p95", "IQR", "samples/s"):
        assert label in result.stdout
    assert "saved as run 1" in result.stderr
    with open_store(tmp_path / "gpucast-test.db") as store:
        [run] = store.list_runs()
    assert (run.mode, run.precision) == ("infer", "bf16")


def test_no_save_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    args = ["--db", str(db), "measure", "train", "mlp", *QUICK, "--no-save", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["run_id"] is None
    assert not db.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_on_a_cpu_machine_is_one_clear_line() -> None:
    result = runner.invoke(app, ["measure", "train", "mlp", "--device", "cuda"])
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1
    assert "no CUDA device" in lines[0] and "--device cpu" in lines[0]


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["--batch-size", "abc"], "batch-size"),
        (["--batch-size", "0"], "batch-size"),
        (["--batch-size", "-3"], "batch-size"),
        (["--target-ci", "-1"], "target-ci"),
        (["--max-time-s", "0"], "max-time-s"),
        (["--max-time-s", "soon"], "max-time-s"),
        (["--min-samples", "1"], "min-samples"),
        (["--precision", "fp8"], "precision"),
        (["--device", "tpu"], "device"),
    ],
)
def test_malformed_options_exit_2_naming_the_field(
    tmp_path: Path, args: list[str], text: str
) -> None:
    db = tmp_path / "runs.db"
    result = runner.invoke(app, ["--db", str(db), "measure", "train", "mlp", *args])
    assert result.exit_code == 2
    assert text in result.stderr
    assert not db.exists()  # bad input is rejected before the store is touched


def test_unknown_workload_suggests_close_matches(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    result = runner.invoke(app, ["--db", str(db), "measure", "train", "mpl", *QUICK])
    assert result.exit_code == 2
    assert "unknown workload 'mpl'" in result.stderr and "mlp" in result.stderr
    assert not db.exists()


def test_a_corrupt_db_is_refused_before_measuring_and_left_alone(tmp_path: Path) -> None:
    db = tmp_path / "notes.txt"
    db.write_text("not a database\n")
    result = runner.invoke(app, ["--db", str(db), "measure", "train", "mlp", *QUICK])
    assert result.exit_code == 2
    assert "not an SQLite database" in result.stderr
    assert db.read_text() == "not a database\n"


def test_help_lists_both_modes() -> None:
    result = runner.invoke(app, ["measure", "--help"])
    assert result.exit_code == 0
    assert "train" in result.stdout and "infer" in result.stdout


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
    assert data["run_id"] is not None


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["--distributed", "ps", "--nproc", "2", "--ps-shards", "2"], "ps-shards"),
        (["--distributed", "mpi"], "distributed"),
        (["--distributed", "ddp", "--batch-sizes", "4,x"], "batch-sizes"),
        (["--distributed", "ddp", "--nproc", "2", "--batch-sizes", "4,8,16"], "batch-sizes"),
        (["--distributed", "ddp", "--devices", "tpu"], "device"),
        (["--distributed", "ps", "--precision", "fp16"], "precision"),
    ],
)
def test_measure_train_distributed_bad_option_is_exit_2(
    tmp_path: Path, args: list[str], text: str
) -> None:
    db = tmp_path / "runs.db"
    result = runner.invoke(app, ["--db", str(db), "measure", "train", "mlp", *args])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and text in lines[0]
    assert not db.exists()


def test_the_workload_is_positional_or_an_option_alike(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    base = ["--db", str(db), "measure", "infer"]
    for given in (["mlp"], ["--workload", "mlp"], ["mlp", "--workload", "mlp"]):
        result = runner.invoke(app, [*base, *given, *QUICK, "--no-save", "--json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["workload"] == "mlp"
    for argv, text in (
        (["mlp", "--workload", "resnet18"], "workload: is given twice: 'mlp' as the argument"),
        ([], "workload: is required; e.g. --workload mlp"),
    ):
        result = runner.invoke(app, [*base, *argv, *QUICK])
        assert result.exit_code == 2, result.output
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and text in lines[0], result.stderr
    assert not db.exists()


@pytest.mark.parametrize(
    ("args", "text"),
    [
        # distributed-only options are refused when given, at their default value too
        (["--steps", "20"], "steps: applies to distributed runs only (got 20)"),
        (["--warmup-steps", "5"], "single-process run measures until --target-ci"),
        (["--nproc", "2"], "nproc: applies to distributed runs only"),
        (["--sync"], "sync: applies to distributed runs only"),
        # and the single-process stop and the PS flags under a run that does not read them
        (["--distributed", "ddp", "--max-time-s", "5"], "max-time-s: applies to single-process"),
        (["--distributed", "ddp", "--min-samples", "3"], "min-samples: applies to single-proc"),
        (["--distributed", "ddp", "--async"], "async: applies to --distributed ps only"),
        (["--distributed", "fsdp", "--ps-shards", "1"], "ps-shards: applies to --distributed ps"),
    ],
)
def test_an_option_its_mode_does_not_read_is_refused(args: list[str], text: str) -> None:
    result = runner.invoke(app, ["measure", "train", "mlp", "--no-save", *args])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and text in lines[0], result.stderr


def test_a_distributed_run_without_its_flags_takes_their_defaults() -> None:
    from gpucast.app.measure import MeasureTrainRequest

    config = MeasureTrainRequest(workload="mlp", distributed="ddp").distributed_config()
    assert config is not None
    assert (config.nproc_per_node, config.nnodes, config.steps, config.warmup_steps) == (
        2,
        1,
        20,
        5,
    )
    assert config.sync and config.ps_shards == 1 and config.master_addr == "127.0.0.1"
    given = MeasureTrainRequest(workload="mlp", distributed="ps", steps=7, sync=False)
    config = given.distributed_config()
    assert config is not None and config.steps == 7 and not config.sync


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["measure", "train", "mlp", "--batch-size", "0"], "batch-size"),
        (["measure", "infer", "mlp", "--target-ci", "0"], "target-ci"),
        (["measure", "train", "mlp", "--max-time-s", "0"], "max-time-s"),
        (["measure", "train", "mlp", "--min-samples", "1"], "min-samples"),
        (["measure", "train", "mlp", "--distributed", "ddp", "--nproc", "0"], "nproc"),
        (["measure", "train", "mlp", "--distributed", "ddp", "--steps", "0"], "steps"),
        (["profile", "resnet50", "--batch-size", "0"], "batch-size"),
        (["predict", "gnn", "--model", "sage", "--gpu", "A100-80GB", "--nodes", "0"], "nodes"),
        (["plan", "embeddings", "--gpu", "A100-80GB", "--gpus", "0"], "gpus"),
    ],
)
def test_a_domain_check_names_the_flag_as_typed_and_a_fix(
    tmp_path: Path, args: list[str], flag: str
) -> None:
    """QA 34 #7: checks inside domain objects named the Python field (``batch_size:``)
    without a fix; the request now names the flag typed and its example."""
    result = runner.invoke(app, ["--db", str(tmp_path / "runs.db"), *args])
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: {flag}: "), lines[0]
    assert f"; e.g. --{flag} " in lines[0], lines[0]


def test_a_slow_minimum_is_warned_once() -> None:
    # QA 40 E: "a step takes ... past --max-time-s" was printed live, then again under the table
    quick = ["--device", "cpu", "--batch-size", "4", "--max-time-s", "0.001", "--min-samples", "3"]
    result = runner.invoke(app, ["measure", "train", "mlp", *quick])
    assert result.exit_code == 0, result.stderr
    assert (result.stdout + result.stderr).count("past --max-time-s 0.001 s") == 1
    data = json.loads(runner.invoke(app, ["measure", "train", "mlp", *quick, "--json"]).stdout)
    assert any("past --max-time-s" in w for w in data["warnings"])  # kept in the result
