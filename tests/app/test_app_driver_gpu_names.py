"""A stored run keeps the GPU name its driver reported (``NVIDIA H100 80GB HBM3``); that
name calibrates ``predict train`` as the catalog's own name does, and a board the catalog
lacks calibrates nothing and is named as such."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_app_predict import WORKLOAD, store_measurement

from gpucast.app.predict import predict_train


@pytest.mark.parametrize(
    ("reported", "row"),
    [("NVIDIA H100 80GB HBM3", "H100-SXM"), ("NVIDIA A100-SXM4-80GB", "A100-80GB")],
)
def test_a_run_named_by_the_driver_calibrates_as_the_catalog_name_does(
    tmp_path: Path, reported: str, row: str
) -> None:
    driver, canonical = tmp_path / "driver.db", tmp_path / "canonical.db"
    store_measurement(driver, batch=32, step_s=0.004, gpu_name=reported)
    store_measurement(canonical, batch=32, step_s=0.004, gpu_name=row)
    got = predict_train(workload=WORKLOAD, precision="fp32", batch_size=32, gpu="H100", db=driver)
    want = predict_train(
        workload=WORKLOAD, precision="fp32", batch_size=32, gpu="H100", db=canonical
    )
    bare = predict_train(
        workload=WORKLOAD, precision="fp32", batch_size=32, gpu="H100", db=tmp_path / "x.db"
    )
    assert got.calibrated and "store run #1" in got.calibration_source
    assert got.step_time_s == pytest.approx(want.step_time_s, rel=1e-12)
    assert got.step_time_s != pytest.approx(bare.step_time_s)


def test_one_board_spelt_two_ways_is_one_device_across_batches(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    store_measurement(db, batch=8, step_s=0.002, gpu_name="A100-SXM4-40GB")
    store_measurement(db, batch=64, step_s=0.01, gpu_name="NVIDIA A100-SXM4-40GB")
    result = predict_train(
        workload=WORKLOAD, precision="fp32", batch_size=64, gpu="A100-40GB", db=db
    )
    assert "store run #2" in result.calibration_source
    assert "and at batches 8" in result.calibration_source


def test_a_run_on_a_board_the_catalog_lacks_calibrates_nothing(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    store_measurement(db, batch=32, step_s=0.004, gpu_name="NVIDIA A100-PCIE-40GB")
    result = predict_train(
        workload=WORKLOAD, precision="fp32", batch_size=32, gpu="A100-40GB", db=db
    )
    assert not result.calibrated
    assert "NVIDIA A100-PCIE-40GB" in result.calibration_source
