"""Importers of CM-DARE cluster scaling, checkpoint and start-up data."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from gpucast.domain.errors import DataFormatError
from gpucast.store.datasets.cmdare_checkpoint import read_checkpoint_csv
from gpucast.store.datasets.cmdare_cluster import (
    SAMPLE_COLUMNS,
    cluster_fit_table,
    read_cluster_scaling,
    steady_state_speeds,
)
from gpucast.store.datasets.cmdare_startup import read_startup_times


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_cluster_reader_reports_bad_rows(tmp_path: Path) -> None:
    root = tmp_path / "cluster_scaling"
    _write(
        root / "P100" / "res15_2workers.csv",
        "Wall time,Step,Value\n1,101,5.0\n2,201,abc\n3,301,-1\n4,401,40\n5,501,41\n6,601,\n",
    )
    _write(root / "P100" / "notes.csv", "x\n1\n")
    result = read_cluster_scaling(root)
    assert list(result.frame.columns) == list(SAMPLE_COLUMNS)
    assert len(result.frame) == 3
    assert set(result.frame["workers"]) == {2}
    reasons = "\n".join(result.skipped)
    assert "line 3: non-numeric" in reasons
    assert "line 4: speed must be > 0" in reasons
    assert "line 7" in reasons
    assert "notes.csv" in reasons


def test_cluster_reader_rejects_wrong_columns(tmp_path: Path) -> None:
    root = tmp_path / "c"
    _write(root / "K80" / "res15_1workers.csv", "time,step,speed\n1,2,3\n")
    with pytest.raises(DataFormatError, match="Wall time"):
        read_cluster_scaling(root)
    with pytest.raises(DataFormatError):
        read_cluster_scaling(tmp_path / "missing")


def test_steady_state_drops_warmup_and_takes_median() -> None:
    samples = pd.DataFrame(
        {
            "gpu": "K80",
            "model": "m",
            "workers": 1,
            "ps_shards": 1,
            "step": range(10),
            "speed_steps_per_s": [1.0, 10, 10, 10, 11, 9, 10, 10, 10, 100],
            "wall_time_s": range(10),
        }
    )
    runs = steady_state_speeds(samples)
    assert runs["speed_steps_per_s"].iloc[0] == 10.0
    assert runs["n_samples"].iloc[0] == 9


def test_checkpoint_reader_skips_malformed(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "c.csv",
        "Model,Local duration,Duration,Checkpoint Size (MB),Index File Size\n"
        "A,0.2,3.5,6.0,5.0\nB,0.2,x,6.0,5.0\n,0.2,3.0,1.0,1.0\nC,0.1,4.0,-2,1\nD,,4.0,10,\n",
    )
    result = read_checkpoint_csv(path)
    assert list(result.frame["model"]) == ["A", "D"]
    assert pd.isna(result.frame["index_mb"].iloc[1])
    assert len(result.skipped) == 3
    assert "line 3" in result.skipped[0]


def test_startup_reader(tmp_path: Path) -> None:
    root = tmp_path / "startup_time"
    _write(
        root / "pre_east" / "vm_time_measure_k80_pre_east.csv",
        "Provisioning,Staging,Booting\n1,40,35\n2,x,3\n",
    )
    _write(
        root / "on_demand_west" / "vm_time_measure_p100.csv",
        "Provisioning,Staging,Booting\n1.5,25,40\n",
    )
    result = read_startup_times(root)
    assert result.frame.to_dict("records") == [
        {
            "gpu": "P100",
            "market": "on_demand",
            "region": "west",
            "provisioning_s": 1.5,
            "staging_s": 25.0,
            "booting_s": 40.0,
        },
        {
            "gpu": "K80",
            "market": "spot",
            "region": "east",
            "provisioning_s": 1.0,
            "staging_s": 40.0,
            "booting_s": 35.0,
        },
    ]
    assert len(result.skipped) == 1


@pytest.mark.shared_data
def test_cmdare_tables_import_cleanly(shared_data: Path) -> None:
    cmdare = shared_data / "cmdare"
    table = cluster_fit_table(cmdare / "cluster_scaling")
    assert table.skipped == ()
    assert len(table.frame) == 48  # 2 GPUs x 3 models x 8 worker counts
    assert table.frame["n_parameters"].notna().all()
    startup = read_startup_times(cmdare / "startup_time")
    assert len(startup.frame) == 100 and startup.skipped == ()
    whole = read_checkpoint_csv(cmdare / "checkpoint" / "whole_data.csv")
    assert len(whole.frame) == 100 and whole.frame["model"].nunique() == 20
