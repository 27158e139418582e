"""Keep-alive Pareto fronts: fixed keep-alives against the hybrid histogram over its knobs, as
Shahrad et al. (USENIX ATC'20) Fig. 15 draws them, and where the hybrid's wasted memory comes
from (issue #19).

    .venv/bin/python benchmarks/serverless_pareto.py [--functions 2000] [--days 7] [--seeds 1]

The same generated traces as ``benchmarks/serverless_keepalive.py``
(:mod:`gpucast.simulate.faas_workload`, ``catalog/data/faas_workload.csv``), every function
the same memory. Points: fixed keep-alives of 5 minutes to 2 hours; the hybrid histogram with
a range of 1-4 hours and head/tail percentiles 5/99 (the paper's) or 5/95. Each is (3rd
quartile of the functions' cold-start %, wasted memory-time / fixed 10 min's). A point
dominates another when it has no more cold starts and no more memory, and fewer of one.

Then the default hybrid (4 h, 5/99)'s wasted memory split by the window each idle gap fell
in -- the histogram's (pre-warm at p5 -10%, keep to p99 +10%), the forecast's (idle times
mostly beyond the range: +-15% around the next one), the conservative fallback's (histogram
not representative -- bin-count CV below 2 -- or empty: the whole range kept) -- by the
functions' arrival pattern and mean rate, beside fixed 10 minutes'.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np

from gpucast.catalog.faas import load_faas_mix
from gpucast.domain.serverless import KeepAlivePolicy, parse_policy
from gpucast.simulate.faas_workload import PATTERNS, FaasWorkload, generate_faas_workload
from gpucast.simulate.serverless import busy_bins, keep_alive_windows, simulate_keep_alive

FIXED_MIN = (5, 10, 20, 30, 45, 60, 90, 120)
HYBRID = tuple(
    (range_h, head, tail) for range_h in (1, 2, 3, 4) for head, tail in ((5.0, 99.0), (5.0, 95.0))
)


def _policies() -> dict[str, KeepAlivePolicy]:
    out = {f"fixed {m} min": parse_policy(f"fixed:{m}m") for m in FIXED_MIN}
    base = parse_policy("histogram")
    for range_h, head, tail in HYBRID:
        out[f"hybrid {range_h} h p{head:g}/p{tail:g}"] = dataclasses.replace(
            base, range_s=range_h * 3600.0, head_percentile=head, tail_percentile=tail
        )
    return out


def _dominated(point: tuple[float, float], others: list[tuple[float, float]]) -> bool:
    c, w = point
    return any(oc <= c and ow <= w and (oc < c or ow < w) for oc, ow in others)


def waste_by_window(counts: np.ndarray, policy: KeepAlivePolicy) -> dict[str, np.ndarray]:
    """Per function, the loaded-idle bins spent in each kind of window -- the same windows as
    ``simulate_keep_alive``: ``histogram`` (pre-warm at the head, keep to the tail),
    ``forecast`` (idle times mostly beyond the range: around the forecast next one) and
    ``fallback`` (histogram not representative or empty: the whole range kept)."""
    n_f, n_t = counts.shape
    b = busy_bins(counts)
    func, tm, gap, rank, last = b.func, b.time, b.gap, b.rank, b.last
    win = keep_alive_windows(func, tm, gap, rank, n_f, policy, policy.bin_s)
    # the same policy never forecasting: where its windows differ, the forecast made them
    never = dataclasses.replace(policy, history=2**40)
    plain = keep_alive_windows(func, tm, gap, rank, n_f, never, policy.bin_s)
    n_range = round(policy.range_s / policy.bin_s)
    # the idle gap after busy bin k (to the next busy bin, or to the end of the horizon)
    after = np.where(last, (n_t - 1) - tm, np.append(gap[1:], 0))
    loaded = np.maximum(0, np.minimum(after, win.keep) - win.pre).astype(np.float64)
    forecast = (win.pre != plain.pre) | (win.keep != plain.keep)
    fallback = ~forecast & (win.pre == 0) & (win.keep == n_range)
    kinds = {"histogram": ~forecast & ~fallback, "forecast": forecast, "fallback": fallback}
    return {
        k: np.bincount(func, weights=np.where(m, loaded, 0.0), minlength=n_f)
        for k, m in kinds.items()
    }


#: classes of mean invocation rate (per day) the split is shown by
RATE_CLASSES = (
    ("<= 1/hour", 0.0, 24.0),
    ("1/hour-1/10 min", 24.0, 144.0),
    ("1/10 min-1/min", 144.0, 1440.0),
    ("> 1/min", 1440.0, np.inf),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--functions", type=int, default=2000)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--seeds", type=int, default=1)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    policies = _policies()
    sums: dict[str, list[tuple[float, float]]] = {k: [] for k in policies}
    mix = load_faas_mix()
    split: tuple[dict[str, np.ndarray], np.ndarray, FaasWorkload] | None = None
    for seed in range(args.seeds):
        work = generate_faas_workload(
            args.functions, np.random.default_rng(seed), mix=mix, minutes=1440 * args.days
        )
        for name, policy in policies.items():
            r = simulate_keep_alive(
                work.counts, policy=policy, exec_s=1.0, cold_s=1.0, memory_gib=1.0
            )
            sums[name].append((r.app_cold_start_pct(75.0), float(r.wasted_memory_gib_s.sum())))
        if seed == 0:
            waste = waste_by_window(work.counts, parse_policy("histogram"))
            base = simulate_keep_alive(
                work.counts, policy=parse_policy("fixed:10m"), exec_s=1.0, cold_s=1.0,
                memory_gib=1.0,
            )  # fmt: skip
            split = (waste, base.wasted_memory_gib_s / 60.0, work)
    base_w = float(np.mean([w for _, w in sums["fixed 10 min"]]))
    table = {
        k: (float(np.mean([c for c, _ in v])), float(np.mean([w for _, w in v])) / base_w)
        for k, v in sums.items()
    }
    fixed = [table[f"fixed {m} min"] for m in FIXED_MIN]
    fixed_w = np.array([w for _, w in fixed])
    fixed_c = np.array([c for c, _ in fixed])
    print(
        f"{args.functions:,} generated functions x {args.days} days, {args.seeds} seed(s); "
        "wasted memory-time / fixed 10 min"
    )
    print(f"{'policy':<26}{'p75 app cold %':>15}{'memory':>9}  {'fixed front at this memory':>28}")
    for name, (c, w) in table.items():
        at = float(np.interp(w, fixed_w, fixed_c)) if w <= fixed_w.max() else float("nan")
        beats = [
            f"fixed {m}" for m, p in zip(FIXED_MIN, fixed, strict=True) if _dominated(p, [(c, w)])
        ]
        note = f"{at:>10.1f}%" if name.startswith("hybrid") and np.isfinite(at) else ""
        if name.startswith("hybrid") and beats:
            note += f"  dominates {', '.join(beats)} min"
        print(f"{name:<26}{c:>15.1f}{w:>9.2f}  {note}")
    hybrid_pts = [v for k, v in table.items() if k.startswith("hybrid")]
    front = [k for k, v in table.items() if not _dominated(v, list(table.values()))]
    print("Pareto front (all points): " + "; ".join(front))
    c10, w10 = table["fixed 10 min"]
    better = [k for k, (c, w) in table.items() if k.startswith("hybrid") and c < c10 and w <= w10]
    print(
        "hybrid settings with fewer cold starts than fixed 10 min at equal or lower memory: "
        + (", ".join(better) if better else "none")
    )
    print(
        f"hybrid points dominated by a fixed one: "
        f"{sum(_dominated(p, fixed) for p in hybrid_pts)} of {len(hybrid_pts)}"
    )
    if split is not None:
        waste, fixed10, work = split
        total = float(fixed10.sum())
        print(
            "default hybrid (4 h, p5/p99), seed 0: wasted memory by window, as a share of fixed "
            "10 min's total"
        )
        print(
            f"  {'functions':<22}{'n':>6}{'fixed 10 min':>14}{'histogram':>11}{'forecast':>10}"
            f"{'fallback':>10}{'hybrid':>8}"
        )
        rate = work.rate_per_day
        groups = [(p, work.pattern == p) for p in PATTERNS]
        groups += [(label, (rate > lo) & (rate <= hi)) for label, lo, hi in RATE_CLASSES]
        groups.append(("all", np.ones(rate.size, dtype=bool)))
        for label, sel in groups:
            parts = [float(waste[k][sel].sum()) / total for k in waste]
            print(
                f"  {label:<22}{int(sel.sum()):>6}{fixed10[sel].sum() / total:>14.2f}"
                + "".join(f"{v:>{w}.2f}" for v, w in zip(parts, (11, 10, 10), strict=True))
                + f"{sum(parts):>8.2f}"
            )
    print(f"({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
