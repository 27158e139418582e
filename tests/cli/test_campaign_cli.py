"""`gpucast campaign run|status` through Typer's CliRunner, and as a process killed by signals."""

from __future__ import annotations

import json
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from typer.testing import CliRunner

from gpucast.app import campaign_status
from gpucast.cli.app import app

runner = CliRunner()


def write(tmp_path: Path, text: str, name: str = "sweep.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_run_then_status_as_json(tmp_path: Path) -> None:
    sweep = write(
        tmp_path,
        "workloads: [mlp]\nbatch_sizes: [2, 4]\ndevices: [cpu]\n"
        "settings: {max_time_s: 0.2, min_samples: 3, target_ci: 0.5}\n",
        name="tiny.yaml",
    )
    db = tmp_path / "c.db"
    result = runner.invoke(app, ["--db", str(db), "campaign", "run", str(sweep), "--json"])
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["campaign"] == "tiny" and data["done"] == 2 and data["status"] == "done"
    assert data == campaign_status(campaign="tiny", db=db).to_dict()
    status = runner.invoke(app, ["--db", str(db), "campaign", "status", "--campaign", "tiny"])
    assert status.exit_code == 0 and "done" in status.stdout
    by_file = runner.invoke(app, ["--db", str(db), "campaign", "status", str(sweep), "--json"])
    assert by_file.exit_code == 0 and json.loads(by_file.stdout) == data
    listed = runner.invoke(app, ["--db", str(db), "runs", "list", "--json"])
    assert listed.exit_code == 0 and json.loads(listed.stdout)["total"] == 2


def test_bad_sweep_is_exit_2_with_key_and_line(tmp_path: Path) -> None:
    sweep = write(tmp_path, "workloads: [mlp]\nbatch_sizes: [2]\nstrategy: [ddp]\n")
    result = runner.invoke(app, ["--db", str(tmp_path / "c.db"), "campaign", "run", str(sweep)])
    assert result.exit_code == 2
    assert "line 3" in result.stderr and "'strategy'" in result.stderr
    assert not (tmp_path / "c.db").exists()


def test_an_empty_sweep_says_what_a_sweep_needs(tmp_path: Path) -> None:
    """QA 35 S #24: a 0-byte sweep said 'is empty; check the path' (the path was right)."""
    for text in ("", "\n  \n"):
        sweep = write(tmp_path, text)
        result = runner.invoke(app, ["--db", str(tmp_path / "c.db"), "campaign", "run", str(sweep)])
        assert result.exit_code == 2, result.output
        line = " ".join(result.stderr.split())
        assert "is empty: a sweep needs at least workloads and batch_sizes" in line
        assert "check the path" not in line and "'workloads: [mlp]'" in line
    assert not (tmp_path / "c.db").exists()


def test_bad_backend_and_address_are_exit_2_before_anything_runs(tmp_path: Path) -> None:
    sweep = write(tmp_path, "workloads: [mlp]\nbatch_sizes: [2]\n")
    db = tmp_path / "c.db"
    for args, text in ((["--backend", "slurm"], "backend"), (["--address", "auto"], "address")):
        result = runner.invoke(app, ["--db", str(db), "campaign", "run", str(sweep), *args])
        assert result.exit_code == 2, (args, result.output)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and text in lines[0]
    assert not db.exists()


def test_status_needs_exactly_one_selector(tmp_path: Path) -> None:
    result = runner.invoke(app, ["--db", str(tmp_path / "c.db"), "campaign", "status"])
    assert result.exit_code == 2 and "--campaign" in result.stderr


def test_status_of_a_missing_store_creates_nothing(tmp_path: Path) -> None:
    db = tmp_path / "none.db"
    result = runner.invoke(app, ["--db", str(db), "campaign", "status", "--campaign", "x"])
    assert result.exit_code == 2 and "error: campaign: no campaign 'x'" in result.stderr
    assert not db.exists()


def test_status_of_a_sweep_never_run_is_every_point_pending(tmp_path: Path) -> None:
    sweep = write(tmp_path, "workloads: [mlp]\nbatch_sizes: [2, 4, 8]\ndevices: [cpu]\n",
                  name="never.yaml")  # fmt: skip
    db = tmp_path / "none.db"
    result = runner.invoke(app, ["--db", str(db), "campaign", "status", str(sweep)])
    assert result.exit_code == 0, result.stderr
    assert "campaign never: not started" in result.stdout and "note: " in result.stderr
    data = json.loads(
        runner.invoke(app, ["--db", str(db), "campaign", "status", str(sweep), "--json"]).stdout
    )
    assert (data["total"], data["pending"], data["status"]) == (3, 3, "not started")
    assert not db.exists()


# ------------------------------------------------------------------ the CLI as a process
def _gpucast(*args: str, stdout: int | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gpucast", *args],
        stdout=subprocess.DEVNULL if stdout is None else stdout,
        stderr=subprocess.PIPE,
        text=True,
    )


def _rows(db: Path) -> tuple[int, list[tuple[str, str, int | None]]]:
    """Stored runs and campaign points; (0, []) while the driver is still creating the schema."""
    with sqlite3.connect(db) as conn:
        try:
            runs = conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
            points = conn.execute(
                "SELECT point_key, status, run_id FROM campaign_points ORDER BY position"
            ).fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):
                raise
            return 0, []
    return runs, points


def _done_now(db: Path) -> int:
    """Points done so far, for polling: never waits on the driver's locks (-1 when unreadable)."""
    if not db.exists():
        return -1
    try:
        with sqlite3.connect(db, timeout=0.05) as conn:
            row = conn.execute("SELECT COUNT(*) FROM campaign_points WHERE status = 'done'")
            return int(row.fetchone()[0])
    except sqlite3.OperationalError:
        return -1


def test_a_bad_sweep_runs_nothing(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    path = write(tmp_path, "workloads: [nope]\nbatch_sizes: [4]\n")
    proc = _gpucast("--db", str(db), "campaign", "run", str(path))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "line 1" in err and "nope" in err
    assert not db.exists()


def test_sigkill_at_random_moments_never_loses_or_duplicates_a_point(tmp_path: Path) -> None:
    # Each point runs its whole 0.5 s budget (an unreachable CI target), so a kill within
    # 0.6 s of reaching the target count always lands mid-campaign.
    sweep = write(
        tmp_path,
        "workloads: [mlp]\nbatch_sizes: [1, 2, 3, 4, 5, 6]\ndevices: [cpu]\n"
        "settings: {max_time_s: 0.5, min_samples: 3, target_ci: 0.000001}\n",
    )
    db = tmp_path / "c.db"
    args = ("--db", str(db), "campaign", "run", str(sweep))
    rng = random.Random(7)
    done_before = 0
    for target in (1, 3):  # kill after some progress, at a random moment within a point
        proc = _gpucast(*args)
        # wait for the event (the target count of points done), not for an amount of time:
        # the limit only stops a hung run, and is generous for a loaded CI machine
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline and proc.poll() is None:
            if _done_now(db) >= target:
                break
            time.sleep(0.05)
        assert _done_now(db) >= target or proc.poll() is not None, "no progress in 900 s"
        time.sleep(rng.uniform(0.0, 0.6))
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        runs, points = _rows(db)
        done = [p for p in points if p[1] == "done"]
        assert runs == len(done) >= max(done_before, target)  # nothing lost, nothing extra
        done_before = len(done)
        assert len(done) < 6, "the campaign finished before it could be killed"
    proc = _gpucast(*args)
    _, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err
    runs, points = _rows(db)
    assert len(points) == 6 and all(p[1] == "done" for p in points)
    run_ids = [p[2] for p in points]
    assert runs == 6 and len(set(run_ids)) == 6


def test_sigterm_stops_quickly_and_leaves_a_resumable_campaign(tmp_path: Path) -> None:
    sweep = write(
        tmp_path,
        "workloads: [mlp]\nbatch_sizes: [1, 2, 3, 4, 5, 6]\ndevices: [cpu]\n"
        "settings: {max_time_s: 2.0, min_samples: 3, target_ci: 0.0001}\n",
    )
    db = tmp_path / "c.db"
    args = ("--db", str(db), "campaign", "run", str(sweep), "--json")
    proc = _gpucast(*args, stdout=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # wait until a point is running
        if db.exists() and any(p[1] == "running" for p in _rows(db)[1]):
            break
        time.sleep(0.1)
    done_at_signal = sum(p[1] == "done" for p in _rows(db)[1])
    proc.send_signal(signal.SIGTERM)
    # "quickly" is what it does, not how long a loaded machine takes: it stops within the
    # point that was running (at most that one completes; no further point starts); the
    # timeout only guards against a hang
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert sum(p[1] == "done" for p in _rows(db)[1]) <= done_at_signal + 1
    printed = json.loads(out)
    assert printed["status"] == "interrupted" and printed["resumable"]
    status = campaign_status(campaign="sweep", db=db)
    assert status.status == "interrupted" and status.resumable
    assert status.running == 0 and status.pending >= 1
    runs, points = _rows(db)
    assert runs == sum(p[1] == "done" for p in points)
