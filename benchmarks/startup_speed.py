"""CPU seconds and peak memory of the commands a user runs first, side by side with a base commit.

Issue #21's targets, each measured on this code and on ``--base`` (default: the commit the
hardening work started from) in one run, alternating, the best of ``--repeats`` runs each:

* ``gpucast --version``                                   <= 0.15 s CPU
* ``gpucast simulate serve`` of ResNet-50 (cached profile) <= 1.5 s CPU
* ``gpucast plan train`` of ``make run``                  <= 2 s CPU
* ``gpucast plan train --max-gpus 1024 --allow-mixed``    <= 1.5 GB peak RSS
* a 10-million-request trace replayed by ``simulate serve`` <= 1 GB peak RSS

CPU is user + system time of the child process (``os.wait4``), so other load on the machine
inflates it less than wall time; peak RSS is ``ru_maxrss``. Each code tree gets its own store
and cache folders, warmed by one untimed run (profiles and fits are cached, as a user's are;
bytecode is written, as an installed package has it, even where ``PYTHONDONTWRITEBYTECODE``
is set).

    python benchmarks/startup_speed.py                   # base b0eb837 vs this tree
    python benchmarks/startup_speed.py --base main --repeats 5
    python benchmarks/startup_speed.py --skip-large      # only the three CPU rows
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = (REPO / ".." / "shared" / "data").resolve()
#: The commit issue #21's hardening started from (main before the lazy CLI and batching).
DEFAULT_BASE = "b0eb837"
TRACE_REQUESTS = 10_000_000


@dataclass(frozen=True)
class Case:
    name: str
    argv: tuple[str, ...]
    target: float
    unit: str  # "s" (CPU seconds) or "GB" (peak RSS)
    large: bool = False


@dataclass
class Sample:
    cpu_s: float
    rss_gb: float
    ok: bool


def _cases(tmp: Path) -> list[Case]:
    data = ("--data-dir", str(DATA)) if (DATA / "transient").is_dir() else ()
    trace = tmp / "trace-10m.csv"
    return [
        Case("gpucast --version", ("--version",), 0.15, "s"),
        Case(
            "simulate serve resnet50 P4 (cached profile)",
            ("simulate", "serve", "--model", "resnet50", "--gpu", "P4", "--rate", "150"),
            1.5,
            "s",
        ),
        Case(
            "plan train of make run",
            (
                "plan",
                "train",
                "--workload",
                "resnet50",
                "--epochs",
                "90",
                "--dataset-size",
                "1281167",
                "--deadline",
                "24h",
                *data,
                "--report",
                str(tmp / "plan-report.html"),
            ),
            2.0,
            "s",
        ),
        Case(
            "plan train --max-gpus 1024 --allow-mixed",
            (
                "plan",
                "train",
                "--workload",
                "resnet50",
                "--epochs",
                "90",
                "--dataset-size",
                "1281167",
                "--max-gpus",
                "1024",
                "--allow-mixed",
            ),
            1.5,
            "GB",
            large=True,
        ),
        Case(
            f"simulate serve, {TRACE_REQUESTS:,}-request trace",
            (
                "simulate",
                "serve",
                "--model",
                "resnet50",
                "--gpu",
                "P4",
                "--rate",
                "1000",
                "--arrivals",
                f"trace:{trace}",
                "--duration-s",
                str(TRACE_REQUESTS / 1000 * 1.5),
                "--servers",
                "8",
                "--max-batch",
                "32",
            ),
            1.0,
            "GB",
            large=True,
        ),
    ]


def _write_trace(path: Path, n: int) -> None:
    """``n`` Poisson arrivals at 1,000 req/s as an ``arrival_s`` CSV (written in blocks)."""
    import numpy as np

    rng = np.random.default_rng(0)
    start = 0.0
    with path.open("w", encoding="utf-8") as out:
        out.write("arrival_s\n")
        for lo in range(0, n, 1_000_000):
            gaps = rng.exponential(1e-3, min(1_000_000, n - lo))
            times = start + np.cumsum(gaps)
            start = float(times[-1])
            np.savetxt(out, times, fmt="%.6f")


def _run(src: Path, home: Path, argv: tuple[str, ...]) -> Sample:
    env = {
        **os.environ,
        "PYTHONPATH": str(src),
        "GPUCAST_DB": str(home / "gpucast.db"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "XDG_DATA_HOME": str(home / "data"),
    }
    env.pop("GPUCAST_SHARED_DATA", None)
    # an installed package runs from compiled bytecode: let the warm-up run write it
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpucast", *argv],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    ok = proc.returncode == 0
    if not ok:
        print(f"  ({' '.join(argv[:3])} exited {proc.returncode}: {err.decode()[-300:]})")
    return Sample(usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 2**20, ok)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", default=DEFAULT_BASE, help="git ref to compare with")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each command")
    parser.add_argument("--skip-large", action="store_true", help="skip the two memory rows")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="gpucast-startup-"))
    try:
        base_tree = tmp / "base"
        base_tree.mkdir()
        archive = subprocess.run(
            ["git", "archive", args.base], cwd=REPO, check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(base_tree)], input=archive, check=True)
        trees = {"base": base_tree / "src", "this": REPO / "src"}
        homes = {name: tmp / f"home-{name}" for name in trees}
        cases = [c for c in _cases(tmp) if not (args.skip_large and c.large)]
        if any(c.large for c in cases):
            print(f"writing a {TRACE_REQUESTS:,}-request trace ...", flush=True)
            _write_trace(tmp / "trace-10m.csv", TRACE_REQUESTS)
        results: dict[tuple[str, str], list[Sample]] = {}
        for case in cases:
            print(f"{case.name} ...", flush=True)
            repeats = 1 if case.large else args.repeats
            for name, src in trees.items():  # warm the caches (profiles, fits) untimed
                if not case.large:
                    _run(src, homes[name], case.argv)
            for _ in range(repeats):
                for name, src in trees.items():  # alternate: both see the same load
                    results.setdefault((case.name, name), []).append(
                        _run(src, homes[name], case.argv)
                    )
        print()
        print(f"| what | base {args.base} | this tree | ratio | target | met? |")
        print("|---|---|---|---|---|---|")
        for case in cases:

            def best(name: str, case: Case = case) -> float:
                samples = [s for s in results[(case.name, name)] if s.ok]
                if not samples:
                    return float("nan")
                pick = min if case.unit == "s" else max
                return pick(s.cpu_s if case.unit == "s" else s.rss_gb for s in samples)

            before, after = best("base"), best("this")
            unit = "s CPU" if case.unit == "s" else "GB peak RSS"
            met = "yes" if after <= case.target else "no"
            print(
                f"| {case.name} | {before:.2f} {unit} | {after:.2f} {unit} | "
                f"{before / after:.1f}x | <= {case.target:g} | {met} |"
            )
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
