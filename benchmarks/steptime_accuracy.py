"""The step-time model across every published source, validated as users would meet it.

Data: ``../shared/data`` -- CM-DARE (K80/P100, TensorFlow 1), Zeus (V100/P100/RTX 6000 at
their highest power limit, PyTorch), Pollux (T4, PyTorch, single-GPU placements in the fit),
MLPerf Training v4.0 (single-node H100/H200/H100-PCIe/L40S systems in the fit).

What is printed (nothing here is tuned on the rows it is scored on):

1. Cross-validated error per regime, source and GPU (``gpucast fit steptime``'s table): a GPU
   left out of the fit (LOGO), a workload left out (LOMO), a (GPU, workload) pair left out,
   another batch on the same GPU -- each with the coverage of the stated 80% interval, judged
   against quantiles built from the *other* held-out groups (nested).
2. Pollux, unseen placements: every multi-GPU placement (2-16 T4 over 1-16 nodes; none is in
   the fit) = the fitted single-T4 step at the local batch + the gradient all-reduce as
   ``plan train`` prices it (PCIe inside a g4dn.12xlarge, 50 Gbit/s between them; at most 70%
   hidden under backward).
3. MLPerf, leave one system out: each system's time to train = samples to target at its
   global batch (MLCommons' reference convergence points, ``catalog/data/convergence.csv``)
   x (one GPU's step + exposed all-reduce) / global batch, with the model refitted without
   that system; error per benchmark and by GPU count.

Run: ``python benchmarks/steptime_accuracy.py`` (about a minute; profiles are cached).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from gpucast.catalog import load_catalog
from gpucast.catalog.convergence import mlperf_samples_to_target
from gpucast.domain.pollux import POLLUX_TESTBED
from gpucast.domain.published import MLPERF_WORKLOADS, POLLUX_AS_WORKLOADS
from gpucast.inputs import steptime as st
from gpucast.plan.inputs import intra_node_gbps
from gpucast.predict import comm
from gpucast.predict.steptime import (
    StepTimeModel,
    cross_validated_residuals,
    error_table,
    nested_coverage,
)
from gpucast.store.datasets.pollux import read_pollux_placements

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
pd.set_option("display.width", 200)
pd.set_option("display.max_rows", 200)


def _ape(pred: np.ndarray, actual: np.ndarray) -> np.ndarray:
    return 100.0 * (pred / actual - 1.0)


def _exposed(total_s: np.ndarray, compute_s: np.ndarray) -> np.ndarray:
    hidden = np.minimum(
        comm.DEFAULT_OVERLAP_FRACTION * total_s, comm.DEFAULT_BACKWARD_FRACTION * compute_s
    )
    return np.asarray(total_s - hidden, dtype=np.float64)


def section_cv(obs: pd.DataFrame) -> None:
    residuals = cross_validated_residuals(obs)
    table = error_table(residuals)
    print("1. Cross-validated step time per regime / source / GPU (MAPE %, 80% coverage)")
    print(table.round(1).to_string(index=False))
    print("\n   nested coverage of the 80% interval, all sources:")
    print(nested_coverage(residuals).round(3).to_string(index=False))
    by = table.groupby(["regime", "source"]).apply(
        lambda p: pd.Series(
            {
                "rows": p.rows.sum(),
                "mape_pct": np.average(p.mape_pct, weights=p.rows),
                "coverage": np.average(p.coverage.fillna(0), weights=p.rows),
            }
        ),
        include_groups=False,
    )
    print("\n   per regime and source:")
    print(by.round(2).to_string())


def section_pollux(obs: pd.DataFrame, catalog: object) -> None:
    model = StepTimeModel().fit(obs)
    placements = read_pollux_placements(DATA / "pollux_osdi21")
    multi = placements[placements.gpus > 1].copy()
    rows = []
    spec = catalog.gpu(POLLUX_TESTBED.gpu)  # type: ignore[attr-defined]
    for job, part in multi.groupby("job"):
        pw = POLLUX_AS_WORKLOADS.get(str(job))
        if pw is None:
            continue
        frame = pd.DataFrame(
            [
                st._row(
                    source="pollux",
                    group=str(job),
                    spec=pw,
                    stack="pytorch",
                    gpu=spec.name,
                    batch=float(b),
                    step_time_s=1.0,
                )
                for b in part.local_bsz
            ]
        )
        feats = st.with_features(frame, catalog)
        compute = model.predict(feats, use_workload_factor=True)
        grads = np.asarray(st._gradient_bytes(frame), dtype=np.float64)
        total = comm.hierarchical_collective_s(
            grads,
            part.gpus.to_numpy(),
            part.gpus_per_node_max.to_numpy(),
            intra_node_gbps(spec),
            POLLUX_TESTBED.network_gbps,
            comm.DEFAULT_HOP_LATENCY_S,
        )
        predicted = compute + _exposed(total, compute)
        out = part.assign(predicted_s=predicted, compute_s=compute)
        rows.append(out)
    table = pd.concat(rows, ignore_index=True)
    table["error_pct"] = _ape(table.predicted_s.to_numpy(), table.step_time_s.to_numpy())
    print("\n2. Pollux T4 step time at unseen multi-GPU placements")
    summary = table.groupby("job").agg(
        placements=("placement", "nunique"),
        rows=("error_pct", "size"),
        mape_pct=("error_pct", lambda e: float(np.mean(np.abs(e)))),
        signed_median_pct=("error_pct", "median"),
    )
    print(summary.round(1).to_string())
    table["nodes_bucket"] = pd.cut(table.nodes, [0, 1, 2, 4, 16], labels=["1", "2", "3-4", "5-16"])
    print("   by nodes:", table.groupby("nodes_bucket", observed=True).error_pct.apply(
        lambda e: round(float(np.mean(np.abs(e))), 1)).to_dict())  # fmt: skip
    print(f"   all: MAPE {np.mean(np.abs(table.error_pct)):.1f}% over {len(table)} rows")


def section_mlperf(obs: pd.DataFrame, catalog: object) -> None:
    def s2t(benchmark: str, batch: float) -> float:
        return float(mlperf_samples_to_target(benchmark, round(batch)).samples_mean)

    systems = st.mlperf_system_rows(DATA, s2t, catalog=catalog)
    systems = st.with_collective(systems, catalog)  # extra_s: (1 - overlap) x all-reduce
    totals = systems.extra_s.to_numpy() / (1.0 - comm.DEFAULT_OVERLAP_FRACTION)
    systems = st.with_features(systems.assign(extra_s=0.0), catalog)
    rows = []
    for i, r in enumerate(systems.to_dict("records")):
        train = obs[obs.group != r["group"]]
        model = StepTimeModel().fit(train)
        one = systems.iloc[[i]]
        compute = model.predict(one, use_workload_factor=True)
        step = compute + _exposed(np.array([totals[i]]), compute)
        samples = s2t(str(r["group"]).split("/")[-1], float(r["batch"]) * int(r["gpus"]))
        # one step of the global batch = one GPU's step of its share
        predicted_min = float(samples * step[0] / (r["batch"] * r["gpus"]) / 60.0)
        measured_min = float(samples * r["step_time_s"] / (r["batch"] * r["gpus"]) / 60.0)
        rows.append(
            {
                "benchmark": str(r["group"]).split("/")[-1],
                "system": "/".join(str(r["group"]).split("/")[:2]),
                "gpu": r["gpu"],
                "gpus": int(r["gpus"]),
                "measured_min": measured_min,
                "predicted_min": predicted_min,
                "in_fit": bool((obs.group == r["group"]).any()),
            }
        )
    table = pd.DataFrame(rows)
    table["error_pct"] = _ape(table.predicted_min.to_numpy(), table.measured_min.to_numpy())
    print("\n3. MLPerf Training v4.0, leave one system out: time to train")
    print(table.sort_values(["benchmark", "gpus"]).round(2).to_string(index=False))
    bucket = pd.cut(table.gpus, [0, 8, 64, 512, 20000], labels=["1-8", "9-64", "65-512", "513+"])
    summary = (
        table.assign(bucket=bucket)
        .groupby(["benchmark", "bucket"], observed=True)
        .agg(
            systems=("error_pct", "size"),
            median_abs_pct=("error_pct", lambda e: float(np.median(np.abs(e)))),
            signed_median_pct=("error_pct", "median"),
        )
    )
    print("\n   by benchmark and GPU count:")
    print(summary.round(1).to_string())
    for bench, part in table.groupby("benchmark"):
        print(f"   {bench}: median |error| {np.median(np.abs(part.error_pct)):.1f}% over "
              f"{len(part)} systems")  # fmt: skip


def main() -> int:
    if not (DATA / "README.md").is_file():
        print(f"published data not found at {DATA.resolve()}; nothing to compare")
        return 0
    catalog = load_catalog()
    obs = st.step_time_observations(DATA, catalog)
    print(f"{len(obs)} step times: {obs.source.value_counts().to_dict()}")
    print(f"   MLPerf benchmarks expressed: {', '.join(sorted(MLPERF_WORKLOADS))}\n")
    section_cv(obs)
    section_pollux(obs, catalog)
    section_mlperf(obs, catalog)
    return 0


if __name__ == "__main__":
    sys.exit(main())
