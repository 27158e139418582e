"""Validate the serving simulator against PERSEUS (ResNet-50 on a Tesla P4, TRTIS).

    .venv/bin/python benchmarks/serving_validation.py [--data ../shared/data] [--json]
        [--calibration MODE|all]

Setup, as the data README gives it: TensorRT Inference Server on one Tesla P4, model
``resnet50_netdef`` (FP32), 4 GPU instances, dynamic batching with preferred batch sizes 4 and
8, a maximum queue delay of 10 ms and max batch 128; open-loop constant-rate load, one pass =
5,394 requests at a target QPS; latency measured at the client. Test 1 (log only) = 54 passes
at 150 -> 203 QPS; test 2 = 27 passes at 203 -> 204 QPS, pass 1 a cold start.

The load each pass offered is its logged *actual* throughput, not the desired QPS: the
PERSEUS client sleeps ``1 / QPS`` after each send without catching up, so it sends 2.2-2.4%
below the desired rate at every load (the log's elapsed time exceeds ``requests / QPS`` by the
same 0.6-0.7 s from 150 to 204 QPS); ``requests / elapsed`` is what the server received.

What is predicted from what:

* per-batch device work: roofline of the profiled ``resnet50`` inference pass on the catalog
  P4 (5.5 TFLOP/s FP32, 192 GB/s). Its FP32 compute efficiency is the achieved fraction of
  peak of the other Pascal GPU in the published CM-DARE data (P100, from
  :meth:`gpucast.predict.speed.SpeedModel.achieved_efficiency` fitted on
  ``cmdare/speed/single_gpu_speed.csv``; catalog + published data, no PERSEUS number);
  bandwidth efficiency the roofline prior (0.70). PERSEUS has no latency-vs-batch
  measurement of the P4, so this roofline curve stands in for one;
* the host path, in the order a request crosses it: the 602 KB input over the catalog's
  10 Gbit/s GCP link (a FIFO stage), the shared host (client, server CPU, TRTIS: processor
  sharing with a capacity, :mod:`gpucast.simulate.stages`), the P4's PCIe 3.0 x16 copy
  (FIFO), plus a 0.2 ms round trip; arrivals jittered inside their slot (one gap: the client
  paces with ``sleep`` and hands each request to a pool of workers);
* what is calibrated (``--calibration``; ``all`` runs every mode):

  - ``two-loads`` (default): the shared host's two numbers -- ``host_s``, a request's time on
    it when alone, and its capacity -- from the measured medians of TWO passes, the lowest
    load of test 1 (pass 1, 147 req/s) and the first warm pass of test 2 (pass 2, 199
    req/s), by :func:`gpucast.simulate.serving.calibrate_host_path` (what ``gpucast simulate
    serve --calibrate-p50-ms ... --calibrate-at RATE=P50`` runs). Every other pass of both
    tests is a prediction. Why two: on test 1 the median climbs 40% from 147 to 198 req/s
    with p95 - p50 nearly constant: the whole latency shifts as the host fills, the signature
    of processor sharing near a capacity, which no single load can place. The form was
    fixed before these scores were computed (it is the product's host model); only its two
    numbers come from the data. What the data cannot place is the saturation itself: the
    passes never exceed the load the server held, and the same latencies fit any host
    concurrency from 8 (capacity 209 req/s) to 64 (the default, 244 req/s), see
    ``benchmarks/serving_overload.py``;
  - ``cross-test-host-time``: ``host_s`` alone (capacity unlimited), from the OTHER test's
    first warm pass: what one measured median pins (``--calibrate-p50-ms`` alone). It
    shifts every load by the same amount, so the 40% rise is missed;
  - ``cross-test``: the per-kernel HOST overhead (``host_s`` of the curve: framework
    dispatch, which the 4 instances overlap), from the OTHER test's first warm pass;
  - ``cross-test-device``: same passes, the DEVICE time scaled instead (roofline compute +
    bandwidth terms, i.e. the P4's achieved efficiencies), host at its prior;
  - ``cross-test-curve``: same passes, the whole curve scaled (``calibration_scale``);
  - ``same-test``: host overhead from test 1 pass 1 for both tests;
  - ``cross-test-host-per-sample``: a PER-SAMPLE host cost in the curve
    (``LatencyCurve.host_per_sample_s``), from the other test's first warm pass;
  - ``catalog``: nothing calibrated (the default 10 us per kernel).

The previous default (before issue #13), a host capacity calibrated on ONE pass of the other
test with a contention delay ``x * rho / (1 - rho)`` added to every request, scored p50
3.6% / 6.5% and p95 4.6% / 1.2% but was not a queue: it carried no throughput limit, and
beyond its capacity it multiplied the overloaded device queue's latency by up to 99, so a
P4 offered 1.5x and 3x its peak served 87 and 8 req/s (``benchmarks/serving_overload.py``
shows both). Its form had been chosen among three by their scores on these two tests.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gpucast.catalog import load_catalog
from gpucast.domain.catalog import PCIE_X16_PAYLOAD_GBYTE_PER_S
from gpucast.domain.serving import (
    BatchingPolicy,
    Deployment,
    LatencyCurve,
    ModelDeployment,
    ServerGroup,
    ServerSpec,
)
from gpucast.domain.workload import WorkloadSpec
from gpucast.predict.roofline import RooflineEfficiency
from gpucast.predict.serving import (
    ZONE_RTT_S,
    InferenceWork,
    predict_latency_curve,
)
from gpucast.profile import profile_workload
from gpucast.simulate.arrivals import constant_count
from gpucast.simulate.serving import calibrate_host_path, simulate_serving
from gpucast.store.datasets.perseus import read_perseus_output

POLICY = BatchingPolicy(max_batch_size=128, max_queue_delay_s=0.010, preferred_batch_sizes=(4, 8))
INSTANCES = 4
NETWORK_GBPS = 10.0  # catalog: gcp n1-standard-4+1xP4
TOLERANCE_LATENCY = 0.15
TOLERANCE_THROUGHPUT = 0.05
DEFAULT_MODE = "two-loads"
LOAD_COLUMN = "actual_qps"  # the load the server received (module docstring)
SEED = 0  # arrival jitter
CLIENT_JITTER_GAPS = 1.0  # a request leaves inside its slot (client design)


def pascal_compute_efficiency(data: Path) -> tuple[float, str]:
    """FP32 compute efficiency of the P100 (the other Pascal GPU) in the CM-DARE fit."""
    csv = data / "cmdare" / "speed" / "single_gpu_speed.csv"
    default = RooflineEfficiency().compute_efficiency_fp32
    if not csv.is_file():
        return default, f"roofline default {default:.2f} (no CM-DARE data at {csv})"
    from gpucast.predict.speed import GPU_COL, SpeedModel
    from gpucast.store.datasets.cmdare_speed import read_speed_rows

    rows = read_speed_rows(csv, require_step_time=True)
    catalog = load_catalog()
    specs = {name: catalog.gpu(name) for name in sorted(rows[GPU_COL].unique())}
    model = SpeedModel().fit(rows, specs)
    eff = model.achieved_efficiency(
        batch_size=128, peak_tflops={g: spec.fp32_tflops for g, spec in specs.items()}
    )
    p100 = next(v for k, v in eff.items() if "P100" in k)
    return float(min(p100, 1.0)), f"{p100:.3f} = P100 achieved FP32 fraction (CM-DARE fit)"


COMPUTE_EFFICIENCY = [RooflineEfficiency().compute_efficiency_fp32]


@dataclass(frozen=True, slots=True, kw_only=True)
class Params:
    """The knobs a calibration may set; every one not calibrated keeps its prior."""

    kernel_overhead_s: float = RooflineEfficiency().kernel_overhead_s  # host, per kernel
    device_scale: float = 1.0  # x the roofline device time (compute + bandwidth terms)
    curve_scale: float = 1.0  # x the whole batch latency (``calibration_scale``)
    host_per_sample_s: float = 0.0  # host, per sample, added to the curve
    jitter_gaps: float = 0.0  # arrival jitter, in inter-arrival gaps (uniform, late only)
    host_capacity_rps: float | None = None  # shared host capacity (ServerSpec), None: unlimited
    host_time_s: float = 0.0  # a request's time on the shared host when alone (ServerSpec.host_s)
    host_concurrency: int = 64  # requests the shared host works on at once (ServerSpec)


def deployment(work: InferenceWork, params: Params, cold_start_s: float = 0.0) -> Deployment:
    catalog = load_catalog()
    gpu = catalog.gpu("P4")
    eff = RooflineEfficiency(
        kernel_overhead_s=params.kernel_overhead_s,
        compute_efficiency_fp32=COMPUTE_EFFICIENCY[0],
    )
    curve = predict_latency_curve(
        work,
        gpu,
        "fp32",
        max_batch=8,
        efficiency=eff,
        calibration_scale=params.curve_scale,
        device_scale=params.device_scale,
    )
    if params.host_per_sample_s:
        h = params.host_per_sample_s
        curve = LatencyCurve(
            batch_sizes=curve.batch_sizes,
            latency_s=tuple(
                t + h * b for b, t in zip(curve.batch_sizes, curve.latency_s, strict=True)
            ),
            host_s=curve.host_s,
            host_per_sample_s=h,
            source=f"{curve.source} + {h * 1e3:.2f} ms host per sample",
        )
    offer = min(catalog.find_offers(gpu="P4"), key=lambda o: o.on_demand_usd_per_hour)
    model = ModelDeployment(
        model="resnet50",
        latency=curve,
        batching=POLICY,
        instances=INSTANCES,
        memory_gib=work.memory_gib(8),
        request_overhead_s=ZONE_RTT_S,
        cold_start_s=cold_start_s,
        input_bytes=work.input_bytes_per_sample,
    )
    server = ServerSpec(
        name="P4",
        memory_gib=gpu.memory_gib,
        price_usd_per_hour=offer.on_demand_usd_per_hour,
        models=(model,),
        host_capacity_rps=params.host_capacity_rps,
        host_s=params.host_time_s,
        host_concurrency=params.host_concurrency,
        network_gbps=NETWORK_GBPS,
        pcie_gbps=PCIE_X16_PAYLOAD_GBYTE_PER_S[gpu.pcie_generation],
    )
    return Deployment(groups=(ServerGroup(server=server),))


def pass_arrivals(qps: float, requests: int, jitter_gaps: float) -> np.ndarray:
    """One pass of the constant-rate client, each request late by up to ``jitter_gaps``."""
    return constant_count(
        qps, requests, jitter_s=jitter_gaps / qps, rng=np.random.default_rng(SEED)
    )


def simulate_pass(
    dep: Deployment, qps: float, requests: int, jitter_gaps: float = 0.0
) -> dict[str, float]:
    result = simulate_serving(dep, {"resnet50": pass_arrivals(qps, requests, jitter_gaps)})
    lat = result.latencies()
    p = np.percentile(lat, [25, 50, 75, 95])
    return {
        "p25_s": p[0],
        "p50_s": p[1],
        "p75_s": p[2],
        "p95_s": p[3],
        "throughput_qps": result.throughput_rps(),
        "mean_batch": float(result.batch_size.mean()),
    }


#: what each calibrated knob is, for the printout
KNOB_LABEL = {
    "host": "host overhead per kernel",
    "device": "device-time scale (roofline compute + bandwidth terms)",
    "curve": "whole-curve scale (calibration_scale)",
    "host_per_sample": "host overhead per sample (arrivals jittered by one gap)",
    "host_time": "shared host time alone, capacity unlimited (arrivals jittered by one gap)",
    "host_path": "shared host time alone and capacity (arrivals jittered by one gap)",
}


def with_knob(knob: str, value: float) -> Params:
    if knob == "host":
        return Params(kernel_overhead_s=value)
    if knob == "device":
        return Params(device_scale=value)
    if knob == "host_per_sample":
        return Params(host_per_sample_s=value, jitter_gaps=CLIENT_JITTER_GAPS)
    if knob == "host_time":
        return Params(host_time_s=value, jitter_gaps=CLIENT_JITTER_GAPS)
    return Params(curve_scale=value)


def calibrate(
    work: InferenceWork, knob: str, qps: float, requests: int, target_p50_s: float
) -> float:
    """Value of ``knob`` that makes the simulated median of one pass equal ``target_p50_s``
    (bisection; the median grows monotonically with each knob). Host overhead is searched
    linearly in [0, 1 ms] per kernel, per-sample host in [0, 30 ms], the scales
    geometrically in [1/20, 20]; the shared host time by
    :func:`gpucast.simulate.serving.calibrate_host_path` (the product's calibration)."""
    if knob == "host_time":
        arrivals = {"resnet50": pass_arrivals(qps, requests, CLIENT_JITTER_GAPS)}
        fit = calibrate_host_path(deployment(work, Params()), [(arrivals, target_p50_s)])
        return fit.host_s
    linear = knob in ("host", "host_per_sample")
    lo, hi = {"host": (0.0, 1e-3), "host_per_sample": (0.0, 30e-3)}.get(knob, (0.05, 20.0))
    for _ in range(40):
        mid = 0.5 * (lo + hi) if linear else (lo * hi) ** 0.5
        p = with_knob(knob, mid)
        sim = simulate_pass(deployment(work, p), qps, requests, p.jitter_gaps)
        if sim["p50_s"] < target_p50_s:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi) if linear else (lo * hi) ** 0.5


def calibrate_two_loads(
    work: InferenceWork, rows: list[pd.Series], host_concurrency: int = 64
) -> Params:
    """The shared host's time alone and capacity from two passes' medians (the product's
    :func:`gpucast.simulate.serving.calibrate_host_path`)."""
    points = [
        (
            {
                "resnet50": pass_arrivals(
                    float(r[LOAD_COLUMN]), int(r["requests"]), CLIENT_JITTER_GAPS
                )
            },
            float(r["p50_s"]),
        )
        for r in rows
    ]
    fit = calibrate_host_path(deployment(work, Params(host_concurrency=host_concurrency)), points)
    return Params(
        host_time_s=fit.host_s,
        host_capacity_rps=fit.capacity_rps,
        jitter_gaps=CLIENT_JITTER_GAPS,
        host_concurrency=host_concurrency,
    )


def score(
    work: InferenceWork,
    frames: dict[str, pd.DataFrame],
    params: Params,
    skip: set[tuple[str, int]],
) -> dict[str, dict[str, float]]:
    """p50 / p95 MAPE and worst step of every warm pass not in ``skip`` ((test, pass))."""
    dep = deployment(work, params)
    out: dict[str, dict[str, float]] = {}
    for test, frame in frames.items():
        e50, e95 = [], []
        for _, row in frame.iterrows():
            k = int(row["pass"])
            if (test, k) in skip or (test == "test_2" and k == 1):
                continue
            sim = simulate_pass(dep, float(row[LOAD_COLUMN]), int(row["requests"]),
                                params.jitter_gaps)  # fmt: skip
            e50.append(abs(sim["p50_s"] / float(row["p50_s"]) - 1))
            e95.append(abs(sim["p95_s"] / float(row["p95_s"]) - 1))
        out[test] = {
            "p50_mape": float(np.mean(e50)),
            "p50_max_err": float(np.max(e50)),
            "p95_mape": float(np.mean(e95)),
            "p95_max_err": float(np.max(e95)),
        }
    return out


def describe(knob: str, value: float) -> str:
    if knob == "host":
        return f"{value * 1e6:.1f} us per kernel"
    if knob == "host_per_sample":
        mb_s = 602_112 / value / 1e6 if value > 0 else float("inf")
        return (
            f"{value * 1e3:.2f} ms per sample (= 602 KB input at {mb_s:.0f} MB/s), "
            f"jitter {CLIENT_JITTER_GAPS:g} gap (client design), 10 us per kernel (prior)"
        )
    if knob == "host_time":
        return (
            f"{value * 1e3:.2f} ms on the shared host alone, capacity unlimited, "
            f"jitter {CLIENT_JITTER_GAPS:g} gap (client design), device at its prior"
        )
    if knob == "device":
        eff = COMPUTE_EFFICIENCY[0] / value
        return (
            f"device time x{value:.3f} (achieved FP32 efficiency {eff:.3f} of peak, "
            f"bandwidth efficiency {RooflineEfficiency().bandwidth_efficiency / value:.3f})"
        )
    return f"whole curve x{value:.3f}"


#: mode -> (calibrated knob, {predicted test: test whose first warm pass calibrates it})
MODES: dict[str, tuple[str | None, dict[str, str | None]]] = {
    "two-loads": ("host_path", {"test_1": "both", "test_2": "both"}),
    "cross-test-host-time": ("host_time", {"test_1": "test_2", "test_2": "test_1"}),
    "cross-test": ("host", {"test_1": "test_2", "test_2": "test_1"}),
    "cross-test-device": ("device", {"test_1": "test_2", "test_2": "test_1"}),
    "cross-test-curve": ("curve", {"test_1": "test_2", "test_2": "test_1"}),
    "cross-test-host-per-sample": ("host_per_sample", {"test_1": "test_2", "test_2": "test_1"}),
    "same-test": ("host", {"test_1": "test_1", "test_2": "test_1"}),
    "catalog": (None, {"test_1": None, "test_2": None}),
}


def run_mode(
    mode: str, work: InferenceWork, frames: dict[str, pd.DataFrame], eff_how: str
) -> tuple[dict[str, object], list[dict[str, Any]]]:
    """Calibrate as ``mode`` says, simulate every pass of both tests, score the predictions."""
    knob, source_of = MODES[mode]
    # first warm pass of each test (test 2 pass 1 is a cold start)
    first_warm = {"test_1": frames["test_1"].iloc[0], "test_2": frames["test_2"].iloc[1]}
    params: dict[str, Params] = {}
    how: dict[str, str] = {}
    cache: dict[str, float] = {}
    calib_passes: set[tuple[str, int]] = set()
    for test, src in source_of.items():
        if src == "both":
            if "both" not in cache:
                both = calibrate_two_loads(work, [first_warm["test_1"], first_warm["test_2"]])
                cache["both"] = 0.0
                params["both"] = both
            params[test] = params["both"]
            p = params[test]
            calib_passes |= {(t, int(first_warm[t]["pass"])) for t in first_warm}
            how[test] = (
                f"{KNOB_LABEL['host_path']} calibrated on test_1 pass "
                f"{int(first_warm['test_1']['pass'])} ({first_warm['test_1'][LOAD_COLUMN]:.1f} "
                f"req/s, median {first_warm['test_1']['p50_s'] * 1e3:.1f} ms) and test_2 pass "
                f"{int(first_warm['test_2']['pass'])} ({first_warm['test_2'][LOAD_COLUMN]:.1f} "
                f"req/s, median {first_warm['test_2']['p50_s'] * 1e3:.1f} ms): "
                f"{p.host_time_s * 1e3:.2f} ms on the host alone, capacity "
                f"{p.host_capacity_rps:.1f} req/s, jitter {CLIENT_JITTER_GAPS:g} gap"
            )
            continue
        if src is None or knob is None:
            params[test] = Params()
            how[test] = "nothing calibrated: catalog priors (10 us per kernel host overhead)"
            continue
        row = first_warm[src]
        if src not in cache:
            cache[src] = calibrate(
                work, knob, float(row[LOAD_COLUMN]), int(row["requests"]), float(row["p50_s"])
            )
        params[test] = with_knob(knob, cache[src])
        if src == test:
            calib_passes.add((test, int(row["pass"])))
        how[test] = (
            f"{KNOB_LABEL[knob]} calibrated on {src} pass {int(row['pass'])} "
            f"({row[LOAD_COLUMN]:.1f} req/s, median {row['p50_s'] * 1e3:.1f} ms): "
            f"{describe(knob, cache[src])}"
        )
    rows: list[dict[str, Any]] = []
    curves = {}
    for test, frame in frames.items():
        dep = deployment(work, params[test])
        curves[test] = dep.groups[0].server.models[0].latency
        for _, row in frame.iterrows():
            cold = test == "test_2" and int(row["pass"]) == 1
            d = deployment(work, params[test], cold_start_s=10.0) if cold else dep
            sim = simulate_pass(
                d, float(row[LOAD_COLUMN]), int(row["requests"]), params[test].jitter_gaps
            )
            is_calib = (test, int(row["pass"])) in calib_passes
            rows.append(
                {
                    "test": test,
                    "pass": int(row["pass"]),
                    "desired_qps": float(row["desired_qps"]),
                    "offered_rps": float(row[LOAD_COLUMN]),
                    "measured_qps": float(row["actual_qps"]),
                    "predicted_qps": sim["throughput_qps"],
                    "measured_p50_s": float(row["p50_s"]),
                    "predicted_p50_s": sim["p50_s"],
                    "measured_p95_s": float(row["p95_s"]),
                    "predicted_p95_s": sim["p95_s"],
                    "mean_batch": sim["mean_batch"],
                    "role": (
                        "cold start (excluded)"
                        if cold
                        else "calibration"
                        if is_calib
                        else "prediction"
                    ),
                }
            )
    for r in rows:
        r["err_p50"] = r["predicted_p50_s"] / r["measured_p50_s"] - 1
        r["err_p95"] = r["predicted_p95_s"] / r["measured_p95_s"] - 1
    scored = [r for r in rows if r["role"] == "prediction"]
    summary: dict[str, object] = {
        "mode": mode,
        "compute_efficiency": eff_how,
        "calibration": how,
        "curve_ms": {
            t: {b: round(c.latency(b) * 1e3, 2) for b in (1, 2, 4, 8)} for t, c in curves.items()
        },
        "host_ms": {t: round(c.host_s * 1e3, 2) for t, c in curves.items()},
    }
    for test in ("test_1", "test_2"):
        part = [r for r in scored if r["test"] == test]
        e50 = np.abs([r["err_p50"] for r in part])
        e95 = np.abs([r["err_p95"] for r in part])
        meas_peak = max(r["measured_qps"] for r in rows if r["test"] == test)
        pred_peak = max(r["predicted_qps"] for r in rows if r["test"] == test)
        summary[test] = {
            "passes_scored": len(part),
            "p50_mape": float(e50.mean()),
            "p50_max_err": float(e50.max()),
            "p50_within_15pct": int((e50 <= TOLERANCE_LATENCY).sum()),
            "p95_mape": float(e95.mean()),
            "p95_max_err": float(e95.max()),
            "p95_within_15pct": int((e95 <= TOLERANCE_LATENCY).sum()),
            "peak_qps_measured": meas_peak,
            "peak_qps_predicted": pred_peak,
            "peak_err": pred_peak / meas_peak - 1,
        }
    return summary, rows


def print_mode(summary: dict[str, object], rows: list[dict[str, Any]]) -> None:
    mode = summary["mode"]
    eff_how = summary["compute_efficiency"]
    how = summary["calibration"]
    assert isinstance(how, dict)
    print(f"calibration mode: {mode}")
    print(f"P4 FP32 compute efficiency: {eff_how}")
    for test in ("test_1", "test_2"):
        print(f"{test}: {how[test]}")
        print(
            f"  P4 batch latency (ms) {summary['curve_ms'][test]}, "  # type: ignore[index]
            f"host part {summary['host_ms'][test]} ms"  # type: ignore[index]
        )
    print(
        f"{'test':7}{'pass':>5}{'req/s':>7}{'p50 meas':>10}{'pred':>7}{'err':>7}"
        f"{'p95 meas':>10}{'pred':>7}{'err':>7}{'thr meas':>10}{'pred':>7}{'batch':>6}  role"
    )
    for r in rows:
        print(
            f"{r['test']:7}{r['pass']:>5}{r['offered_rps']:>7.1f}"
            f"{r['measured_p50_s'] * 1e3:>10.1f}{r['predicted_p50_s'] * 1e3:>7.1f}"
            f"{r['err_p50']:>+7.0%}{r['measured_p95_s'] * 1e3:>10.1f}"
            f"{r['predicted_p95_s'] * 1e3:>7.1f}{r['err_p95']:>+7.0%}"
            f"{r['measured_qps']:>10.1f}{r['predicted_qps']:>7.1f}{r['mean_batch']:>6.2f}"
            f"  {r['role']}"
        )
    for test in ("test_1", "test_2"):
        s = summary[test]
        assert isinstance(s, dict)
        print(
            f"{test}: {s['passes_scored']} passes predicted; p50 MAPE {s['p50_mape']:.1%} "
            f"(max {s['p50_max_err']:.1%}, {s['p50_within_15pct']} within 15%); "
            f"p95 MAPE {s['p95_mape']:.1%} (max {s['p95_max_err']:.1%}, "
            f"{s['p95_within_15pct']} within 15%); served at the highest load "
            f"{s['peak_qps_predicted']:.1f} vs {s['peak_qps_measured']:.1f} req/s "
            f"({s['peak_err']:+.1%}; the load offered, not a saturation: see "
            "benchmarks/serving_overload.py)"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", type=Path, default=Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
    )
    parser.add_argument(
        "--calibration", choices=(*MODES, "all"), default=DEFAULT_MODE, help="see module doc"
    )
    parser.add_argument("--catalog-only", action="store_true", help="= --calibration catalog")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    root = args.data / "perseus"
    if not root.is_dir():
        print(f"no PERSEUS data under {root}; pass --data", file=sys.stderr)
        return 2
    frames = {
        "test_1": read_perseus_output(root / "test_1" / "test_1_output.txt").frame,
        "test_2": read_perseus_output(root / "test_2" / "test_2_output.txt").frame,
    }
    work = InferenceWork.from_profiles(
        profile_workload(WorkloadSpec(name="resnet50", batch_size=1)),
        profile_workload(WorkloadSpec(name="resnet50", batch_size=2)),
    )
    COMPUTE_EFFICIENCY[0], eff_how = pascal_compute_efficiency(args.data)
    mode = "catalog" if args.catalog_only else args.calibration
    modes = list(MODES) if mode == "all" else [mode]
    results = [run_mode(m, work, frames, eff_how) for m in modes]
    if args.json:
        out = [{"summary": sm, "passes": rw} for sm, rw in results]
        print(json.dumps(out[0] if len(out) == 1 else out, indent=2))
        return 0
    for k, (sm, rw) in enumerate(results):
        if k:
            print()
        print_mode(sm, rw)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
