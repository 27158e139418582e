"""MIG slice throughput from the full-GPU figure: a 1g.10gb slice of an A100-SXM-80GB against
NVIDIA's published MLPerf Inference v1.0 results for the same board whole and as one slice.

    .venv/bin/python benchmarks/mig_slices.py [--json]

What is predicted: the Offline throughput of one ``1g.10gb`` slice as the published full-GPU
throughput times the slice-over-GPU throughput ratio gpucast predicts -- the roofline latency
curve of the profiled inference pass (``tensorrt`` engine, the MLPerf precision) on the
A100-80GB and on the slice, at a large offline batch (1024 on both), where the slice's compute
term runs ``108 / 14`` and its bandwidth term ``8 / 1`` times slower
(:func:`gpucast.predict.mig.mig_share`); the launch overhead does not shrink with the slice.
Nothing is fitted on these numbers.

Measured: MLPerf Inference v1.0, closed division, Offline, NVIDIA's submissions
``DGX-A100_A100-SXM-80GBx1_TRT_datacenter`` (whole GPU) and
``DGX-A100_A100-SXM-80GB-MIG_1x1g.10gb_TRT`` (one slice), samples per second from each
run's log. Models: ResNet-50 (int8), BERT-99 (int8), 3D-UNet (int8; the slice ran the 99.9
target, the GPU the 99 one -- NVIDIA runs both on the same engine), RNN-T (fp16; not in
gpucast's zoo, so its nearest neighbour ``lstm-lm`` stands in for the profile).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from dataclasses import dataclass

from gpucast.catalog import load_catalog
from gpucast.inputs.serving import inference_work, serving_efficiency
from gpucast.predict.mig import mig_share
from gpucast.predict.serving import mig_profile, predict_latency_curve

_RESULTS = "https://github.com/mlcommons/inference_results_v1.0/blob/main/closed/NVIDIA/results"
_FULL = f"{_RESULTS}/DGX-A100_A100-SXM-80GBx1_TRT_datacenter"
_SLICE = f"{_RESULTS}/DGX-A100_A100-SXM-80GB-MIG_1x1g.10gb_TRT"
GPU = "A100-80GB"
PROFILE = "1g.10gb"
BATCH = 1024
TARGET = 0.15


@dataclass(frozen=True, slots=True)
class Published:
    model: str  # MLPerf benchmark
    workload: str  # gpucast zoo workload profiled for it
    precision: str
    full_samples_per_s: float
    slice_samples_per_s: float
    full_log: str
    slice_log: str


PUBLISHED = (
    Published("resnet50", "resnet50", "int8", 38009.6, 5170.99,
              f"{_FULL}/resnet50/Offline/performance/run_1/mlperf_log_detail.txt",
              f"{_SLICE}/resnet50/Offline/performance/run_1/mlperf_log_summary.txt"),
    Published("bert-99", "bert-large", "int8", 3601.96, 502.486,
              f"{_FULL}/bert-99/Offline/performance/run_1/mlperf_log_detail.txt",
              f"{_SLICE}/bert-99/Offline/performance/run_1/mlperf_log_summary.txt"),
    Published("3d-unet", "unet3d", "int8", 60.6073, 7.34388,
              f"{_FULL}/3d-unet-99/Offline/performance/run_1/mlperf_log_summary.txt",
              f"{_SLICE}/3d-unet-99.9/Offline/performance/run_1/mlperf_log_summary.txt"),
    Published("rnnt", "lstm-lm", "fp16", 14007.6, 1582.1,
              f"{_FULL}/rnnt/Offline/performance/run_1/mlperf_log_summary.txt",
              f"{_SLICE}/rnnt/Offline/performance/run_1/mlperf_log_summary.txt"),
)  # fmt: skip


def predicted_ratio(workload: str, precision: str, *, by_sms: bool = True) -> float:
    """Slice throughput over whole-GPU throughput at ``BATCH`` (same batch on both);
    ``by_sms=False``: the compute share as compute slices / 7 (what gpucast used before)."""
    spec = load_catalog().gpu(GPU)
    profile = mig_profile(spec, PROFILE)
    if not by_sms:
        profile = dataclasses.replace(profile, sm_count=None)
    work = inference_work(workload, precision)
    eff = serving_efficiency("tensorrt", precision).value
    full = predict_latency_curve(work, spec, precision, max_batch=BATCH, efficiency=eff)
    part = predict_latency_curve(
        work, spec, precision, max_batch=BATCH, mig=profile, efficiency=eff
    )
    return full.latency(BATCH) / part.latency(BATCH)


def rows() -> list[dict[str, object]]:
    out = []
    for pub in PUBLISHED:
        ratio = predicted_ratio(pub.workload, pub.precision)
        predicted = pub.full_samples_per_s * ratio
        by_slices = pub.full_samples_per_s * predicted_ratio(
            pub.workload, pub.precision, by_sms=False
        )
        out.append({
            "model": pub.model, "profiled_as": pub.workload, "precision": pub.precision,
            "full_samples_per_s": pub.full_samples_per_s,
            "slice_samples_per_s": pub.slice_samples_per_s,
            "measured_ratio": pub.slice_samples_per_s / pub.full_samples_per_s,
            "predicted_ratio": ratio, "predicted_slice_samples_per_s": predicted,
            "error": predicted / pub.slice_samples_per_s - 1,
            "error_compute_slices_over_7": by_slices / pub.slice_samples_per_s - 1,
            "full_log": pub.full_log, "slice_log": pub.slice_log,
        })  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    table = rows()
    if args.json:
        print(json.dumps(table, indent=2))
        return 0
    spec = load_catalog().gpu(GPU)
    share = mig_share(spec, mig_profile(spec, PROFILE))
    print(f"slice shares: {share.source}")
    print(f"{'model':10}{'as':12}{'prec':>5}{'GPU/s':>10}{'slice/s':>9}{'meas.':>8}"
          f"{'pred.':>8}{'pred/s':>9}{'error':>8}{'slices/7':>10}")  # fmt: skip
    for r in table:
        print(
            f"{r['model']!s:10}{r['profiled_as']!s:12}{r['precision']!s:>5}"
            f"{r['full_samples_per_s']:>10,.1f}{r['slice_samples_per_s']:>9,.1f}"
            f"{r['measured_ratio']:>8.4f}{r['predicted_ratio']:>8.4f}"
            f"{r['predicted_slice_samples_per_s']:>9,.1f}{r['error']:>+8.1%}"
            f"{r['error_compute_slices_over_7']:>+10.1%}"
        )
    errors = [abs(float(r["error"])) for r in table]  # type: ignore[arg-type]
    worst = max(errors)
    print(
        f"MAPE {sum(errors) / len(errors):.1%}, worst {worst:.1%} "
        f"(target: every slice within {TARGET:.0%}: {'met' if worst <= TARGET else 'NOT met'})"
    )
    old = [abs(float(r["error_compute_slices_over_7"])) for r in table]  # type: ignore[arg-type]
    print(f"compute share as compute slices / 7 instead of SMs: MAPE {sum(old) / len(old):.1%}, "
          f"worst {max(old):.1%}")  # fmt: skip
    print(f"sources: {_FULL} ; {_SLICE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
