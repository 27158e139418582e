"""Serving under overload: saturation found by search, throughput held beyond it (PERSEUS).

    .venv/bin/python benchmarks/serving_overload.py [--data ../shared/data] [--json]

1. PERSEUS tests 1-2 (ResNet-50, Tesla P4, TRTIS; ``benchmarks/serving_validation.py`` says
   how the deployment is built and calibrated: the shared host's time alone and capacity from
   two measured medians, test 1 pass 1 and test 2 pass 2). On that deployment:

   * the saturation search (:func:`gpucast.simulate.serving.find_saturation`, the PERSEUS
     client's constant-rate load, 60 s per rate): the highest rate held and the peak
     throughput, against each test's measured peak (its highest actual throughput);
   * the throughput served when offered 1.5x and 3x that saturation (and 1.5x and 3x the
     measured peak), 60 s each, against 95% of the measured peak;
   * how much of this the data pins: the host's concurrency (how many requests it works on at
     once) is not in the logs. Refitted with 8 to 64, the same two medians give the same
     latencies at every pass but place the saturation between ~209 and ~244 req/s: no pass
     offered more than the server held, so the logs bound the saturation from below only.

2. The symptom of issue #13 as a user meets it: ``gpucast simulate serve --model resnet50
   --gpu P4 --arrivals constant --instances 4 --preferred 4,8 --host-capacity-rps 330`` at
   1.5x and 3x of that deployment's saturation (before #13 this served 114 and 8 req/s of
   300 and 600 offered: the old host delay multiplied the overloaded queue's latency).

3. The mechanisms on synthetic servers (numbers from the product's simulator only): a server
   whose network link moves 146 requests/s saturates there; latency falls as dynamic batches
   fill; a bounded queue sheds load and keeps latency bounded; closed-loop clients follow
   Little's law.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gpucast
import serving_validation as sv
from gpucast.domain.serving import (
    BatchingPolicy,
    ClosedLoop,
    Deployment,
    LatencyCurve,
    ModelDeployment,
    ServerGroup,
    ServerSpec,
)
from gpucast.domain.workload import WorkloadSpec
from gpucast.predict.serving import InferenceWork
from gpucast.profile import profile_workload
from gpucast.simulate import arrivals as arr
from gpucast.simulate.serving import (
    find_saturation,
    simulate_closed_loop,
    simulate_serving,
)
from gpucast.store.datasets.perseus import read_perseus_output

DURATION_S = 60.0
TARGET_HELD = 0.95  # of the measured peak
TARGET_SATURATION = 0.05


def perseus_arrivals(rate: float, span: float) -> dict[str, np.ndarray]:
    """The PERSEUS client: constant rate, each request late by up to one gap."""
    return {
        "resnet50": arr.constant(
            rate, span, jitter_s=sv.CLIENT_JITTER_GAPS / rate, rng=np.random.default_rng(sv.SEED)
        )
    }


def served_at(dep: Deployment, rate: float) -> dict[str, float]:
    run = simulate_serving(dep, perseus_arrivals(rate, DURATION_S), horizon_s=DURATION_S)
    c = run.counts()
    return {
        "offered_rps": run.offered_rps(),
        "served_rps": run.throughput_rps(),
        "p50_s": float(np.median(run.latencies())),
        "in_flight": c["in_flight"],
    }


def perseus(data: Path, concurrencies: tuple[int, ...]) -> dict[str, Any]:
    root = data / "perseus"
    frames = {
        t: read_perseus_output(root / t / f"{t}_output.txt").frame for t in ("test_1", "test_2")
    }
    work = InferenceWork.from_profiles(
        profile_workload(WorkloadSpec(name="resnet50", batch_size=1)),
        profile_workload(WorkloadSpec(name="resnet50", batch_size=2)),
    )
    sv.COMPUTE_EFFICIENCY[0], _how = sv.pascal_compute_efficiency(data)
    rows = [frames["test_1"].iloc[0], frames["test_2"].iloc[1]]
    peaks = {t: float(f["actual_qps"].max()) for t, f in frames.items()}
    out: dict[str, Any] = {"measured_peak_rps": peaks, "by_concurrency": []}
    skip = {("test_1", int(rows[0]["pass"])), ("test_2", int(rows[1]["pass"]))}
    for k in concurrencies:
        params = sv.calibrate_two_loads(work, rows, host_concurrency=k)
        dep = sv.deployment(work, params)
        sat = find_saturation(
            dep, lambda r, s: perseus_arrivals(r, s), duration_s=DURATION_S, start_rps=200.0
        )
        entry: dict[str, Any] = {
            "host_concurrency": k,
            "host_ms": params.host_time_s * 1e3,
            "host_capacity_rps": params.host_capacity_rps,
            "saturation_rps": sat.saturation_rps,
            "peak_throughput_rps": sat.peak_throughput_rps,
            "scores": sv.score(work, frames, params, skip),
        }
        for label, base_rate in (("saturation", sat.saturation_rps),
                                 ("measured_peak", max(peaks.values()))):  # fmt: skip
            for factor in (1.5, 3.0):
                entry[f"{factor:g}x_{label}"] = served_at(dep, factor * base_rate)
        out["by_concurrency"].append(entry)
    return out


def issue_symptom() -> dict[str, Any]:
    """The README's old recommended command, offered 1.5x and 3x its saturation."""
    base = dict(model="resnet50", gpu="P4", arrivals="constant", instances=4,
                preferred=(4, 8), host_capacity_rps=330.0, duration_s=DURATION_S)  # fmt: skip
    probe = gpucast.simulate_serve(rate=150.0, find_saturation=True, **base)
    assert probe.saturation is not None
    sat = probe.saturation.saturation_rps
    out: dict[str, Any] = {"saturation_rps": sat,
                           "peak_throughput_rps": probe.saturation.peak_throughput_rps}  # fmt: skip
    for factor in (1.5, 3.0):
        run = gpucast.simulate_serve(rate=round(factor * sat, 1), **base).serving
        out[f"{factor:g}x"] = {
            "offered_rps": run.offered_rps(),
            "served_rps": run.throughput_rps(),
            "p50_s": float(np.median(run.latencies())),
        }
    return out


def mechanisms() -> dict[str, Any]:
    curve = LatencyCurve(batch_sizes=(1, 2, 4, 8), latency_s=(0.006, 0.010, 0.018, 0.034),
                         host_s=0.0017)  # fmt: skip
    payload = 150_528  # a 224x224x3 int8 image

    def deploy(policy: BatchingPolicy, **server: Any) -> Deployment:
        model = ModelDeployment(model="m", latency=curve, batching=policy, instances=4,
                                request_overhead_s=0.0002, input_bytes=payload)  # fmt: skip
        spec = ServerSpec(name="G", memory_gib=16, price_usd_per_hour=1.0, models=(model,),
                          **server)  # fmt: skip
        return Deployment(groups=(ServerGroup(server=spec),))

    dyn = BatchingPolicy(max_batch_size=8, max_queue_delay_s=0.010, preferred_batch_sizes=(4, 8))
    link = deploy(dyn, network_gbps=146 * 8 * payload / 1e9)
    sat = find_saturation(link, lambda r, s: {"m": arr.poisson(r, s, np.random.default_rng(0))},
                          duration_s=DURATION_S, start_rps=300.0)  # fmt: skip
    over = {
        f"{f:g}x": simulate_serving(link, {"m": arr.poisson(f * 146.0, DURATION_S,
                                                            np.random.default_rng(1))},
                                    horizon_s=DURATION_S).throughput_rps()
        for f in (1.5, 3.0)
    }  # fmt: skip
    fill = deploy(BatchingPolicy(max_batch_size=8, max_queue_delay_s=0.060,
                                 preferred_batch_sizes=(8,)))  # fmt: skip
    falling = {}
    for rate in (100.0, 160.0, 220.0):
        a = arr.constant(rate, 30.0, jitter_s=1 / rate, rng=np.random.default_rng(0))
        falling[f"{rate:g}"] = float(np.median(simulate_serving(fill, {"m": a}).latencies()))
    bounded = deploy(dataclasses.replace(dyn, max_queue_size=16))
    shed = simulate_serving(bounded, {"m": arr.poisson(600.0, 30.0, np.random.default_rng(2))},
                            horizon_s=30.0)  # fmt: skip
    closed = {}
    for clients in (2, 8, 32):
        run = simulate_closed_loop(deploy(dyn), {"m": ClosedLoop(clients=clients, think_s=0.01)},
                                   30.0, warmup_s=5.0)  # fmt: skip
        lat = float(np.mean(run.latencies()))
        closed[str(clients)] = {"throughput_rps": run.throughput_rps(), "mean_latency_s": lat,
                                "littles_law_rps": clients / (lat + 0.01)}  # fmt: skip
    return {
        "network_bound": {
            "link_rps": 146.0,
            "saturation_rps": sat.saturation_rps,
            "peak_throughput_rps": sat.peak_throughput_rps,
            "served_at": over,
        },
        "latency_falls_as_batches_fill_p50_s": falling,
        "bounded_queue": {
            **shed.counts(),
            "served_rps": shed.throughput_rps(),
            "p99_s": float(np.percentile(shed.latencies(), 99)),
        },
        "closed_loop": closed,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", type=Path, default=Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
    )
    parser.add_argument("--concurrency", type=int, nargs="*", default=[64, 32, 16, 8])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    out: dict[str, Any] = {}
    if (args.data / "perseus").is_dir():
        out["perseus"] = perseus(args.data, tuple(args.concurrency))
    else:
        print(f"no PERSEUS data under {args.data / 'perseus'}; section 1 skipped", file=sys.stderr)
    out["issue_symptom"] = issue_symptom()
    out["mechanisms"] = mechanisms()
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    _print(out)
    return 0


def _print(out: dict[str, Any]) -> None:
    if "perseus" in out:
        p = out["perseus"]
        peaks = p["measured_peak_rps"]
        peak = max(peaks.values())
        print(f"PERSEUS measured peak (highest actual throughput): test_1 {peaks['test_1']:.1f}, "
              f"test_2 {peaks['test_2']:.1f} req/s; targets: held >= {TARGET_HELD:.0%} of it, "
              f"saturation within {TARGET_SATURATION:.0%}")  # fmt: skip
        for e in p["by_concurrency"]:
            s = e["scores"]
            print(
                f"host concurrency {e['host_concurrency']:>2} (default 64 first): host "
                f"{e['host_ms']:.2f} ms alone, capacity {e['host_capacity_rps']:.1f} req/s; "
                f"p50 MAPE {s['test_1']['p50_mape']:.1%} / {s['test_2']['p50_mape']:.1%}, p95 "
                f"{s['test_1']['p95_mape']:.1%} / {s['test_2']['p95_mape']:.1%}"
            )
            print(
                f"   saturation search: holds {e['saturation_rps']:.1f} req/s, peak "
                f"{e['peak_throughput_rps']:.1f} ({e['saturation_rps'] / peaks['test_1'] - 1:+.1%}"
                f" / {e['saturation_rps'] / peaks['test_2'] - 1:+.1%} vs the measured peaks)"
            )
            for label in ("saturation", "measured_peak"):
                for f in ("1.5", "3"):
                    r = e[f"{f}x_{label}"]
                    ok = r["served_rps"] >= TARGET_HELD * peak
                    print(
                        f"   {f}x {label.replace('_', ' ')}: offered {r['offered_rps']:.1f}, "
                        f"served {r['served_rps']:.1f} req/s = {r['served_rps'] / peak:.1%} of "
                        f"the measured peak ({'met' if ok else 'MISSED'}), p50 "
                        f"{r['p50_s']:.2f} s, {r['in_flight']} still queued at 60 s"
                    )
    s = out["issue_symptom"]
    print(f"issue #13 symptom (--host-capacity-rps 330, constant arrivals): saturation "
          f"{s['saturation_rps']:.1f} req/s, peak {s['peak_throughput_rps']:.1f}")  # fmt: skip
    for f in ("1.5x", "3x"):
        r = s[f]
        print(f"   {f}: offered {r['offered_rps']:.1f}, served {r['served_rps']:.1f} req/s, "
              f"p50 {r['p50_s']:.2f} s")  # fmt: skip
    m = out["mechanisms"]
    n = m["network_bound"]
    print(f"network link of 146 req/s: saturation {n['saturation_rps']:.1f}, peak "
          f"{n['peak_throughput_rps']:.1f}; served at 1.5x / 3x: "
          f"{n['served_at']['1.5x']:.1f} / {n['served_at']['3x']:.1f} req/s")  # fmt: skip
    print("latency falls as batches fill (p50 ms at 100 / 160 / 220 req/s): " + " / ".join(
        f"{v * 1e3:.1f}" for v in m["latency_falls_as_batches_fill_p50_s"].values()))  # fmt: skip
    b = m["bounded_queue"]
    print(f"bounded queue (16) at 600 req/s: {b['dropped']} of {b['requests']} dropped, served "
          f"{b['served_rps']:.1f} req/s, p99 {b['p99_s'] * 1e3:.0f} ms")  # fmt: skip
    for k, v in m["closed_loop"].items():
        print(f"closed loop, {k} clients, 10 ms think: {v['throughput_rps']:.1f} req/s "
              f"(Little's law {v['littles_law_rps']:.1f})")  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
