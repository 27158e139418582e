"""A stored program run (``measure cmd``) as (what, value) rows of plain text: ``runs show``
and ``measure cmd`` print them as a Rich table, the runs report (``report --runs``) as an HTML
one, so the two never say different things (QA 41 R: the report had no failure, no
dedicated-equivalent time, no work metric and unrounded figures)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpucast.domain.units import format_seconds


def format_bytes(value: float | None) -> str:
    """Bytes with a binary unit, three significant figures: ``13.3 MiB``; ``-`` for none."""
    if value is None:
        return "-"
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.0f} B"


def program_rows(result: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Timing, work metric, machine, then the resource profile of a program run; the stderr
    tail of a failed run last."""
    rows = [("command", " ".join(str(a) for a in result["command"])[:200])]
    status = result["status"]
    rows.append(("status", "ok" if status == "ok" else f"failed: {result.get('failure')}"))
    rows.append(("median run", format_seconds(result.get("median_s"))))
    dedicated = result.get("dedicated_median_s")
    if dedicated is not None:
        rows.append(
            (
                "dedicated-equivalent",
                f"{format_seconds(dedicated)} median (the wall time less the "
                f"{result.get('contention_share') or 0.0:.0%} other tasks on this machine took)",
            )
        )
    rows.append(("mean run", format_seconds(result.get("mean_s"))))
    ci = result.get("ci_halfwidth_rel")
    rows.append(
        ("95% CI of mean", "-" if ci is None else f"±{ci:.1%} (target ±{result['target_ci']:.0%})")
    )
    rows.append(
        (
            "p5 / p95",
            f"{format_seconds(result.get('p5_s'))} / {format_seconds(result.get('p95_s'))}",
        )
    )
    runs = result["runs"]
    n_warm = sum(1 for r in runs if r["warmup"])
    rows.append(
        (
            "runs",
            f"{result['n_samples']} measured, {n_warm} warm-up · stop: {result['stop_reason']}",
        )
    )
    if result.get("metric_pattern"):
        value = result.get("metric_median")
        rows.append(
            (
                "work metric",
                f"{result['metric_name']} = "
                + ("-" if value is None else f"{value:,.4g}")
                + (" (a rate)" if result.get("metric_is_rate") else " per run"),
            )
        )
    work = result.get("work_per_s")
    if work is not None:
        rows.append(("work rate", f"{work:,.4g} {result['work_unit']}/s"))
    env = result["environment"]
    rows.append(("host", f"{env['host']} · {env['cpu_model']} · {env['cpu_cores']} CPUs"))
    profile = result.get("profile")
    if profile:
        shares = profile["shares"]
        rows.append(
            (
                "bound by",
                f"{profile['bound_by']} ("
                + ", ".join(f"{k} {v:.0%}" for k, v in shares.items() if v >= 0.005)
                + " of the time)",
            )
        )
        phases = profile["phases"]
        rows.append(
            (
                "phases",
                " → ".join(
                    f"{p['bound_by']} {p['start_s']:.1f}-{p['end_s']:.1f} s" for p in phases[:8]
                )
                + (" …" if len(phases) > 8 else ""),
            )
        )
        rows.append(
            (
                "CPU (cores)",
                f"{profile['cpu_cores_mean']:.2f} mean, {profile['cpu_cores_peak']:.2f} peak · "
                f"{profile['parallelism']:.2f} when busy · burstiness (CV) "
                f"{profile['burstiness']:.2f} · waiting for a CPU {profile['cpu_wait_share']:.0%}",
            )
        )
        rows.append(
            (
                "memory (RSS)",
                f"{format_bytes(profile['rss_mean_bytes'])} mean, "
                f"{format_bytes(profile['rss_peak_bytes'])} peak",
            )
        )
        rows.append(
            (
                "I/O",
                f"{format_bytes(profile['io_mean_bytes_per_s'])}/s mean, "
                f"{format_bytes(profile['io_peak_bytes_per_s'])}/s peak",
            )
        )
        if profile.get("gpu_util_mean_pct") is not None:
            rows.append(("GPU utilisation", f"{profile['gpu_util_mean_pct']:.0f}% mean"))
    failed = next((r for r in runs if r["status"] != "ok"), None)
    if failed is not None and failed["stderr_tail"]:
        rows.append(("stderr tail", "\n".join(failed["stderr_tail"][-5:])))
    return rows
