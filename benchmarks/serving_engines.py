"""Held-out check of the inference-engine efficiencies: ResNet-50 throughput on modern GPUs
against published MLPerf Inference results (which nothing in gpucast is fitted on).

    .venv/bin/python benchmarks/serving_engines.py [--json]

What is predicted: the offline throughput of ResNet-50 on one GPU -- the most images per
second over batch sizes 1..256 of the roofline latency curve of the profiled ``resnet50``
inference pass (``gpucast.inputs.serving.roofline_curve``), each engine's efficiencies
resolved from the fitted sets ``catalog/data/serving_engines.csv`` names
(:func:`gpucast.inputs.serving.serving_efficiency`):

* ``tensorrt`` at int8 (what the MLPerf submissions run: TensorRT, int8, calibrated): the
  TensorRT-LLM GEMM efficiency fitted on LLM-Inference-Bench A100 rows, the bytes and
  per-kernel cost of the vendor-tuned stack fitted on MLPerf *Training* v4.0 (among others);
* ``eager-pytorch`` at fp16 (what a PyTorch user serves without compiling);
* ``priors`` at fp16: the roofline priors every serving prediction used before issue #13
  (0.40 of the tensor-core peak, 0.70 of the bandwidth, 10 us per kernel, eager bytes).

Measured: MLPerf Inference Datacenter, closed division, Offline scenario, one GPU, NVIDIA's
submissions (TensorRT, int8), each row's ``mlperf_log_summary.txt`` (``Samples per second``).
The A100 row is the PCIe 80 GB card (1935 GB/s); the catalog's A100-80GB is the SXM4 board
with the same peaks and 2039 GB/s. These numbers are a held-out check only: no parameter is
fitted on them.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass

from gpucast.catalog import load_catalog
from gpucast.inputs.serving import inference_work, roofline_curve, serving_efficiency

_V40 = "https://github.com/mlcommons/inference_results_v4.0/blob/main/closed/NVIDIA/results"
_V30 = "https://github.com/mlcommons/inference_results_v3.0/blob/main/closed/NVIDIA/results"
_LOG = "resnet50/Offline/performance/run_1/mlperf_log_summary.txt"


@dataclass(frozen=True, slots=True)
class Published:
    gpu: str  # catalog name
    system: str
    samples_per_s: float
    round: str
    source_url: str


PUBLISHED = (
    Published("H100-SXM", "DGX-H100_H100-SXM-80GBx1_TRT", 88714.3, "v4.0",
              f"{_V40}/DGX-H100_H100-SXM-80GBx1_TRT/{_LOG}"),
    Published("A100-80GB", "A100-PCIe-80GBx1_TRT", 39152.4, "v3.0",
              f"{_V30}/A100-PCIe-80GBx1_TRT/{_LOG}"),
    Published("L4", "L4x1_TRT", 13157.8, "v3.0", f"{_V30}/L4x1_TRT/{_LOG}"),
)  # fmt: skip

CASES = (("tensorrt", "int8"), ("eager-pytorch", "fp16"), ("priors", "fp16"))


def offline_throughput(gpu: str, engine: str, precision: str) -> tuple[float, int]:
    """Images/s at the best batch (1..256) of the predicted curve, and that batch."""
    spec = load_catalog().gpu(gpu)
    work = inference_work("resnet50", precision)
    eff = None if engine == "priors" else serving_efficiency(engine, precision).value
    curve = roofline_curve(work, spec, precision, 256, engine=eff)
    best = max(range(1, 257), key=lambda b: b / curve.latency(b))
    return best / curve.latency(best), best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = []
    for pub in PUBLISHED:
        for engine, precision in CASES:
            rate, batch = offline_throughput(pub.gpu, engine, precision)
            rows.append({
                "gpu": pub.gpu, "engine": engine, "precision": precision,
                "predicted_samples_per_s": rate, "best_batch": batch,
                "mlperf_samples_per_s": pub.samples_per_s, "mlperf_round": pub.round,
                "ratio": pub.samples_per_s / rate, "error": rate / pub.samples_per_s - 1,
                "source_url": pub.source_url,
            })  # fmt: skip
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for engine, precision in CASES:
        eff = "roofline priors" if engine == "priors" else serving_efficiency(engine).source
        print(f"{engine} ({precision}): {eff}")
    print(f"{'GPU':10}{'engine':15}{'prec':>6}{'predicted':>11}{'batch':>6}{'MLPerf':>10}"
          f"{'error':>8}{'too slow by':>13}")  # fmt: skip
    for r in rows:
        print(
            f"{r['gpu']:10}{r['engine']:15}{r['precision']:>6}"
            f"{r['predicted_samples_per_s']:>11,.0f}{r['best_batch']:>6}"
            f"{r['mlperf_samples_per_s']:>10,.0f}{r['error']:>+8.0%}{r['ratio']:>12.2f}x"
        )
    for engine, _precision in CASES:
        errs = [abs(r["error"]) for r in rows if r["engine"] == engine]
        print(f"{engine}: mean |error| {sum(errs) / len(errs):.0%} against the MLPerf "
              "Inference offline results (TensorRT, int8)")  # fmt: skip
    print("sources: " + "; ".join(f"{p.gpu} {p.round} {p.source_url}" for p in PUBLISHED))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
