"""MLPerf Training rounds after v4.0, held out: LoRA and R-GAT time to train on systems and
GPUs the fits never saw (issues #22 and #17: "we also check predictions against newer
systems").

Every model is fitted on ``../shared/data`` (MLPerf Training v4.0 among its sources). The
rows of ``catalog/data/mlperf_training_later.csv`` come from later rounds' result logs
(v4.1, a fork of mlcommons/training_results_v4.1; v5.1, mlcommons/training_results_v5.1),
one run per system -- the lowest index that succeeded, not the round's score (runs of one
system spread a few percent) -- with its accelerator, node shape and global batch from the
system's JSON and the log; each row names its file and commit. Nothing is fitted on them.

* ``llama2_70b_lora``: priced exactly as ``benchmarks/steptime_accuracy.py --section llm``
  prices v4.0's systems (:func:`gpucast.inputs.mlperf_llm.llm_system_predictions`: the
  layout search on the system's GPUs and nodes, the shipped step-time model with its fp8
  ratio, host pacing and warm-up fitted on v4.0, MLCommons' reference convergence points),
  with the 80% band a prediction states (:func:`~gpucast.inputs.mlperf_llm.stated_band`).
  GB200 systems are listed by MLPerf as 4-GPU trays; the catalog's GB200-NVL72 joins a
  rack's 72 GPUs by NVLink, so each is priced as racks of ``min(GPUs, 72)`` NVLink-joined
  GPUs (512 GPUs: 8 racks of 64).
* ``gnn`` (R-GAT; v5.1 calls it ``rgat``): ``benchmarks/gnn_mlperf.py``'s raw prediction
  calibrated as that benchmark calibrates it, on *all* v4.0 systems: a factor on the model's
  time and a fixed time per step that does not scale with the GPU
  (:func:`gpucast.predict.validation.scale_and_per_step`); ``error_factor`` is the one
  factor alone (the geometric mean of measured / raw there; before session 33). Features:
  on H200 and B200 in GPU memory, sharded within the node (Dell's v5.1
  configurations ``config_XE9680Lx8H200-SXM-141GB_01x08x2048.sh`` and
  ``config_XE9685Lx8B200-SXM-180GB_1x8x4096.sh``: ``WG_SHARDING_LOCATION=cuda``,
  ``WG_SHARDING_PARTITION=node``, as v4.0's NVIDIA H200); on H100 as v4.0's systems of the
  same name or shape (host memory on one node; NVIDIA's multi-node Eos: GPU, global).

GPUs without a catalog row (GB300, MI350X) are listed and not priced.

    .venv/bin/python benchmarks/mlperf_later_rounds.py [--data-dir ../shared/data] [--json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd

from gpucast.inputs.mlperf_llm import llm_system_predictions, stated_band
from gpucast.predict.validation import scale_and_per_step
from gpucast.store.datasets.mlperf import read_mlperf_runs

#: the GPUs of one NVLink domain where MLPerf lists smaller nodes (catalog/data/systems.csv)
NVLINK_RACK = {"GB200": 72}
TARGET = 0.20


def later_runs() -> pd.DataFrame:
    """The later rounds' runs, :func:`read_mlperf_runs`' format, with ``round``."""
    ref = resources.files("gpucast.catalog").joinpath("data", "mlperf_training_later.csv")
    with resources.as_file(ref) as path:
        return read_mlperf_runs(Path(path))


def _racks(runs: pd.DataFrame) -> pd.DataFrame:
    """GB200 trays regrouped into NVLink racks (module docstring)."""
    out = runs.copy()
    for gpu, rack in NVLINK_RACK.items():
        rows = out.gpu == gpu
        for i in out.index[rows]:
            n = int(out.at[i, "accelerators"])
            per = max(d for d in range(1, min(n, rack) + 1) if n % d == 0)
            out.at[i, "accel_per_node"], out.at[i, "nodes"] = per, n // per
    return out


def lora_rows(runs: pd.DataFrame) -> pd.DataFrame:
    lora = runs[runs.benchmark == "llama2_70b_lora"]
    table = llm_system_predictions(
        Path("."), runs=_racks(lora), benchmarks=["llama2_70b_lora"], vendors=None
    )
    rounds = lora.assign(name=lora.submitter + "/" + lora.system).set_index("name")["round"]
    table["round"] = table.system.map(rounds.to_dict())
    table["error"] = table.predicted_min / table.measured_min - 1.0
    # the same systems with the host never pacing the GPUs (--host-ms-per-layer 0: CUDA
    # graphs), a second column: whether a later round's software still waits on its host
    free = llm_system_predictions(
        Path("."), runs=_racks(lora), benchmarks=["llama2_70b_lora"], vendors=None,
        host_layer_s=0.0,
    )  # fmt: skip
    table["error_no_host"] = free.predicted_min.to_numpy() / table.measured_min - 1.0
    covered = []
    for r in table.itertuples():
        lo, hi, _ = stated_band(str(r.software))  # stated from the point to the far edge
        covered.append(min(lo, 1.0) <= r.measured_min / r.predicted_min <= max(hi, 1.0))
    table["covered"] = covered
    return table


def _gnn_module() -> ModuleType:
    path = Path(__file__).with_name("gnn_mlperf.py")
    spec = importlib.util.spec_from_file_location("bench_gnn_mlperf", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _placement(gnn: ModuleType) -> Callable[[str, str], tuple[str, str]]:
    def where(name: str, gpu: str) -> tuple[str, str]:
        if gpu in ("H200", "B200"):
            return ("gpu", "node")
        v40 = name.replace("ngc24.09", "ngc24.04")  # the same system a round earlier
        return gnn.PLACEMENT.get(name, gnn.PLACEMENT.get(v40, gnn.DEFAULT_PLACEMENT))

    return where


def gnn_rows(runs: pd.DataFrame, data_dir: Path) -> tuple[pd.DataFrame, tuple[float, float]]:
    """The later rounds' R-GAT systems priced and calibrated on v4.0's: the table and the
    calibration ``(scale, seconds per step)``."""
    gnn = _gnn_module()
    v40 = gnn.raw_systems(read_mlperf_runs(data_dir / "mlperf_training_v4.0/training_v4.0.csv"))
    factor = float(np.exp(np.mean(np.log(v40.measured_min / v40.raw_min))))
    scale, per_step_s = scale_and_per_step(v40.raw_min * 60.0, v40.steps, v40.measured_min * 60.0)
    later = runs[runs.benchmark == "gnn"]
    table = gnn.raw_systems(later, placement=_placement(gnn))
    rounds = later.assign(name=later.submitter + "/" + later.system).set_index("name")["round"]
    table["round"] = table.system.map(rounds.to_dict())
    table["gpu"] = table.gpus.str.split(" x ").str[1]
    table["predicted_min"] = table.raw_min * scale + table.steps * per_step_s / 60.0
    table["error"] = table.predicted_min / table.measured_min - 1.0
    table["error_factor"] = table.raw_min * factor / table.measured_min - 1.0
    return table, (scale, per_step_s)


def summary(table: pd.DataFrame) -> dict[str, Any]:
    out: dict[str, Any] = {}
    groups = {"all": table, **dict(iter(table.groupby("gpu"))),
              **{f"round {k}": g for k, g in table.groupby("round")}}  # fmt: skip
    for name, g in groups.items():
        err = g.error.abs()
        out[str(name)] = {
            "systems": len(g),
            "median_abs": float(err.median()),
            "mape": float(err.mean()),
            "mean_signed": float(g.error.mean()),
            "within_20": float((err <= TARGET).mean()),
            **(
                {"mape_no_host": float(g.error_no_host.abs().mean())}
                if "error_no_host" in g
                else {}
            ),
            **({"mape_factor": float(g.error_factor.abs().mean())} if "error_factor" in g else {}),
            **({"covered": float(g.covered.mean())} if "covered" in g else {}),
        }
    return out


def unpriced(runs: pd.DataFrame) -> list[str]:
    rows = runs[runs.gpu == ""]
    return sorted(f"{r.submitter}/{r.system} ({r.accelerator})" for r in rows.itertuples())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    runs = later_runs()
    lora = lora_rows(runs)
    result: dict[str, Any] = {"lora": summary(lora), "unpriced": unpriced(runs)}
    have_v40 = (args.data_dir / "mlperf_training_v4.0/training_v4.0.csv").is_file()
    nan = float("nan")
    gnn, (scale, per_step_s) = (
        gnn_rows(runs, args.data_dir) if have_v40 else (pd.DataFrame(), (nan, nan))
    )
    if have_v40:
        result["gnn"] = summary(gnn)
        result["gnn_scale"] = scale
        result["gnn_per_step_s"] = per_step_s
    if args.json:
        result["lora_rows"] = lora.to_dict("records")
        if have_v40:
            result["gnn_rows"] = gnn.to_dict("records")
        print(json.dumps(result, indent=2, default=str))
        return 0
    pd.set_option("display.width", 220)
    cols = ["round", "system", "gpu", "gpus", "measured_min", "predicted_min", "error"]
    print("llama2_70b_lora (held out: every model fitted on v4.0 and the other sources)")
    shown = lora[[*cols, "error_no_host", "covered", "layout"]]
    print(shown.to_string(index=False, float_format="{:.3g}".format))
    if have_v40:
        print(
            f"\ngnn / rgat (raw x {scale:.3f} + {per_step_s * 1e3:.1f} ms a step, fitted on all "
            "v4.0 systems; error_factor: one factor alone)"
        )
        shown = gnn[[*cols, "error_factor", "features"]]
        print(shown.to_string(index=False, float_format="{:.3g}".format))
    else:
        print(f"\ngnn: skipped (no {args.data_dir}/mlperf_training_v4.0 for the v4.0 factor)")
    for bench in ("lora", "gnn"):
        if bench not in result:
            continue
        extra = (
            " stated 80% band covers | MAPE, host not pacing |"
            if bench == "lora"
            else " MAPE, one factor |"
        )
        print(f"\n{bench}: | rows | n | median |err| | MAPE | mean signed | within 20% |{extra}")
        for name, s in result[bench].items():
            tail = f" {s['covered']:.0%} | {s['mape_no_host']:.1%} |" if "covered" in s else ""
            tail += f" {s['mape_factor']:.1%} |" if "mape_factor" in s else ""
            print(
                f"| {name} | {s['systems']} | {s['median_abs']:.1%} | {s['mape']:.1%} "
                f"| {s['mean_signed']:+.1%} | {s['within_20']:.0%} |{tail}"
            )
    print(f"\nnot priced (no catalog row): {len(result['unpriced'])}")
    for name in result["unpriced"]:
        print(f"  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
