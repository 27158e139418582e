"""Co-location slowdown predicted from demands vs measured, on real CPU processes (proxy).

    .venv/bin/python benchmarks/colocation_interference.py [--units 100] [--repeats 3]

Two real processes pinned to one core (``os.sched_setaffinity``) share it the way contexts
share a time-sliced GPU (:mod:`gpucast.measure.colocation`): a *victim* (``matmul``:
in-cache matrix products; ``memory``: 64 MB copies) does a fixed amount of work alone and
beside an *aggressor* (the same loops, or ``half``: matmul work 4 ms, asleep 4 ms). The
prediction is :func:`gpucast.predict.interference.colocated_slowdowns` under
``time-slicing`` from each loop's duty alone (1 for the busy loops; ``half`` measured as
CPU time over wall time). The issue's target: predicted within 20% of measured. A shared,
loaded machine makes the measurement noisy (each figure is the median of ``--repeats``);
MPS / streams (concurrent sharing of SMs and bandwidth) have no CPU proxy here and are not
checked by this script.
"""

from __future__ import annotations

import argparse
import json

from gpucast.measure.colocation import measure_duty, measure_pair
from gpucast.predict.interference import JobDemand, colocated_slowdowns

PAIRS = (("matmul", "matmul"), ("matmul", "memory"), ("memory", "matmul"), ("matmul", "half"))
TARGET = 0.20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    duty = {"matmul": 1.0, "memory": 1.0, "half": measure_duty("half")}
    rows = []
    for victim, aggressor in PAIRS:
        m = measure_pair(victim, aggressor, units=args.units, repeats=args.repeats)
        jobs = [
            JobDemand(name=victim, compute_fraction=1.0, duty=duty[victim]),
            JobDemand(name=aggressor, compute_fraction=1.0, duty=duty[aggressor]),
        ]
        predicted = colocated_slowdowns(jobs, "time-slicing")[0]
        rows.append(
            {
                "victim": victim,
                "aggressor": aggressor,
                "aggressor_duty": duty[aggressor],
                "measured": m.slowdown,
                "predicted": predicted,
                "error": predicted / m.slowdown - 1.0,
            }
        )
    worst = max(abs(r["error"]) for r in rows)
    if args.json:
        print(json.dumps({"rows": rows, "worst_abs_error": worst}, indent=2))
        return
    print("| victim | aggressor (duty) | measured slowdown | predicted | error |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['victim']} | {r['aggressor']} ({r['aggressor_duty']:.2f}) | "
            f"{r['measured']:.2f} | {r['predicted']:.2f} | {r['error']:+.1%} |"
        )
    verdict = "met" if worst <= TARGET else "NOT met"
    print(f"\nworst |error| {worst:.1%} (target {TARGET:.0%}: {verdict})")


if __name__ == "__main__":
    main()
