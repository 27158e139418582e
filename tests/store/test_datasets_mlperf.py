"""MLPerf Training v4.0 results: successful runs, accelerators mapped, MLPerf's score."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from gpucast.domain.errors import DataFormatError
from gpucast.store.datasets.mlperf import mlperf_systems, read_mlperf_runs

HEADER = (
    "round,submitter,system,benchmark,run_index,minutes,status,accelerator,accel_per_node,"
    "nodes,division,global_batch_size,file\n"
)


def _csv(tmp_path: Path, rows: list[str]) -> Path:
    path = tmp_path / "training.csv"
    path.write_text(HEADER + "\n".join(rows) + "\n")
    return path


def test_runs_and_the_trimmed_mean_score(tmp_path: Path) -> None:
    rows = [
        f"v4.0,X,sysA,resnet,{i},{m},success,NVIDIA H100-SXM5-80GB,8,2,closed,3200,f"
        for i, m in enumerate([10.0, 11.0, 12.0, 13.0, 30.0])
    ] + [
        "v4.0,X,sysA,resnet,9,,file_not_in_snapshot,NVIDIA H100-SXM5-80GB,8,2,closed,3200,f",
        "v4.0,Y,tpu,gpt3,1,50.0,success,TPU-v5p,4,128,closed,1536,f",
        "v4.0,Y,tpu,gpt3,2,60.0,aborted,TPU-v5p,4,128,closed,1536,f",
    ]
    runs = read_mlperf_runs(_csv(tmp_path, rows))
    assert len(runs) == 6  # the missing and the aborted runs are dropped
    a = runs[runs.system == "sysA"].iloc[0]
    assert a.gpu == "H100-SXM" and a.accelerators == 16
    assert runs[runs.system == "tpu"].iloc[0].gpu == ""  # not in the catalog: kept, unnamed
    systems = mlperf_systems(runs).set_index("system")
    assert systems.loc["sysA", "minutes_score"] == pytest.approx(12.0)  # 11, 12, 13
    assert systems.loc["sysA", "minutes_median"] == pytest.approx(12.0)
    assert systems.loc["tpu", "runs"] == 1


def test_bad_files_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(DataFormatError, match="file not found"):
        read_mlperf_runs(tmp_path / "none.csv")
    bad = tmp_path / "bad.csv"
    bad.write_text("round,system\nv4.0,x\n")
    with pytest.raises(DataFormatError, match="missing column"):
        read_mlperf_runs(bad)


@pytest.mark.shared_data
def test_published_table(shared_data: Path) -> None:
    runs = read_mlperf_runs(shared_data / "mlperf_training_v4.0" / "training_v4.0.csv")
    assert len(runs) > 1500 and isinstance(runs, pd.DataFrame)
    resnet = mlperf_systems(runs).query("benchmark == 'resnet' and gpu == 'H100-SXM'")
    assert resnet.accelerators.max() == 3584 and resnet.accelerators.min() == 4
