"""PARIS + ELSA against homogeneous MIG partitions and whole GPUs, on two model mixes.

    .venv/bin/python benchmarks/mig_serving_plan.py [--duration-s 10] [--json]

For each mix (NAME:RATE:SLO_MS on A100-40GB) two tables:

1. **Plan** (``gpucast plan serve --mix``): PARIS's layouts (the fewest GPUs whose slices
   carry every rate within its SLO, heterogeneous layouts allowed) under ELSA, least-loaded
   and round robin, and each homogeneous layout (``7x 1g.5gb`` ... ``1x 7g.40gb``) and whole
   GPUs planned the same way alone, under round robin (FIFO per slice): GPUs, US$/h,
   capacity (the profile's), simulated share of requests within SLO and goodput.
2. **Throughput at equal SLO attainment, equal GPUs**: every layout family on PARIS's GPU
   count (slices assigned by the same programme), the offered mix scaled up (each model
   keeping its share) by bisection to the highest load at which >= 99% of requests still
   finish within their SLO; that load is the configuration's throughput. The published
   claim (PARIS and ELSA, DAC 2022) as a trend: heterogeneous partitioning + ELSA carries
   more than homogeneous partitions (+ FIFO) at the same attainment.

What is synthetic: the latency curves are gpucast's roofline predictions (eager PyTorch
efficiencies fitted on the step-time data; slices by their SM and memory-slice shares,
validated for one slice size, ``validation.csv`` row ``mig-slice``), the traffic is Poisson,
the mixes are "published-style" (vision + language models at the rates and SLOs such papers
use), not a trace. Nothing here is a measurement on a GPU.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from gpucast.app.serve import PlanServeRequest, mig_mix_inputs, plan_serve
from gpucast.plan.mig_serve import (
    LayoutChoice,
    MixModel,
    choose_layouts,
    simulate_choice,
    slice_fit,
)
from gpucast.simulate import arrivals as gen

MIXES = (
    ("vision+language", ("resnet50:2000:50", "bert-base:600:100")),
    ("three models", ("shufflenetv2:3000:20", "resnet50:1000:50", "bert-large:150:200")),
)
TARGET = 0.99


def _traffic(mix: Sequence[MixModel], scale: float, seconds: float, seed: int) -> dict[str, Any]:
    return {
        m.name: gen.poisson(m.rate_rps * scale, seconds, np.random.default_rng([seed, k]))
        for k, m in enumerate(mix)
    }


def _max_load(
    choice: LayoutChoice, dispatch: str, inputs: Any, seconds: float, seed: int
) -> tuple[float, float]:
    """(highest load scale with >= TARGET within SLO, its goodput req/s) by bisection."""
    mix = inputs.mix

    def ok(scale: float) -> tuple[bool, float]:
        out = simulate_choice(
            choice, mix, inputs.profiles, inputs.slice_types,
            _traffic(mix, scale, seconds, seed), dispatch=dispatch, horizon_s=seconds,
            seed=seed,
        )  # fmt: skip
        return out.attainment >= TARGET, out.goodput_rps

    lo, hi = 0.0, max(choice.scale, 0.05) * 1.5
    good = 0.0
    while ok(hi)[0]:
        lo, hi = hi, hi * 1.5
    for _ in range(7):
        mid = (lo + hi) / 2
        passed, rps = ok(mid)
        if passed:
            lo, good = mid, rps
        else:
            hi = mid
    if good == 0.0 and lo > 0:
        good = ok(lo)[1]
    return lo, good


def run(duration_s: float, seed: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for title, mix_items in MIXES:
        request = PlanServeRequest(mix=mix_items, duration_s=duration_s, seed=seed)
        plan = plan_serve(request).plan  # type: ignore[union-attr]
        inputs = mig_mix_inputs(request)
        rows_plan = []
        for o in plan.outcomes:
            choice = plan.choice(o.choice)
            rows_plan.append(
                {
                    "choice": o.choice,
                    "layouts": choice.describe(),
                    "dispatch": o.dispatch,
                    "gpus": o.gpus,
                    "cost_usd_per_hour": o.cost_usd_per_hour,
                    "capacity_rps": choice.capacity_rps,
                    "attainment": o.attainment,
                    "goodput_rps": o.goodput_rps,
                    "p99_ms": {k: v * 1e3 for k, v in o.p99_latency_s.items()},
                }
            )
        paris = plan.choices[0]
        gpus = paris.gpus
        fits = {
            (m.name, t): slice_fit(
                inputs.profiles[(m.name, t)],
                inputs.slice_types[t],
                m.slo_s,
                max_batch=inputs.max_batch,
                max_utilisation=0.8,
            )
            for m in inputs.mix
            for t in inputs.slice_types
        }
        rows_equal = []
        runs: list[tuple[LayoutChoice, str]] = [
            (paris, "elsa"), (paris, "least_loaded"), (paris, "round_robin"),
        ]  # fmt: skip
        for lay in inputs.baselines:
            same = choose_layouts(
                lay.label, inputs.mix, fits, [lay],
                gpu_price_usd_per_hour=inputs.price_usd_per_hour, gpus=gpus,
            )  # fmt: skip
            if same is None or any(
                not any(s.model == m.name for s in same.slices) for m in inputs.mix
            ):
                rows_equal.append({"choice": lay.label, "dispatch": "-", "note": "cannot serve"})
                continue
            runs += [(same, "round_robin"), (same, "elsa")]
        for choice, dispatch in runs:
            scale, goodput = _max_load(choice, dispatch, inputs, duration_s, seed)
            rows_equal.append(
                {
                    "choice": choice.name,
                    "layouts": choice.describe(),
                    "dispatch": dispatch,
                    "gpus": choice.gpus,
                    "max_load_scale": scale,
                    "throughput_rps": goodput,
                }
            )
        best_baseline = max(
            (r["throughput_rps"] for r in rows_equal
             if r["choice"] != "paris" and r.get("dispatch") == "round_robin"),
            default=math.nan,
        )  # fmt: skip
        paris_elsa = next(
            r["throughput_rps"] for r in rows_equal
            if r["choice"] == "paris" and r["dispatch"] == "elsa"
        )  # fmt: skip
        out[title] = {
            "mix": list(mix_items),
            "plan": rows_plan,
            "equal_gpus": rows_equal,
            "paris_elsa_over_best_baseline_fifo": paris_elsa / best_baseline,
        }
    return out


def _print(results: dict[str, Any]) -> None:
    for title, r in results.items():
        print(f"\n## {title}: {', '.join(r['mix'])} (A100-40GB)\n")
        print(
            "| choice | layouts | dispatch | GPUs | US$/h | capacity req/s | in SLO "
            "| goodput req/s |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for row in r["plan"]:
            print(
                f"| {row['choice']} | {row['layouts']} | {row['dispatch']} | {row['gpus']} | "
                f"{row['cost_usd_per_hour']:.2f} | {row['capacity_rps']:.0f} | "
                f"{row['attainment']:.1%} | {row['goodput_rps']:.0f} |"
            )
        print("\nthroughput at >= 99% within SLO, equal GPUs:\n")
        print("| choice | dispatch | GPUs | max load (x offered) | throughput req/s |")
        print("|---|---|---|---|---|")
        for row in r["equal_gpus"]:
            if "note" in row:
                print(f"| {row['choice']} | - | - | {row['note']} | - |")
                continue
            print(
                f"| {row['choice']} | {row['dispatch']} | {row['gpus']} | "
                f"{row['max_load_scale']:.2f} | {row['throughput_rps']:.0f} |"
            )
        print(
            f"\nPARIS + ELSA over the best baseline (homogeneous MIG or whole GPUs) + FIFO: "
            f"{r['paris_elsa_over_best_baseline_fifo']:.2f}x"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration-s", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = run(args.duration_s, args.seed)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        _print(results)


if __name__ == "__main__":
    main()
