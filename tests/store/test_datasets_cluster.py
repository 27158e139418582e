"""Importers of CM-DARE cluster scaling, checkpoint and start-up data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.store.datasets.cmdare_checkpoint import read_checkpoint_csv
from gpucast.store.datasets.cmdare_cluster import (
    SAMPLE_COLUMNS,
    cluster_fit_table,
    read_cluster_scaling,
    steady_state_speeds,
    steady_state_start,
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


def _noisy(levels: list[tuple[float, int]], seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = np.concatenate([np.full(n, level) for level, n in levels])
    return values * (1 + 0.01 * rng.standard_normal(len(values)))


def test_steady_state_skips_workers_joining() -> None:
    # Workers join one by one (20 -> 40 -> 60 steps/s), then the run settles at 80.
    values = _noisy([(20.0, 6), (40.0, 10), (60.0, 10), (80.0, 30)])
    # Segments are >= 10 samples, so the optimum may start a little after the last join,
    # never before it.
    assert 26 <= steady_state_start(values) <= 36
    assert steady_state_start(values, min_segment_samples=5) == 26
    # A late regime (35 samples at 4.4, then 12 at 6.1) is the level the run settled at.
    assert steady_state_start(_noisy([(4.4, 35), (6.1, 12)], seed=1)) == 35


def test_steady_state_ignores_short_excursions_and_flat_runs() -> None:
    flat = _noisy([(10.0, 48)], seed=2)
    assert steady_state_start(flat) == 5  # only the first 10% of warm-up
    dip = _noisy([(10.0, 42), (9.0, 5)], seed=3)  # a 5-sample dip at the end is transient
    assert steady_state_start(dip) == 5
    spike = flat.copy()
    spike[20:23] *= 1.5  # a short spike may open a segment; the median absorbs it
    assert np.median(spike[steady_state_start(spike) :]) == pytest.approx(10.0, rel=0.01)


def test_steady_state_methods_and_validation() -> None:
    values = _noisy([(20.0, 10), (80.0, 30)], seed=4)
    samples = pd.DataFrame(
        {
            "gpu": "P100",
            "model": "m",
            "workers": 4,
            "ps_shards": 1,
            "step": range(len(values)),
            "speed_steps_per_s": values,
            "wall_time_s": range(len(values)),
        }
    )
    cp = steady_state_speeds(samples)
    frac = steady_state_speeds(samples, method="fraction")
    assert cp["speed_steps_per_s"].iloc[0] == pytest.approx(80.0, rel=0.01)
    assert cp["warmup_samples"].iloc[0] == 10
    assert frac["warmup_samples"].iloc[0] == 4
    assert frac["speed_steps_per_s"].iloc[0] == pytest.approx(80.0, rel=0.02)
    with pytest.raises(InvalidSpecError, match="method"):
        steady_state_speeds(samples, method="mean")
    with pytest.raises(InvalidSpecError, match="warmup_fraction"):
        steady_state_speeds(samples, warmup_fraction=1.5)


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
