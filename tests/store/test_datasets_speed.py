"""CM-DARE single-GPU speed importer: tidy tables, and bad cells named by file/line/column."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucast.domain.errors import DataFormatError
from gpucast.store.datasets.cmdare_speed import (
    STORE_COLUMNS,
    read_single_gpu_speed,
    read_speed_rows,
    read_step_rates,
)

HEADER = (
    "GPU TFLOPS,Model FLOPs,Number of Parameters,Number of Tensors,Step Time (s),"
    "GPU (temp),Model (temp),Other\n"
)


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "rows.csv"
    path.write_text(HEADER + body, encoding="utf-8")
    return path


def test_reads_and_imputes_model_properties(tmp_path: Path) -> None:
    path = write(tmp_path, "4.1,6e8,7e5,50,0.1,K80,Res15,x\n9.5,6e8,7e5,,0.04,P100,Res15,y\n")
    rows = read_speed_rows(path, require_step_time=True)
    assert rows["Number of Tensors"].tolist() == [50.0, 50.0]
    assert rows["Other"].tolist() == ["x", "y"]


@pytest.mark.parametrize(
    ("body", "line", "column"),
    [
        ("4.1,abc,7e5,50,0.1,K80,Res15,x\n", 2, "Model FLOPs"),
        ("4.1,6e8,7e5,50,0.1,K80,Res15,x\n4.1,6e8,-7,50,0.1,K80,R2,x\n", 3, "Number of Parameters"),
        ("4.1,6e8,7e5,,0.1,K80,Res15,x\n", 2, "Number of Tensors"),
        ("4.1,6e8,7e5,50,nan,K80,Res15,x\n", 2, "Step Time (s)"),
        ("4.1,6e8,7e5,50,0.1,,Res15,x\n", 2, "GPU (temp)"),
    ],
)
def test_bad_cells_name_file_line_and_column(
    tmp_path: Path, body: str, line: int, column: str
) -> None:
    path = write(tmp_path, body)
    with pytest.raises(DataFormatError) as info:
        read_speed_rows(path, require_step_time=True)
    assert info.value.line == line
    assert info.value.column == column
    assert str(path) in str(info.value)


def test_missing_column_and_optional_tflops(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_text("GPU (temp),Model FLOPs,Number of Parameters\nK80,1,1\n")
    with pytest.raises(DataFormatError, match="Number of Tensors"):
        read_speed_rows(path, require_step_time=False)
    path = write(tmp_path, ",6e8,7e5,50,,V100,Res15,x\n")
    rows = read_speed_rows(path, require_step_time=False)  # empty TFLOPS and step time: fine
    assert len(rows) == 1


@pytest.mark.shared_data
def test_imports_published_speed_table(shared_data: Path) -> None:
    result = read_single_gpu_speed(shared_data / "cmdare" / "speed" / "single_gpu_speed.csv")
    frame = result.frame
    assert list(frame.columns) == list(STORE_COLUMNS)
    assert len(frame) == 364
    assert frame["n_tensors"].notna().all()  # P100 custom9 filled from its K80 rows
    assert frame.groupby(["gpu", "model"]).size().eq(13).all()


@pytest.mark.shared_data
def test_imports_step_rate_series(shared_data: Path) -> None:
    result = read_step_rates(shared_data / "cmdare" / "speed")
    frame = result.frame
    assert set(frame["run"]) == {"step_rate", "base_run"}
    assert (frame["speed_steps_per_s"] > 0).all()
    assert any("placeholder" in s for s in result.skipped)  # K80 base runs start with ,0,0,
    table = read_single_gpu_speed(shared_data / "cmdare" / "speed" / "single_gpu_speed.csv").frame
    k80_res15 = frame[(frame.gpu == "K80") & (frame.model == "Res15") & (frame.run == "step_rate")]
    expected = set(
        table[(table.gpu == "K80") & (table.model == "Res15")]["speed_steps_per_s"].round(6)
    )
    assert expected <= set(k80_res15["speed_steps_per_s"].round(6))


def test_an_empty_file_asks_for_rows_not_to_drop_one(tmp_path: Path) -> None:
    """QA 34 #16: an empty file said "is empty; fix or drop the row"."""
    path = tmp_path / "empty.csv"
    path.write_text("")
    with pytest.raises(DataFormatError, match="is empty; give a CSV with a header and rows"):
        read_speed_rows(path, require_step_time=False)
