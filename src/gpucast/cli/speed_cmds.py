"""`gpucast fit speed`, `gpucast predict speed`, `gpucast predict train` (single GPU).

Thin shells over :mod:`gpucast.predict.speed` and :mod:`gpucast.predict.roofline`: read and
check files (:mod:`gpucast.store.datasets.cmdare_speed`), load the catalog, call the model,
write results atomically. The lead wires these functions into the ``fit`` / ``predict`` groups.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer

from gpucast.cli._common import JSON_OPTION_HELP, console, emit_json, emit_result
from gpucast.domain.catalog import GpuSpec
from gpucast.domain.errors import DataFormatError, InvalidInputError
from gpucast.domain.prediction import Estimate

PREDICTED_COL = "Predicted Step Time (s)"
LOWER_COL = "Lower (s)"
UPPER_COL = "Upper (s)"
BOTTLENECK_COL = "Bottleneck"


def _catalog_specs(names: list[str]) -> dict[str, GpuSpec]:
    """Catalog entries for the GPU names that the catalog knows (others are left out)."""
    from gpucast.catalog import load_catalog
    from gpucast.domain.errors import UnknownGpuError

    catalog = load_catalog()
    specs: dict[str, GpuSpec] = {}
    for name in names:
        try:
            specs[name] = catalog.gpu(name)
        except UnknownGpuError:
            continue
    return specs


def fit_speed_command(
    data: list[Path] = typer.Option(
        ..., "--data", help="CSV in the CM-DARE column format; repeat for several files."
    ),
    out: Path = typer.Option(..., "--out", help="Where to write the fitted model (JSON)."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON summary."),
) -> None:
    """Fit the single-GPU step-time model from CM-DARE-format rows.

    Needs columns `GPU (temp)`, `Model FLOPs`, `Number of Parameters`, `Number of Tensors` and
    `Step Time (s)` (plus `Model (temp)` for cross-validated intervals); others are ignored.
    """
    from gpucast.predict.speed import GPU_COL, SpeedModel
    from gpucast.store.datasets.cmdare_speed import read_speed_files
    from gpucast.store.models import save_model

    rows = read_speed_files(list(data), require_step_time=True)
    names = sorted(set(rows[GPU_COL].astype(str)))
    model = SpeedModel().fit(rows, _catalog_specs(names))
    save_model(model, out)
    state = model.to_dict()["state"]
    summary: dict[str, Any] = {
        "model_file": str(out),
        "rows": len(rows),
        "models": len(state["models"]),
        "gpus": {
            g["name"]: {
                "fixed_s": g["fixed_s"],
                "per_tensor_s": g["per_tensor_s"],
                "compute_s_per_flop": g["compute_s_per_flop"],
                "interval_rel": [g["log_q"][0], g["log_q"][1]],
            }
            for g in state["gpus"].values()
        },
    }
    if as_json:
        emit_json(summary)
        return
    console.print(
        f"fitted speed model on {len(rows)} rows, {summary['models']} models, "
        f"GPUs {', '.join(summary['gpus'])} -> {out}"
    )


def predict_speed_command(
    model: Path = typer.Option(..., "--model", help="Model JSON from `gpucast fit speed`."),
    input_path: Path = typer.Option(..., "--input", help="Rows to predict (CM-DARE columns)."),
    output: Path = typer.Option(..., "--output", help="CSV to write: input rows + predictions."),
    precision: str = typer.Option("fp32", "--precision", help="fp32, tf32, bf16, fp16 or fp8."),
    as_json: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Predict single-GPU step time for each row; GPUs without training data use the catalog.

    Adds `Predicted Step Time (s)`, `Lower (s)`, `Upper (s)` and `Bottleneck` to a copy of the
    input rows. `GPU TFLOPS` may be empty: the catalog supplies the GPU's peak.
    """
    import pandas as pd

    from gpucast.predict.speed import GPU_COL, SpeedModel
    from gpucast.store.datasets.cmdare_speed import read_speed_rows
    from gpucast.store.files import write_csv_atomic
    from gpucast.store.models import load_model

    estimator = load_model(model)
    if not isinstance(estimator, SpeedModel):
        raise DataFormatError(
            str(model),
            f"holds a {estimator.kind!r} model, not a speed model",
            fix="pass a file written by `gpucast fit speed`",
        )
    rows = read_speed_rows(input_path, require_step_time=False)
    names = sorted(set(rows[GPU_COL].astype(str)))
    specs = _catalog_specs(names)
    try:
        pred = estimator.predict_frame(rows, specs, precision=precision)
    except InvalidInputError as exc:
        raise DataFormatError(str(input_path), exc.message, column=GPU_COL, fix=exc.fix) from exc
    raw = pd.read_csv(input_path, dtype=str, keep_default_na=False)
    raw[PREDICTED_COL] = pred["step_time_s"].to_numpy()
    raw[LOWER_COL] = pred["lower_s"].to_numpy()
    raw[UPPER_COL] = pred["upper_s"].to_numpy()
    raw[BOTTLENECK_COL] = pred["bottleneck"].to_numpy()
    write_csv_atomic(raw, output)
    unseen = sorted(set(rows.loc[pred["source"] == "catalog", GPU_COL]))
    emit_result(
        {"output": str(output), "rows": len(raw), "gpus_from_catalog_only": unseen},
        f"predicted {len(raw)} rows -> {output}"
        + (f" ({', '.join(unseen)} from catalog specs: no training data)" if unseen else ""),
        as_json=as_json,
    )


def _store_calibration(
    db_path: Path | None, workload: str, batch_size: int, precision: str
) -> tuple[float, str] | None:
    """Median step time of the newest stored run of the same workload (any device)."""
    try:
        from gpucast.store.db import open_store
    except ImportError:  # pragma: no cover - the store ships with gpucast
        return None
    if db_path is None or not Path(db_path).exists():
        return None
    with open_store(db_path) as store:
        for run in store.list_runs(workload=workload, limit=50):
            if (
                run.batch_size == batch_size
                and run.precision == precision
                and run.median_s is not None
                and (run.mode in (None, "train"))
                and run.device
            ):
                return float(run.median_s), str(run.gpu_name or run.device)
    return None


def estimate_train_step(
    workload_name: str,
    batch_size: int,
    gpu: GpuSpec,
    precision: str,
    *,
    measured: tuple[float, str] | None = None,
) -> Estimate:
    """Roofline step time of a built-in workload on ``gpu`` from the profiler's features.

    ``measured`` is (step time s, device name) of the same workload and batch size; it
    calibrates the prediction. Kept as a function so `--workers/--strategy` can build on it.
    """
    from gpucast.predict.roofline import (
        DeviceRoofline,
        calibrate,
        predict_step_time,
    )

    workload = _roofline_workload(workload_name, batch_size, precision)
    calibration = None
    if measured is not None:
        step_s, device_name = measured
        from gpucast.catalog import load_catalog
        from gpucast.domain.errors import UnknownGpuError

        try:
            device: GpuSpec | DeviceRoofline = load_catalog().gpu(device_name)
        except UnknownGpuError:
            device = _host_cpu_roofline()
        calibration = calibrate(workload, step_s, device, precision)
    return predict_step_time(workload, gpu, precision, calibration=calibration)


def _host_cpu_roofline() -> Any:
    """Rough peak of this machine's CPU (for calibrating from a CPU measurement)."""
    from gpucast.predict.roofline import DeviceRoofline

    cores = os.cpu_count() or 1
    # ~32 FP32 FLOP/cycle/core (AVX2 FMA x2) at ~2.5 GHz; ~10 GB/s of DRAM bandwidth per core.
    return DeviceRoofline(
        name="cpu",
        kind="cpu",
        peak_tflops=cores * 32 * 2.5e9 / 1e12,
        memory_bandwidth_gbps=min(200.0, 10.0 * cores),
    )


def _roofline_workload(name: str, batch_size: int, precision: str) -> Any:
    """The profiler's per-step FLOPs / bytes / kernels of a built-in workload."""
    from gpucast.domain.workload import PRECISIONS, WorkloadSpec
    from gpucast.predict.roofline import RooflineWorkload
    from gpucast.profile import profile_workload

    if precision not in PRECISIONS:
        raise InvalidInputError(
            f"--precision: must be one of {', '.join(PRECISIONS)} (got {precision!r})",
            fix="e.g. --precision bf16",
        )
    spec = WorkloadSpec(name=name, batch_size=batch_size, precision=precision)  # type: ignore[arg-type]
    return RooflineWorkload.from_profile(profile_workload(spec))


def predict_train_command(
    ctx: typer.Context,
    workload: str = typer.Option(..., "--workload", help="Built-in workload, e.g. resnet50."),
    batch_size: int = typer.Option(..., "--batch-size", min=1, help="Samples per step per GPU."),
    gpu: str = typer.Option(..., "--gpu", help="Catalog GPU name, e.g. V100, A100, H100."),
    precision: str = typer.Option("fp32", "--precision", help="fp32, bf16 or fp16."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Predict the training step time of a built-in workload on one GPU (no data needed).

    Measurements of the same workload in the store (any device) calibrate the prediction.
    """
    from gpucast.catalog import load_catalog
    from gpucast.cli._common import state

    spec = load_catalog().gpu(gpu)
    measured = _store_calibration(state(ctx).db_path, workload, batch_size, precision)
    estimate = estimate_train_step(workload, batch_size, spec, precision, measured=measured)
    samples_per_s = batch_size / estimate.value
    if as_json:
        emit_json(
            {
                "workload": workload,
                "batch_size": batch_size,
                "gpu": spec.name,
                "precision": precision,
                "step_time_s": {
                    "value": estimate.value,
                    "lower": estimate.lower,
                    "upper": estimate.upper,
                },
                "samples_per_s": samples_per_s,
                "bottleneck": estimate.bottleneck,
                "source": estimate.source,
                "breakdown_s": dict(estimate.breakdown),
                "notes": list(estimate.notes),
            }
        )
        return
    console.print(
        f"{workload} (batch {batch_size}, {precision}) on {spec.name}: "
        f"{estimate.value * 1e3:.1f} ms/step [{estimate.lower * 1e3:.1f}, "
        f"{estimate.upper * 1e3:.1f}], {samples_per_s:.0f} samples/s, "
        f"bound by {estimate.bottleneck} ({estimate.source})"
    )
    for note in estimate.notes:
        console.print(f"  {note}", highlight=False)
