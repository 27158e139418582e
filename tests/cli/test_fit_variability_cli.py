"""`gpucast fit variability` through Typer's CliRunner: --runs as typed, reserved names."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from typer.testing import CliRunner

from gpucast.cli.app import app
from gpucast.domain.measurement import EnvironmentFingerprint, Measurement
from gpucast.domain.workload import WorkloadSpec
from gpucast.store import open_store

runner = CliRunner()


def _runs(db: Path, n: int = 4) -> list[int]:
    """``n`` runs of one workload configuration, one per device."""
    ids = []
    with open_store(db) as store:
        for i in range(n):
            env = EnvironmentFingerprint(
                host="node", os="Linux", python_version="3.11", cpu_model="Test CPU",
                cpu_cores=4, torch_threads=2, torch_version="2.13.0",
            )  # fmt: skip
            step = 0.1 * (1 + 0.01 * i)
            m = Measurement(
                spec=WorkloadSpec(name="mlp", batch_size=8),
                mode="train",
                device=f"cuda:{i}",
                step_times_s=tuple(step * (1 + 0.001 * k) for k in range(12)),
                warmup_step_times_s=(step * 3,),
                samples_per_step=8,
                stop_reason="ci_reached",
                target_ci=0.02,
                environment=env,
                created_at=datetime(2025, 6, 1, tzinfo=UTC),
            )
            ids.append(store.save_measurement(m))
    return ids


def test_runs_take_commas_and_repeated_flags(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    a, b, c, d = _runs(db)
    for argv in (["--runs", f"{a},{b},{c}"], ["--runs", f"{a},{b}", "--runs", str(c)],
                 ["--runs", str(a), "--runs", str(b), "--runs", f"{c}, {d}"]):  # fmt: skip
        result = runner.invoke(
            app, ["--db", str(db), "fit", "variability", "--name", "lab", *argv, "--no-save"]
        )
        assert result.exit_code == 0, result.output
        assert "stored runs" in result.output


def test_a_repeated_run_is_one_line_exit_2(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    a, b, _c, _d = _runs(db)
    result = runner.invoke(
        app, ["--db", str(db), "fit", "variability", "--name", "x", "--runs", f"{a},{b},{b}"]
    )
    assert result.exit_code == 2
    line = result.stderr.strip()
    assert line == (
        f"error: runs: run {b} is given twice (one run per GPU); give each run id once, "
        "e.g. --runs 3,4,5"
    )


def test_a_built_in_name_is_refused(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.csv"
    fleet.write_text("gpu,step_time_s\n0,1.0\n1,1.01\n2,0.99\n")
    for name in ("typical", "worst", "none"):
        result = runner.invoke(
            app,
            ["--db", str(tmp_path / "s.db"), "fit", "variability", "--name", name,
             "--factors", str(fleet)],
        )  # fmt: skip
        assert result.exit_code == 2
        line = result.stderr.strip()
        assert line.startswith(f"error: name: '{name}' is reserved for a built-in profile")
        assert "\n" not in line
    assert not (tmp_path / "s.db").exists()
