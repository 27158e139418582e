"""MLPerf Training v4.0 results (``mlperf_training_v4.0/training_v4.0.csv``) as tidy frames.

One row per submitted run upstream; here :func:`read_mlperf_runs` keeps the successful ones
with the accelerator mapped to the catalog's GPU name where the catalog has it, and
:func:`mlperf_systems` summarises each (system, benchmark): the number of accelerators, the
global batch, and the time to train -- the median of the runs and MLPerf's own score (the
mean after dropping the fastest and the slowest run, as the rules do; no ``scaling.json``
factors are applied). Parse only: no model is imported here.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from gpucast.domain.errors import DataFormatError
from gpucast.store.files import read_csv_input

_COLUMNS = (
    "submitter", "system", "benchmark", "run_index", "minutes", "status", "accelerator",
    "accel_per_node", "nodes", "division", "global_batch_size",
)  # fmt: skip

#: MLPerf's accelerator names -> the catalog's GPU names (accelerators the catalog lacks --
#: TPU v5p; GB300 and MI350X of the later rounds -- are kept with ``gpu`` empty).
ACCELERATORS: dict[str, str] = {
    "NVIDIA H100-SXM5-80GB": "H100-SXM",
    "NVIDIA H100-SXM-80GB": "H100-SXM",
    "NVIDIA H100-PCIe-80GB": "H100-PCIe",
    "NVIDIA H200-SXM5-141GB": "H200",
    "NVIDIA A100-SXM4-80GB": "A100-80GB",
    "NVIDIA L40S": "L40S",
    "Intel(R) Gaudi(R) 2 AI Accelerator": "Gaudi2",
    "NVIDIA GeForce RTX 4090": "RTX4090",
    "AMD Radeon RX 7900 XTX": "RX7900XTX",
    # later rounds (catalog/data/mlperf_training_later.csv, a held-out check)
    "NVIDIA Blackwell GPU (B200-SXM-180GB)": "B200",
    "NVIDIA Blackwell GPU (GB200)": "GB200",
    "NVIDIA Blackwell Ultra GPU (B300-SXM-270GB)": "B300",
    "AMD Instinct MI300X 192GB HBM3": "MI300X",
    "AMD Instinct MI325X 256GB HBM3E": "MI325X",
    "AMD Instinct MI325X 256GB HBM3E DLC": "MI325X",
    "AMD Instinct MI355X": "MI355X",
}


def read_mlperf_runs(path: Path) -> pd.DataFrame:
    """The successful runs: submitter, system, benchmark, run_index, minutes, accelerator,
    gpu (catalog name or ""), accel_per_node, nodes, accelerators, global_batch_size,
    division (and round, where the file has that column)."""
    path = Path(path)
    if not path.is_file():
        raise DataFormatError(
            str(path), "file not found", fix="point at mlperf_training_v4.0/training_v4.0.csv"
        )
    frame = read_csv_input(path, "data-dir")
    missing = [c for c in _COLUMNS if c not in frame.columns]
    if missing:
        raise DataFormatError(
            str(path), "missing column", column=missing[0], fix="use the file as published"
        )
    ok = frame[(frame["status"] == "success") & frame["minutes"].notna()].copy()
    ok["minutes"] = ok["minutes"].astype(float)
    ok = ok[ok["minutes"] > 0]
    ok["accel_per_node"] = ok["accel_per_node"].astype(int)
    ok["nodes"] = ok["nodes"].astype(int)
    ok["accelerators"] = ok["accel_per_node"] * ok["nodes"]
    ok["gpu"] = ok["accelerator"].map(ACCELERATORS).fillna("")
    ok["global_batch_size"] = pd.to_numeric(ok["global_batch_size"], errors="coerce")
    keep = [*_COLUMNS[:3], "run_index", "minutes", "accelerator", "gpu", "accel_per_node",
            "nodes", "accelerators", "global_batch_size", "division"]  # fmt: skip
    keep += ["round"] if "round" in ok.columns else []  # several rounds in one file
    return ok[keep].reset_index(drop=True)


def _olympic_mean(minutes: pd.Series) -> float:
    """MLPerf's score: the mean after dropping the fastest and the slowest run (>= 3 runs)."""
    values = minutes.sort_values().to_numpy()
    if values.size >= 3:
        values = values[1:-1]
    return float(values.mean())


def mlperf_systems(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (submitter, system, benchmark): accelerators, nodes, global batch, runs,
    median minutes and MLPerf's trimmed-mean score."""
    keys = ["submitter", "system", "benchmark"]
    grouped = runs.groupby(keys, sort=True)
    out = grouped.agg(
        accelerator=("accelerator", "first"),
        gpu=("gpu", "first"),
        accel_per_node=("accel_per_node", "first"),
        nodes=("nodes", "first"),
        accelerators=("accelerators", "first"),
        global_batch_size=("global_batch_size", "median"),
        runs=("minutes", "size"),
        minutes_median=("minutes", "median"),
    ).reset_index()
    out["minutes_score"] = grouped["minutes"].apply(_olympic_mean).to_numpy()
    return out
