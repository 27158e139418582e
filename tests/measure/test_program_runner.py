"""Running any program: exit codes, signals, timeouts, metric, pinning, children, stopping."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from gpucast.domain.program import ProgramRun
from gpucast.measure.program import ProgramSpec, find_metric, measure_program, run_once

PY = sys.executable
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")


def _py(code: str, **kw) -> ProgramSpec:
    return ProgramSpec(command=(PY, "-c", code), interval_s=0.02, **kw)


def test_an_ok_run_has_its_metric_times_and_series() -> None:
    run = run_once(
        ProgramSpec(
            command=(PY, "-c", "s = sum(i*i for i in range(300000)); print('tx/s=12.5 tx/s=13')"),
            metric=re.compile(r"tx/s=(\d+\.?\d*)"),
            interval_s=0.02,
        )
    )
    assert run.status == "ok" and run.exit_code == 0
    assert run.metric_value == 13.0  # the last match
    assert run.wall_s > 0 and run.user_s > 0
    assert run.max_rss_bytes > 0
    s = run.series
    assert s is not None and s.n_samples >= 2
    assert list(s.t_s) == sorted(s.t_s)
    assert all(b >= a for a, b in zip(s.read_chars, s.read_chars[1:], strict=False))


def test_a_non_zero_exit_keeps_the_stderr_tail() -> None:
    run = run_once(_py("import sys; print('no good', file=sys.stderr); sys.exit(3)"))
    assert run.status == "exit" and run.exit_code == 3
    assert run.stderr_tail[-1] == "no good"
    assert "exited with code 3" in run.failure() and "no good" in run.failure()


def test_a_signal_is_recorded() -> None:
    run = run_once(_py("import os, signal; os.kill(os.getpid(), signal.SIGKILL)"))
    assert run.status == "signal" and run.signal == 9 and run.exit_code is None


def test_a_timeout_kills_the_whole_process_group() -> None:
    code = "import subprocess, time; subprocess.Popen(['sleep', '60']); time.sleep(60)"
    run = run_once(_py(code, timeout_s=0.3))
    assert run.status == "timeout"
    assert "timeout of 0.3 s" in run.failure(timeout_s=0.3)


def test_a_metric_never_printed_fails_the_run() -> None:
    run = run_once(_py("print('hello')", metric=re.compile(r"x=(\d+)")))
    assert run.status == "no_metric"


def test_cpus_pin_the_program() -> None:
    cpu = min(os.sched_getaffinity(0))
    run = run_once(
        _py("import os; print('n=' + str(len(os.sched_getaffinity(0))))", cpus=(cpu,),
            metric=re.compile(r"n=(\d+)"))
    )  # fmt: skip
    assert run.metric_value == 1.0


def test_cpu_time_of_children_is_counted(tmp_path: Path) -> None:
    # each grandchild writes down its own CPU time as it ends: the program's rusage must hold
    # all of it (comparing with a separate run's CPU time instead was noisy under load)
    spent = tmp_path / "spent.txt"
    script = tmp_path / "child.py"
    script.write_text(
        "import resource\n"
        "s = sum(i * i for i in range(400000))\n"
        "r = resource.getrusage(resource.RUSAGE_SELF)\n"
        f"open({str(spent)!r}, 'a').write(f'{{r.ru_utime + r.ru_stime}}\\n')\n"
    )
    child = f"{PY} {script}"
    run = run_once(ProgramSpec(command=("sh", "-c", f"{child}; {child}"), interval_s=0.02))
    assert run.status == "ok"
    children = [float(v) for v in spent.read_text().split()]
    assert len(children) == 2 and all(v > 0 for v in children)
    assert run.user_s + run.system_s >= 0.99 * sum(children)
    assert run.series is not None
    assert max(run.series.cpu_cores) > 0


def test_find_metric_ignores_what_is_not_a_number() -> None:
    pattern = re.compile(r"v=(\S+)")
    assert find_metric(pattern, "v=abc v=1,234.5 v=nan") == 1234.5
    assert find_metric(pattern, "nothing") is None
    assert find_metric(None, "v=1") is None


def _fake(walls: list[float], fail_at: int | None = None):
    calls: list[bool] = []

    def runner(spec: ProgramSpec, *, index: int, warmup: bool) -> ProgramRun:
        calls.append(warmup)
        status = "exit" if fail_at is not None and index == fail_at else "ok"
        return ProgramRun(
            index=index, warmup=warmup, status=status, wall_s=walls[index % len(walls)],
            exit_code=0 if status == "ok" else 1,
        )  # fmt: skip

    return runner, calls


def _measure(runner, *, repeats: int, warmup: int, target_ci: float = 0.5):
    from gpucast.domain.measurement import EnvironmentFingerprint

    env = EnvironmentFingerprint(
        host="h", os="o", python_version="3", cpu_model="c", cpu_cores=2, torch_threads=1,
        torch_version="2",
    )  # fmt: skip
    return measure_program(
        ProgramSpec(command=("x",)), name="x", repeats=repeats, warmup=warmup,
        target_ci=target_ci, max_time_s=60.0, environment=env, runner=runner,
    )  # fmt: skip


@pytest.mark.parametrize(("warmup", "repeats"), [(0, 3), (1, 3), (2, 4), (3, 1), (0, 1)])
def test_warmup_and_repeats_are_honoured(warmup: int, repeats: int) -> None:
    runner, _ = _fake([1.0])
    m = _measure(runner, repeats=repeats, warmup=warmup)
    assert sum(r.warmup for r in m.runs) == warmup
    assert m.n_samples >= repeats
    assert m.stop_reason in ("ci_reached", "sample_cap")
    assert [r.index for r in m.runs] == list(range(len(m.runs)))


def test_the_stopping_rule_runs_until_the_ci_is_tight() -> None:
    runner, _ = _fake([1.0, 2.0, 1.5, 1.2, 1.8])
    m = _measure(runner, repeats=3, warmup=1, target_ci=0.05)
    assert m.stop_reason == "ci_reached"
    assert m.n_samples > 3
    assert m.ci_halfwidth_rel is not None and m.ci_halfwidth_rel <= 0.05


def test_a_failed_run_stops_and_is_kept() -> None:
    runner, _ = _fake([1.0], fail_at=3)
    m = _measure(runner, repeats=10, warmup=1)
    assert m.stop_reason == "failed" and m.status == "failed"
    assert m.runs[-1].status == "exit" and len(m.runs) == 4
    assert m.n_samples == 2  # runs 1 and 2 (run 0 warmed up)


def test_a_program_faster_than_one_interval_still_has_a_series() -> None:
    run = run_once(ProgramSpec(command=("true",), interval_s=5.0))
    assert run.status == "ok"
    assert run.series is not None and run.series.n_samples >= 2
