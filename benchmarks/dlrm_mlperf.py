"""MLPerf Training v4.0 DLRM-DCNv2: leave-one-system-out time to train from the sharding model.

Data: ``mlperf_training_v4.0/training_v4.0.csv``, benchmark ``dlrm_dcnv2`` (15 systems:
H100-SXM x4 and x8, H200 x8, H100-PCIe x4, A100-80GB x64, H100-SXM x64 and x128; global
batches 28,000-135,168), time to train as MLPerf scores it (mean of the runs without the
fastest and the slowest).

Prediction per system: the step time of the fastest plan of
:func:`gpucast.predict.embeddings.plan_embeddings` for the MLPerf DLRM-DCNv2 reference tables
(``catalog/data/embedding_tables.csv``) at the system's global batch on its GPUs (catalog
specs: HBM bandwidth, NVLink or PCIe -- or the node shape of ``catalog/data/systems.csv`` where
it describes the system, as ``plan embeddings --cluster`` uses it: the 4 x H100-PCIe D54U-3U
joins its GPUs in NVLink-bridged pairs, so its all-to-all crosses PCIe at 64 GB/s per GPU, not
the bridge's 600; nodes of 8 GPUs have 400 Gbit/s per GPU to the network,
as DGX H100 / Eos, DGX A100 200 Gbit/s), times the steps to target. **Convergence
assumption**: samples to target are MLCommons' reference convergence points for
``dlrm_dcnv2`` (epochs of the 4,195,197,692-sample Criteo 1TB training set, interpolated in
the global batch; ``catalog/data/convergence.csv``): every submission is assumed to converge
like the reference runs at its batch.

The raw model ignores the submitters' software (HugeCTR hybrid embeddings, FP16 tables, fused
kernels), so one calibration factor (the median of measured / raw predicted time over the other
systems) is fitted and applied to the held-out one (leave one system out); the median, not the
geometric mean, because one system (4 x H100-PCIe, 3x slower than even its PCIe links say)
would otherwise move every other system's factor by +11%. That system's own MLPerf logs (not in
the data: ``Quanta_Cloud_Technology/results/D54U-3U/dlrm_dcnv2/result_0.txt``) show its first
three 0.05-epoch blocks of the day at 15.9 ms a step (predicted 14.5) and every later block
2.3x slower, evaluations too: a state of that server (throttling or its data path; the log
does not say which) that no spec carries. Reported:
per-system error with no factor, with the geometric-mean factor and with the median one, and
the median / max |error|; target (issue #17): within 20%. On more GPUs than a table has 16-wide
column shards the planner's grid plan (column shards split row-wise, as TorchRec's grid
sharding and HugeCTR's planner spread a hot table) is what the 64- and 128-GPU systems get.

Run: ``python benchmarks/dlrm_mlperf.py [--data-dir ../shared/data]`` (a few seconds).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from gpucast.catalog import load_catalog
from gpucast.catalog.convergence import mlperf_samples_to_target
from gpucast.catalog.embeddings import rec_model
from gpucast.domain.catalog import PCIE_X16_GBIT_PER_S
from gpucast.domain.units import GIB
from gpucast.plan.inputs import intra_node_gbps
from gpucast.predict import embeddings as emb
from gpucast.predict.validation import held_out_scale
from gpucast.store.datasets.mlperf import mlperf_systems, read_mlperf_runs

TARGET = 0.20
#: Compute-fabric NIC per GPU (Gbit/s): DGX H100/H200 (and Eos) ConnectX-7 NDR, DGX A100 HDR.
# The D54U-3U's first run of the day, its first three 0.05-epoch blocks (59.5, 59.7, 62.1 s at
# global batch 55,296 of 4,195,197,692 samples an epoch): Quanta_Cloud_Technology/results/
# D54U-3U/dlrm_dcnv2/result_0.txt, mlcommons/training_results_v4.0 @ 62f111b. Printed beside
# the prediction, never fitted.
COLD_PCIE_STEP_MS = 15.9
NIC_PER_GPU_GBPS = {"H100-SXM": 400.0, "H200": 400.0, "A100-80GB": 200.0, "H100-PCIe": 25.0}
#: Achieved share of the BF16 peak on the dense MLPs (as plan embeddings assumes).
DENSE_EFFICIENCY = 0.4


def _link_gbps(system: str, gpu_name: str, per_node: int) -> float:
    """GB/s per GPU of the all-to-all inside a node: the system's node shape where the
    catalog describes it (``systems.csv``: bridged pairs reach each other over PCIe), else the
    GPU's NVLink or PCIe."""
    from gpucast.catalog.systems import get_system
    from gpucast.domain.systems import UnknownSystemError

    gpu = load_catalog().gpu(gpu_name)
    try:
        shape = get_system(system)
    except UnknownSystemError:
        return intra_node_gbps(gpu) / 8.0
    return shape.ring_gbps(per_node, PCIE_X16_GBIT_PER_S.get(gpu.pcie_generation, 128.0)) / 8.0


def _hardware(gpu_name: str, per_node: int, gpus: int, system: str = "") -> emb.ShardingHardware:
    gpu = load_catalog().gpu(gpu_name)
    return emb.ShardingHardware(
        gpus=gpus,
        gpus_per_node=per_node,
        hbm_bytes=gpu.memory_gib * GIB,
        hbm_gbps=gpu.memory_bandwidth_gbps,
        link_gbps=_link_gbps(system, gpu_name, per_node),
        network_gbps=NIC_PER_GPU_GBPS.get(gpu_name, 100.0) * per_node,
        host_bytes_per_node=2048 * GIB,
        host_link_gbps=PCIE_X16_GBIT_PER_S.get(gpu.pcie_generation, 128.0) / 8.0,
        dense_tflops=gpu.peak_tflops("bf16") * DENSE_EFFICIENCY,
    )


def predict_systems(path: Path) -> pd.DataFrame:
    """One row per MLPerf DLRM-DCNv2 system: the fastest plan, its step, the predicted time to
    train with no calibration (``raw_min``, ``raw_error``), with the geometric mean of the
    other systems' ratios (``geo_error``) and with their median (``factor``, ``error``)."""
    systems = mlperf_systems(read_mlperf_runs(path))
    systems = systems[(systems.benchmark == "dlrm_dcnv2") & (systems.gpu != "")].copy()
    base = rec_model("dlrm-dcnv2")
    rows = []
    for s in systems.itertuples():
        batch = int(s.global_batch_size)
        model = emb.RecModel(
            name=base.name,
            tables=base.tables,
            dense_params=base.dense_params,
            dense_train_flops_per_sample=base.dense_train_flops_per_sample,
            global_batch=batch,
            source_url=base.source_url,
        )
        hw = _hardware(str(s.gpu), int(s.accel_per_node), int(s.accelerators), str(s.system))
        best, _ = emb.plan_embeddings(model, hw)
        target = mlperf_samples_to_target("dlrm_dcnv2", batch)
        raw_min = target.samples_mean / batch * best.step_time_s / 60.0
        rows.append(
            {
                "system": f"{s.submitter}/{s.system}",
                "gpus": f"{s.accelerators} x {s.gpu}",
                "batch": batch,
                "plan": best.name,
                "step_ms": best.step_time_s * 1e3,
                "epochs": target.mean_in_unit,
                "raw_min": raw_min,
                "measured_min": float(s.minutes_score),
            }
        )
    table = pd.DataFrame(rows)
    table["raw_error"] = table.raw_min / table.measured_min - 1.0
    geo = held_out_scale(table.raw_min, table.measured_min)
    table["geo_error"] = table.raw_min * geo / table.measured_min - 1.0
    held = held_out_scale(table.raw_min, table.measured_min, median=True)
    table["factor"] = held
    table["predicted_min"] = table.raw_min * held
    table["error"] = table.predicted_min / table.measured_min - 1.0
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    args = parser.parse_args(argv)
    path = args.data_dir / "mlperf_training_v4.0" / "training_v4.0.csv"
    if not path.is_file():
        print(f"no {path}", file=sys.stderr)
        return 2
    table = predict_systems(path)
    pd.set_option("display.width", 220)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    for label, col in (
        ("no calibration", "raw_error"),
        ("factor = geometric mean of the others", "geo_error"),
        ("factor = median of the others (the target's figure)", "error"),
    ):
        err = table[col].abs()
        sxm = table[~table.gpus.str.contains("PCIe")][col].abs()
        print(
            f"{label}: |error| median {err.median():.1%}, max {err.max():.1%}; "
            f"{(err <= TARGET).sum()} of {len(table)} systems within {TARGET:.0%} "
            f"(without the H100-PCIe system: median {sxm.median():.1%}, max {sxm.max():.1%})"
        )
    pcie = table[table.gpus.str.contains("PCIe")]
    if len(pcie):
        print(
            f"H100-PCIe system predicted {pcie.step_ms.iloc[0]:.1f} ms a step; its first run "
            f"of the day logged {COLD_PCIE_STEP_MS} ms over its first 0.15 epoch, then 2.3x "
            "slower (result_0.txt in mlcommons/training_results_v4.0, not in the data)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
