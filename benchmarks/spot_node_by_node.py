"""A synchronous spot cluster simulated node by node (session 39), checked three ways.

1. `plan train`'s Monte Carlo (:func:`gpucast.plan.risk.simulate_spots`) of a DDP job on 16 and
   64 nodes of GCE's K80 lifetime fit (Weibull shape 0.49, scale 260.2 h, no cap), 4 h at full
   speed: mean time and revocations a run, against an independent count -- nodes x the
   renewals one node sees over the mean run (a plain loop of fresh lifetimes). Before session
   39 the cluster was one first-of-N server: 3.7 / 54.8 revocations, 4.37 / 5.82 h.
2. The window hazard Young's interval takes (:func:`gpucast.plan.risk.window_hazard_per_s`)
   for a one-hour K80 job, its long-run ``1 / mean lifetime`` beside it.
3. The pruning table (:class:`gpucast.plan.risk.WindowHazards`) against the direct rate at 9
   run lengths from 2 minutes to 58 days, for Weibull shapes 0.49, 0.8 and 3 (no cap).

    .venv/bin/python benchmarks/spot_node_by_node.py [--runs 2000]
"""

from __future__ import annotations

import argparse

import numpy as np

from gpucast.plan.risk import (
    SpotDelays,
    SpotJob,
    SpotPart,
    WindowHazards,
    mean_lifetime_s,
    simulate_spots,
    window_hazard_per_s,
)
from gpucast.predict.revocation import WeibullLifetime

HOUR = 3600.0
K80 = WeibullLifetime(scale_s=260.2 * HOUR, shape=0.49, cap_s=None)


def renewals(life: WeibullLifetime, horizon_s: float, draws: int = 20_000) -> float:
    """E[revocations] of one node and its replacements over ``horizon_s``, by a plain loop."""
    rng = np.random.default_rng(7)
    total = 0
    for _ in range(draws):
        t = life.scale_s * rng.weibull(life.shape)
        while t <= horizon_s:
            total += 1
            t += life.scale_s * rng.weibull(life.shape)
    return total / draws


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2000)
    args = ap.parse_args(argv)
    print("| nodes | mean time h | revocations a run | nodes x one node's renewals |")
    print("|---|---|---|---|")
    for nodes in (16, 64):
        part = SpotPart(
            instance_type="n1-standard-8+4xK80", nodes=nodes, spot_usd_per_hour=1.0,
            on_demand_usd_per_hour=3.0, lifetime=K80, gpus_per_node=4,
        )  # fmt: skip
        job = SpotJob(
            key=f"k80x{nodes}", region="us-east1", parts=(part,), synchronous=True,
            steps=14_400, speed=np.array([0.0, 1.0]), ps_shards=0, cpu_usd_per_hour=0.0,
            deadline_s=None, expected_time_s=4 * HOUR,
        )  # fmt: skip
        delays = SpotDelays(startup_spot_s=60.0, startup_on_demand_s=60.0)
        (out,) = simulate_spots(
            [(job, delays)], runs=args.runs, seed=3, checkpoint_s=10.0, restart_penalty_s=60.0
        )
        expected = nodes * renewals(K80, out.time_mean_s)
        print(
            f"| {nodes} | {out.time_mean_s / HOUR:.2f} | {out.revocations_mean:.2f} "
            f"| {expected:.2f} |"
        )
    print()
    print(
        f"one-hour K80 job: window hazard {window_hazard_per_s(K80, HOUR):.3g}/s "
        f"(20,000 draws: {window_hazard_per_s(K80, HOUR, draws=20_000):.3g}); "
        f"long-run 1 / mean lifetime {1.0 / mean_lifetime_s(K80):.3g}/s"
    )
    print()
    print("| shape | scale h | pruning table / direct rate, min-max over 9 run lengths |")
    print("|---|---|---|")
    for shape, scale_h in ((0.49, 260.2), (0.8, 0.5), (3.0, 10.0)):
        life = WeibullLifetime(scale_s=scale_h * HOUR, shape=shape, cap_s=None)
        table = WindowHazards.of(life)
        ratios = [
            float(table(t)) / window_hazard_per_s(life, float(t), draws=4000)
            for t in np.geomspace(120.0, 5e6, 9)
        ]
        print(f"| {shape:g} | {scale_h:g} | {min(ratios):.3f}-{max(ratios):.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
