"""Published step times from every source, as one table the step-time model is fitted on.

:func:`step_time_observations` reads what ``--data-dir`` holds and returns one row per
(source, workload, GPU, batch) with the measured seconds per training step on one GPU and the
roofline features of the matching gpucast workload (:func:`with_features`):

* ``cmdare`` -- ``cmdare/speed/single_gpu_speed.csv``: 14 CIFAR-10 CNNs on K80 / P100,
  TensorFlow 1.10, FP32, batch 128 (median of the 13 repeats). Stack ``tf1``.
* ``mlperf`` -- ``mlperf_training_v4.0``: single-node systems (1 node, 4-16 GPUs). Time to
  train = samples to target / throughput, so one GPU's step at the system's per-GPU batch is
  ``global batch x seconds / samples to target``, the samples coming from MLCommons' reference
  convergence points (:mod:`gpucast.catalog.convergence`). Mixed precision, vendor-tuned code:
  stack ``tuned``. The gradient all-reduce inside the node, exposed past the backward pass,
  goes into ``extra_s``.
* ``zeus`` and ``pollux`` -- see :func:`zeus_observations` and :func:`pollux_observations`.

Columns: ``source``, ``group`` (the run or system it came from), ``workload``, ``options``
(JSON), ``workload_key`` (source + workload + options: the unit of the workload factor),
``precision``, ``stack``, ``gpu``, ``batch``, ``gpus``, ``step_time_s``, ``extra_s``, and after
:func:`with_features` the roofline columns the model reads
(:data:`gpucast.predict.steptime.FEATURES`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.published import PublishedWorkload
from gpucast.inputs.data import data_path

#: ``samples_to_target(benchmark, global_batch) -> samples`` (MLPerf reference convergence).
SamplesToTarget = Callable[[str, float], float]

COLUMNS: tuple[str, ...] = (
    "source", "group", "workload", "options", "workload_key", "precision", "stack", "gpu",
    "batch", "gpus", "gpus_per_node", "step_time_s", "extra_s",
)  # fmt: skip


def _row(
    *,
    source: str,
    group: str,
    spec: PublishedWorkload,
    stack: str,
    gpu: str,
    batch: float,
    step_time_s: float,
    gpus: int = 1,
    gpus_per_node: int = 1,
    extra_s: float = 0.0,
) -> dict[str, Any]:
    options = json.dumps(dict(spec.options), sort_keys=True)
    return {
        "source": source,
        "group": group,
        "workload": spec.workload,
        "options": options,
        "workload_key": f"{source}:{spec.workload}{'' if options == '{}' else options}",
        "precision": spec.precision,
        "stack": stack,
        "gpu": gpu,
        "batch": float(batch),
        "gpus": int(gpus),
        "gpus_per_node": int(gpus_per_node),
        "step_time_s": float(step_time_s),
        "extra_s": float(extra_s),
        "optimizer": spec.optimizer,
    }


# -- CM-DARE --------------------------------------------------------------------------------
def cmdare_observations(data_dir: Path) -> pd.DataFrame:
    """CM-DARE single-GPU step times: one row per (model, GPU), the median of its repeats."""
    from gpucast.domain.cmdare import CMDARE_BATCH, CMDARE_WORKLOADS
    from gpucast.store.datasets.cmdare_speed import read_single_gpu_speed

    path = data_path(data_dir, "cmdare", "speed", "single_gpu_speed.csv")
    if path is None:
        return _empty()
    frame = read_single_gpu_speed(path).frame
    rows = []
    for (model, gpu), part in frame.groupby(["model", "gpu"]):
        if model not in CMDARE_WORKLOADS:
            continue
        name, options = CMDARE_WORKLOADS[str(model)]
        spec = PublishedWorkload(workload=name, options=options, precision="fp32")
        rows.append(
            _row(
                source="cmdare",
                group=f"{model}/{gpu}",
                spec=spec,
                stack="tf1",
                gpu=str(gpu),
                batch=CMDARE_BATCH,
                step_time_s=float(part["step_time_s"].median()),
            )
        )
    return _frame(rows)


# -- MLPerf ---------------------------------------------------------------------------------
def mlperf_system_rows(
    data_dir: Path, samples_to_target: SamplesToTarget, *, catalog: Any
) -> pd.DataFrame:
    """Every MLPerf v4.0 system whose benchmark gpucast can express, on a catalog GPU: one GPU's
    step time at the per-GPU batch (no ``extra_s`` yet: see :func:`mlperf_observations`)."""
    from gpucast.domain.errors import GpucastError
    from gpucast.domain.published import MLPERF_WORKLOADS
    from gpucast.store.datasets.mlperf import mlperf_systems, read_mlperf_runs

    path = data_path(data_dir, "mlperf_training_v4.0", "training_v4.0.csv")
    if path is None:
        return _empty()
    systems = mlperf_systems(read_mlperf_runs(path))
    rows = []
    for r in systems.to_dict("records"):
        bench = MLPERF_WORKLOADS.get(str(r["benchmark"]))
        if bench is None or not r["gpu"]:
            continue
        try:
            catalog.gpu(str(r["gpu"]))
            samples = samples_to_target(str(r["benchmark"]), float(r["global_batch_size"]))
        except GpucastError:
            continue
        seconds = float(r["minutes_score"]) * 60.0
        per_gpu = float(r["global_batch_size"]) / int(r["accelerators"])
        rows.append(
            _row(
                source="mlperf",
                group=f"{r['submitter']}/{r['system']}/{r['benchmark']}",
                spec=bench,
                stack="tuned",
                gpu=str(r["gpu"]),
                batch=per_gpu,
                # one step of the global batch takes as long as one GPU's step of its share
                step_time_s=float(r["global_batch_size"]) * seconds / samples,
                gpus=int(r["accelerators"]),
                gpus_per_node=int(r["accel_per_node"]),
            )
        )
    return _frame(rows)


# -- features -------------------------------------------------------------------------------
def with_features(frame: pd.DataFrame, catalog: Any) -> pd.DataFrame:
    """``frame`` with the roofline features of each row's workload (profiled once per
    workload, options, precision and optimizer; cached) and of its GPU."""
    from gpucast.inputs.workload import workload_facts, workload_profile

    out = frame.copy()
    feats: dict[tuple[str, str, str, str], Any] = {}
    flops, nbytes, kernels, peak, bandwidth = [], [], [], [], []
    for r in out.to_dict("records"):
        key = (str(r["workload"]), str(r["options"]), str(r["precision"]), str(r["optimizer"]))
        if key not in feats:
            options = json.loads(str(r["options"]))
            profile = workload_profile(
                key[0], key[2], options=options, optimizer=key[3] if key[3] else "sgd"
            )
            feats[key] = workload_facts(profile)
        roof = feats[key].roofline_workload(max(1, round(float(r["batch"]))))
        flops.append(roof.matmul_flops)
        nbytes.append(roof.memory_bytes)
        kernels.append(roof.n_kernels)
        spec = catalog.gpu(str(r["gpu"]))
        peak.append(spec.peak_tflops(str(r["precision"])))
        bandwidth.append(spec.memory_bandwidth_gbps)
    out["matmul_flops"] = np.asarray(flops, dtype=np.float64)
    out["memory_bytes"] = np.asarray(nbytes, dtype=np.float64)
    out["n_kernels"] = np.asarray(kernels, dtype=np.float64)
    out["peak_tflops"] = np.asarray(peak, dtype=np.float64)
    out["bandwidth_gbps"] = np.asarray(bandwidth, dtype=np.float64)
    return out


def _frame(rows: Iterable[dict[str, Any]]) -> pd.DataFrame:
    frame = pd.DataFrame(list(rows))
    return frame if len(frame) else _empty()


def _empty() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object) for c in (*COLUMNS, "optimizer")})


def require_rows(frame: pd.DataFrame, data_dir: Path | None) -> pd.DataFrame:
    if not len(frame):
        raise InvalidSpecError(
            "data-dir",
            "holds no published step times (cmdare/, mlperf_training_v4.0/, zeus_nsdi23/, "
            "pollux_osdi21/)",
            got=str(data_dir),
            fix="point --data-dir at the published data folder (e.g. ../shared/data)",
        )
    return frame
