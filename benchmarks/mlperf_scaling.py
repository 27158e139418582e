"""How the training model scales against MLPerf Training v4.0 (a baseline for issue #22).

Data: ``../shared/data/mlperf_training_v4.0/training_v4.0.csv`` (successful runs; each
system's score is MLPerf's trimmed mean, fastest and slowest run dropped).

What is compared: for ResNet-50 on H100-SXM systems of 4 to 3,584 GPUs, the time to train of
each system *relative to the 8-GPU systems* (the median 8-GPU score), measured vs predicted.
The ratio cancels the samples-to-target at the reference batch (which the data does not
give), so it tests what the planner computes for a cluster: per-GPU step time at the
system's per-GPU batch (the roofline of the profiled ``resnet50`` at bf16 on the catalog
H100-SXM), the gradient all-reduce as the planner prices it
(:func:`gpucast.predict.comm.hierarchical_collective_s`: NVLink inside a node, then ring or
tree over 3,200 Gbit/s per 8-GPU node, as a DGX H100 / p5 has) with its overlap, and
the planner's statistical-efficiency rule for the extra epochs of a larger global batch
(critical batch of the ImageNet CNN family). Nothing is fitted here.

The issue's target is no trend of the error with the GPU count. Run:
``python benchmarks/mlperf_scaling.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from gpucast.catalog import load_catalog
from gpucast.inputs.workload import workload_facts, workload_profile
from gpucast.plan.efficiency import workload_family
from gpucast.plan.inputs import PerfParams, intra_node_gbps
from gpucast.predict import comm
from gpucast.predict.roofline import predict_step_time
from gpucast.store.datasets.mlperf import mlperf_systems, read_mlperf_runs

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
NODE_NETWORK_GBPS = 3200.0  # 8 x 400 Gbit/s InfiniBand per 8-GPU node (DGX H100, AWS p5)


def main() -> int:
    csv = DATA / "mlperf_training_v4.0" / "training_v4.0.csv"
    if not csv.is_file():
        print(f"published data not found at {csv.resolve()}; nothing to compare")
        return 0
    systems = mlperf_systems(read_mlperf_runs(csv))
    rows = systems[(systems.benchmark == "resnet") & (systems.gpu == "H100-SXM")].copy()
    spec = load_catalog().gpu("H100-SXM")
    facts = workload_facts(workload_profile("resnet50", "bf16"))
    family = workload_family("resnet50")
    perf = PerfParams()
    grad_bytes = facts.gradient_bytes
    intra = intra_node_gbps(spec)

    def minutes_per_unit(n_gpus: int, per_node: int, global_batch: float) -> float:
        per_gpu = max(1, round(global_batch / n_gpus))
        step = predict_step_time(facts.roofline_workload(per_gpu), spec, "bf16").value
        total = float(
            comm.hierarchical_collective_s(
                grad_bytes, n_gpus, per_node, intra, NODE_NETWORK_GBPS, perf.hop_latency_s
            )
        )
        exposed = float(
            comm.exposed_comm_s(
                np.array([total]), np.array([step]), overlap_fraction=perf.overlap_fraction
            )[0]
        )
        samples_per_s = n_gpus * per_gpu / (step + exposed)
        bc, br = family.critical_batch, family.reference_batch
        epochs = (1 + global_batch / bc) / (1 + br / bc)  # x the epochs at the reference batch
        return epochs / samples_per_s

    base = rows[rows.accelerators == 8]
    measured_8 = float(base.minutes_score.median())
    predicted_8 = float(
        np.median([minutes_per_unit(8, 8, b) for b in base.global_batch_size.to_numpy(dtype=float)])
    )
    rows["measured_ratio"] = rows.minutes_score / measured_8
    rows["predicted_ratio"] = [
        minutes_per_unit(int(r.accelerators), int(r.accel_per_node), float(r.global_batch_size))
        / predicted_8
        for r in rows.itertuples()
    ]
    rows["error_pct"] = 100.0 * (rows.predicted_ratio / rows.measured_ratio - 1.0)
    print("ResNet-50 on H100-SXM: time to train relative to the 8-GPU systems")
    cols = ["system", "accelerators", "global_batch_size", "minutes_score", "measured_ratio",
            "predicted_ratio", "error_pct"]  # fmt: skip
    print(rows.sort_values("accelerators")[cols].round(3).to_string(index=False))
    buckets = [(1, 8), (9, 64), (65, 512), (513, 4096)]
    print("\nerror by GPU count (median |error| and signed median):")
    for lo, hi in buckets:
        sel = rows[(rows.accelerators >= lo) & (rows.accelerators <= hi)]
        if len(sel):
            print(
                f"  {lo:>4}-{hi:<4} GPUs: {len(sel):>2} systems, median |error| "
                f"{sel.error_pct.abs().median():5.1f}%, signed {sel.error_pct.median():+6.1f}%"
            )
    big = rows[rows.accelerators >= 1000]
    trend = "none" if big.error_pct.abs().max() < 15 else "yes"
    print(f"\ntrend with GPU count (|error| >= 15% at >= 1,000 GPUs): {trend}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
