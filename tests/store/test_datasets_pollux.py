"""Pollux (OSDI 2021) traces: placements, scalability, validation and the noise scale."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpucast.domain.errors import DataFormatError
from gpucast.domain.pollux import POLLUX_JOBS, POLLUX_TESTBED
from gpucast.store.datasets.pollux import (
    gradient_noise_scale,
    read_pollux_placements,
    read_pollux_scalability,
    read_pollux_validation,
)

PLACEMENTS = """placement,local_bsz,step_time,sync_time
1,32,0.04,0.0005
1124,32,0.14,0.09
1124,64,0.20,0.10
44,128,0.30,0.0
"""
SCALABILITY = """num_nodes,num_replicas,local_bsz,step_time,sync_time
6,6,32,0.14,0.10
16,64,32,0.30,0.25
"""
VALIDATION_128 = """progress,iteration,metric,grad_sqr,grad_var
391.0,390,0.44,8.0,4.0
782.0,781,0.58,2.0,4.0
"""
VALIDATION_256 = """progress,iteration,metric,grad_sqr,grad_var
390.4,197,0.42,4.0,8.0
780.9,394,0.57,0.0,2.0
"""


def _job(root: Path, name: str = "cifar10", files: dict[str, str] | None = None) -> Path:
    job = root / name
    job.mkdir(parents=True)
    contents = {
        "placements.csv": PLACEMENTS,
        "scalability.csv": SCALABILITY,
        "validation-128.csv": VALIDATION_128,
        "validation-256.csv": VALIDATION_256,
    }
    contents.update(files or {})
    for file, text in contents.items():
        (job / file).write_text(text)
    return job


def test_placements_decode_the_digits(tmp_path: Path) -> None:
    frame = read_pollux_placements(_job(tmp_path))
    assert list(frame.columns) == [
        "job", "placement", "nodes", "gpus", "gpus_per_node_max", "local_bsz", "global_bsz",
        "step_time_s", "sync_time_s", "compute_time_s",
    ]  # fmt: skip
    row = frame[(frame.placement == "1124") & (frame.local_bsz == 64)].iloc[0]
    assert (row.job, row.nodes, row.gpus, row.gpus_per_node_max, row.global_bsz) == (
        "cifar10", 4, 8, 4, 512,
    )  # fmt: skip
    assert row.compute_time_s == pytest.approx(0.10)
    assert frame.loc[frame.placement == "44", "sync_time_s"].iloc[0] == 0.0  # allowed


def test_scalability_and_every_job_under_the_root(tmp_path: Path) -> None:
    _job(tmp_path, "cifar10")
    _job(tmp_path, "ncf")
    scal = read_pollux_scalability(tmp_path)
    assert scal.groupby("job").size().to_dict() == {"cifar10": 2, "ncf": 2}
    big = scal[scal.gpus == 64].iloc[0]
    assert (big.nodes, big.global_bsz) == (16, 64 * 32)
    assert big.compute_time_s == pytest.approx(0.05)
    assert len(read_pollux_placements(tmp_path)) == 8


def test_validation_and_gradient_noise_scale(tmp_path: Path) -> None:
    valid = read_pollux_validation(_job(tmp_path))
    assert list(valid.columns) == [
        "job", "global_bsz", "reference_bsz", "epoch", "progress", "iteration", "metric",
        "grad_sqr", "grad_var",
    ]  # fmt: skip
    assert set(valid.reference_bsz) == {128} and list(valid.epoch) == [0, 1, 0, 1]
    noise = gradient_noise_scale(valid)
    rows = noise.rows
    first = rows[(rows.global_bsz == 128) & (rows.epoch == 0)].iloc[0]
    assert first.b_simple_in_reference == pytest.approx(0.5)  # grad_var / grad_sqr
    assert first.b_simple == pytest.approx(64.0)  # x the reference batch, in samples
    zero = rows[(rows.global_bsz == 256) & (rows.epoch == 1)].iloc[0]
    assert np.isnan(zero.b_simple)  # grad_sqr floored at 0: undefined
    median = noise.median.set_index("global_bsz")
    assert median.loc[128, "b_simple"] == pytest.approx(np.median([64.0, 256.0]))
    assert median.loc[256, "n"] == 1 and median.loc[256, "b_simple"] == pytest.approx(256.0)


@pytest.mark.parametrize(
    ("placements", "expected"),
    [
        ("placement,local_bsz,step_time,sync_time\n10,32,0.1,0.01\n", r"line 2.*'10' is not one"),
        ("placement,local_bsz,step_time,sync_time\n1a,32,0.1,0.01\n", "not one digit 1-9"),
        ("placement,local_bsz,step_time,sync_time\n1,32,0.1,0.2\n", r"line 2.*exceeds the step"),
        ("placement,local_bsz,step_time,sync_time\n1,3.5,0.1,0.01\n", r"'local_bsz'.*whole"),
        ("placement,local_bsz,step_time,sync_time\n1,32,,0.01\n", r"'step_time'.*empty cell"),
        ("placement,local_bsz,step_time\n1,32,0.1\n", r"'sync_time': missing column"),
        ("placement,local_bsz,step_time,sync_time\n1,32,0.1,0\n1,32,0.2,0\n", r"line 3.*repeats"),
    ],
)
def test_bad_placements(tmp_path: Path, placements: str, expected: str) -> None:
    job = _job(tmp_path, files={"placements.csv": placements})
    with pytest.raises(DataFormatError, match=expected) as info:
        read_pollux_placements(job)
    assert "placements.csv" in str(info.value) and info.value.fix  # every error says how to fix


def test_bad_scalability_validation_and_folders(tmp_path: Path) -> None:
    bad = "num_nodes,num_replicas,local_bsz,step_time,sync_time\n8,4,32,0.1,0.01\n"
    with pytest.raises(DataFormatError, match="4 replicas cannot span 8 nodes"):
        read_pollux_scalability(_job(tmp_path / "a", files={"scalability.csv": bad}))
    rows = "progress,iteration,metric,grad_sqr,grad_var\n391.0,390,0.44,8.0,-1\n"
    with pytest.raises(DataFormatError, match=r"validation-128.csv, line 2, column 'grad_var'"):
        read_pollux_validation(_job(tmp_path / "b", files={"validation-128.csv": rows}))
    with pytest.raises(DataFormatError, match="folder not found"):
        read_pollux_placements(tmp_path / "none")
    (tmp_path / "empty" / "job").mkdir(parents=True)
    with pytest.raises(DataFormatError, match="holds no Pollux job traces"):
        read_pollux_validation(tmp_path / "empty")


def test_domain_facts() -> None:
    assert POLLUX_TESTBED.nodes * POLLUX_TESTBED.gpus_per_node == 64
    assert (POLLUX_TESTBED.gpu, POLLUX_TESTBED.network_gbps) == ("T4", 50.0)
    assert "main.tf" in POLLUX_TESTBED.source
    assert {job.precision for job in POLLUX_JOBS.values()} == {"fp32"}


@pytest.mark.shared_data
def test_published_traces(shared_data: Path) -> None:
    root = shared_data / "pollux_osdi21"
    placements = read_pollux_placements(root)
    assert placements.groupby("job").size().to_dict() == {
        "bert": 540, "cifar10": 1183, "deepspeech2": 754, "ncf": 1661,
    }  # fmt: skip
    assert placements.gpus_per_node_max.max() == POLLUX_TESTBED.gpus_per_node
    one = placements[(placements.job == "cifar10") & (placements.placement == "1")]
    assert one.local_bsz.min() == 32 and one.sync_time_s.max() < 0.001
    assert len(read_pollux_scalability(root / "cifar10")) == 329

    valid = read_pollux_validation(root)
    assert valid.groupby("job").size().to_dict() == {
        "bert": 12, "cifar10": 600, "deepspeech2": 480, "ncf": 80,
    }  # fmt: skip
    for job, spec in POLLUX_JOBS.items():  # the traces' smallest batch is the script's B0
        assert set(valid.loc[valid.job == job, "reference_bsz"]) == {spec.init_batch_size}
    # progress per row is one epoch of samples / B0 in every file of a job
    cifar = valid[(valid.job == "cifar10") & (valid.epoch == 0)]
    assert np.allclose(cifar.progress, 50_000 / 128, rtol=0.02)
    noise = gradient_noise_scale(valid).median.set_index(["job", "global_bsz"])
    assert noise.loc[("cifar10", 128), "b_simple"] == pytest.approx(4890, rel=0.01)
