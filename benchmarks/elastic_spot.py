"""Elastic batch on spot clusters: time and cost to target, elastic vs waiting.

A synchronous all-reduce job (MLPerf ResNet-50 to 75.9% top-1, ``--target mlperf:resnet``)
on 8 spot servers of one GPU each, revoked servers replaced. Compared, same seed and runs:

* **waiting** (``simulate train`` as before): losing any worker rolls the job back to its
  last checkpoint and it resumes once every replacement is up (start-up and, under the
  pessimistic scenario, a capacity gap first);
* **elastic** (``--elastic``): the job goes on with the ready workers, its batch re-planned at
  each count (the same global batch where it fits in memory, else the per-GPU batch with the
  convergence curve's statistical efficiency), paying ``--reshard-s`` (default: the restart
  penalty, 100 s) per change, and grows back as replacements arrive.

Scenarios: AWS p3.2xlarge (V100) and GCP K80 (n1 + K80, us-east1), each under the pessimistic
and the optimistic spot scenario (SkyPilot's traces: revocations per node-day and capacity
gaps; GCP K80 has published lifetimes where ``--data-dir`` has them), and a re-shard cost
sweep on AWS. No data is fitted here: the figures are the simulator's (its own Monte Carlo
validation is ``benchmarks/transient_validation.py``).

Run: ``python benchmarks/elastic_spot.py [--runs 400] [--data-dir ../shared/data]``
(about 1 min).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

import gpucast


def _hours(seconds: float) -> str:
    return f"{seconds / 3600.0:,.1f}" if math.isfinite(seconds) else "never"


def _row(name: str, result: Any, market: str = "transient") -> str:
    runs = getattr(result, market)
    d = np.asarray(runs.duration_s)
    done = np.isfinite(d)
    never = 1.0 - float(done.mean())
    med = float(np.quantile(d, 0.5, method="higher"))
    p90 = float(np.quantile(d, 0.9, method="higher"))
    mean = float(d[done].mean()) if done.any() else math.inf
    cost = float(np.median(runs.cost_usd))
    return (
        f"| {name} | {_hours(med)} | {_hours(p90)} | {_hours(mean)} | {never:.0%} | "
        f"${cost:,.0f} | {float(np.mean(runs.revocations)):,.0f} |"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=400)
    ap.add_argument("--data-dir", type=Path, default=None)
    args = ap.parse_args(argv)
    base: dict[str, Any] = {
        "workers": 8, "spot": True, "replace": True, "workload": "resnet50",
        "strategy": "allreduce", "batch_size": 128, "target": "mlperf:resnet",
        "runs": args.runs, "seed": 0, "data_dir": args.data_dir,
    }  # fmt: skip
    clusters = {
        "AWS 8 x V100 (p3.2xlarge, us-east-1)": {
            "gpu": "V100", "region": "us-east-1", "provider": "aws",
        },
        "GCP 8 x K80 (us-east1)": {"gpu": "K80", "region": "us-east1", "provider": "gcp"},
    }  # fmt: skip
    print(
        "| scenario | median h | p90 h | mean h (finished) | P(never, 30 d) | median US$ "
        "| revocations |"
    )
    print("|---|---|---|---|---|---|---|")
    ratios: list[tuple[str, float, float]] = []
    for label, cluster in clusters.items():
        for scenario in ("pessimistic", "optimistic"):
            kw = {**base, **cluster, "spot_scenario": scenario}
            wait = gpucast.simulate_train(**kw)
            el = gpucast.simulate_train(**kw, elastic=True)
            rests = any("scenario" in str(v) for v in wait.sources.values())
            tag = f"{label}, {scenario}" if rests else f"{label}, published lifetimes"
            if scenario == "pessimistic":
                print(_row(f"{label}: on demand", wait, "on_demand"))
            print(_row(f"{tag}: waiting", wait))
            print(_row(f"{tag}: **elastic**", el))
            ratios.append(
                (
                    tag,
                    float(
                        np.quantile(el.transient.duration_s, 0.5, method="higher")
                        / np.quantile(wait.transient.duration_s, 0.5, method="higher")
                    ),
                    float(np.median(el.transient.cost_usd) / np.median(wait.transient.cost_usd)),
                )
            )
            if not rests:
                break  # the same lifetimes under both scenarios
    aws = {**base, **clusters["AWS 8 x V100 (p3.2xlarge, us-east-1)"]}
    aws["spot_scenario"] = "pessimistic"
    for reshard in (0.0, 300.0, 900.0):
        el = gpucast.simulate_train(**aws, elastic=True, reshard_s=reshard)
        print(_row(f"AWS V100 pessimistic: elastic, --reshard-s {reshard:g}", el))
    print()
    print("| scenario | elastic / waiting, median time | median cost |")
    print("|---|---|---|")
    for tag, t, c in ratios:
        print(f"| {tag} | {t:.2f}x | {c:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
