"""``predict train`` and ``simulate train`` price one worker's step alike (QA 34 B #4).

``simulate train --workload cifar-resnet32 --gpu K80`` used to take CM-DARE's measured
"ResNet-32" (221 ms, 1 worker + 1 PS, TensorFlow 1.10) while ``predict train`` priced He et al.'s
ResNet-32 (43.8 ms): CM-DARE's is Tensor2Tensor's ``resnet_cifar_32`` -- gpucast's
``cifar-resnet15 -o blocks=5,5,5``, 4x He's parameters -- so the measurement now prices that
architecture, in the setup it was measured in, and every other step is ``predict train``'s.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import gpucast
from gpucast.catalog import load_catalog
from gpucast.cli.app import app
from gpucast.domain.errors import InvalidInputError
from gpucast.domain.simulation import WorkerGroup
from gpucast.inputs.calibration import step_time_efficiency
from gpucast.inputs.transient import StepTime, step_times
from gpucast.inputs.workload import workload_inputs
from gpucast.store.datasets.transient import published_single_worker

K80 = [WorkerGroup(gpu="K80", count=1, region="us-east1", spot=False)]


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUCAST_DB", str(tmp_path / "empty.db"))  # no stored calibration
    monkeypatch.delenv("GPUCAST_SHARED_DATA", raising=False)


def _step(workload: str, software: str, batch: int = 128, **options: object) -> StepTime:
    work = workload_inputs(workload, None, "fp32", options=options)
    found = step_times(
        K80, work, {}, "ps-async", None, batch, "fp32", load_catalog(),
        efficiency=step_time_efficiency(software).value, software=software,
    )  # fmt: skip
    return found["K80"]


@pytest.mark.parametrize("software", ["pytorch", "tf1"])
def test_simulate_trains_worker_step_is_predict_trains(software: str) -> None:
    predicted = gpucast.predict_train(
        workload="cifar-resnet32", gpu="K80", batch_size=128, software=software
    )
    step = _step("cifar-resnet32", software)
    assert not step.includes_ps  # the cluster model adds the PS to it
    assert step.step_time_s == pytest.approx(predicted.step_time_s, rel=1e-9)
    assert "`gpucast predict train`" in step.source


def test_cmdare_resnet32_prices_its_own_architecture_in_its_own_setup() -> None:
    measured = _step("cifar-resnet15", "tf1", blocks="5,5,5")
    assert measured.includes_ps
    assert measured.step_time_s == pytest.approx(1 / 4.516)
    assert "TensorFlow 1.10 (--software tf1), batch 128, fp32" in measured.source
    # another stack or batch: the model's step, and the measurement named beside it
    for other in (_step("cifar-resnet15", "pytorch", blocks="5,5,5"),
                  _step("cifar-resnet15", "tf1", batch=64, blocks="5,5,5")):  # fmt: skip
        assert not other.includes_ps
        assert "measured in another setup (1 worker + 1 PS" in other.source


@pytest.mark.parametrize("blocks", ["5,5,5", (5, 5, 5), [5, 5, 5], " 5, 5,5"])
def test_published_speed_reads_the_options_however_spelled(blocks: object) -> None:
    assert published_single_worker("cifar-resnet15", [("blocks", blocks)], "K80") is not None


def test_published_speed_needs_the_architecture_and_gpu() -> None:
    assert published_single_worker("cifar-resnet15", [], "K80") is None  # Res15: [2,2,2]
    assert published_single_worker("cifar-resnet32", [], "K80") is None  # He et al.'s
    assert published_single_worker("cifar-resnet15", [("blocks", "5,5,5")], "P100") is None


def test_predict_train_says_what_it_prices_and_where_the_job_is() -> None:
    out = CliRunner().invoke(
        app, ["predict", "train", "cifar-resnet32", "--gpu", "K80", "--batch-size", "128"]
    )
    assert out.exit_code == 0, out.output
    assert "setup: one K80 alone, pytorch stack, no parameter server or all-reduce; " in out.stdout
    assert "`gpucast simulate train` adds them" in out.stdout


def test_a_cmdare_model_name_refuses_a_setup_its_measurement_did_not_run(
    shared_data: Path,
) -> None:
    """``simulate train --workload Res15 --batch-size 512`` took CM-DARE's measured step at
    batch 128, unchanged, without a word (the same 18.8 steps/s at either batch)."""
    work = workload_inputs("Res15", shared_data, "fp32")
    ask = ("ps-async", shared_data)
    found = step_times(K80, work, {}, *ask, 128, "fp32", load_catalog(), software="pytorch")
    assert "batch 128, fp32, TensorFlow 1.x, as measured" in found["K80"].source
    for batch, precision, field in ((512, "fp32", "batch-size"), (128, "fp16", "precision")):
        with pytest.raises(InvalidInputError) as caught:
            step_times(K80, work, {}, *ask, batch, precision, load_catalog(), software="pytorch")
        text = str(caught.value)
        assert text.startswith(f"{field}: Res15 is a CM-DARE model name")
        assert "--batch-size 128 --precision fp32" in text
