"""``measure train --precision auto`` (the default): chosen on the device, as the training
verbs predict it, and said."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from typer.testing import CliRunner

import gpucast
from gpucast.app.measure import MeasureInferRequest, MeasureTrainRequest
from gpucast.cli.app import app
from gpucast.domain.errors import InvalidSpecError
from gpucast.measure import devices
from gpucast.store import open_store

runner = CliRunner()
QUICK = {"device": "cpu", "batch_size": 4, "max_time_s": 0.5, "min_samples": 3}


def _capability(monkeypatch: pytest.MonkeyPatch, major: int) -> None:
    monkeypatch.setattr(
        devices.torch.cuda, "get_device_properties", lambda device: SimpleNamespace(major=major)
    )
    monkeypatch.setattr(devices.torch.version, "hip", None)


@pytest.mark.parametrize(("major", "expected"), [(7, "fp32"), (8, "bf16"), (9, "bf16")])
def test_auto_is_bf16_from_compute_capability_8(
    monkeypatch: pytest.MonkeyPatch, major: int, expected: str
) -> None:
    _capability(monkeypatch, major)
    gpu = torch.device("cuda", 0)
    request = MeasureTrainRequest(workload="mlp")
    assert request.precision == "auto"
    assert request.precision_on((gpu,)) == expected
    note = request.precision_note(expected, (gpu,))
    assert note is not None and note.startswith(f"{expected} by auto, the --precision default")
    assert ("bf16 units" in note) and (("without" in note) == (expected == "fp32"))
    # a heterogeneous run measures in one precision: bf16 only where every device has units
    assert request.precision_on((gpu, torch.device("cpu"))) == "fp32"
    # a given precision is kept, and says nothing
    given = MeasureTrainRequest(workload="mlp", precision="fp16")
    assert given.precision_on((gpu,)) == "fp16" and given.precision_note("fp16", (gpu,)) is None


def test_measure_infer_keeps_fp32_by_default_and_takes_auto() -> None:
    assert MeasureInferRequest(workload="mlp").precision == "fp32"
    cpu = torch.device("cpu")
    request = MeasureInferRequest(workload="mlp", precision="auto")
    assert request.precision_on((cpu,)) == "fp32"
    note = request.precision_note("fp32", (cpu,))
    assert note is not None and note.startswith("fp32 by auto: the CPU")  # not the default


def test_a_default_cpu_run_is_fp32_stored_and_said(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    result = gpucast.measure_train("mlp", db=db, **QUICK)
    assert result.measurement is not None and result.measurement.spec.precision == "fp32"
    assert result.precision_note is not None and "by auto, the --precision default" in (
        result.precision_note
    )
    assert result.to_dict()["precision_note"] == result.precision_note
    with open_store(db) as store:
        [run] = store.list_runs()
    assert run.precision == "fp32"
    given = gpucast.measure_train("mlp", db=db, precision="bf16", **QUICK)
    assert given.precision_note is None and "precision_note" not in given.to_dict()


def test_the_cli_prints_what_auto_chose(tmp_path: Path) -> None:
    args = ["--db", str(tmp_path / "r.db"), "measure", "train", "mlp", "--device", "cpu",
            "--batch-size", "4", "--max-time-s", "0.5", "--min-samples", "3"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "precision: fp32 by auto, the --precision default: the CPU" in result.stderr
    result = runner.invoke(app, [*args, "--json", "--no-save"])
    assert json.loads(result.stdout)["precision"] == "fp32"


def test_a_precision_outside_the_choices_names_auto() -> None:
    with pytest.raises(InvalidSpecError, match=r"fp32, bf16, fp16, auto"):
        MeasureTrainRequest(workload="mlp", precision="fp8")


@pytest.mark.gpu
def test_auto_on_this_gpu_matches_its_compute_capability(tmp_path: Path) -> None:
    major = torch.cuda.get_device_properties(0).major
    result = gpucast.measure_train(
        "mlp", db=tmp_path / "r.db", device="cuda", batch_size=8, max_time_s=2.0, min_samples=3
    )
    assert result.measurement is not None
    assert result.measurement.spec.precision == ("bf16" if major >= 8 else "fp32")
