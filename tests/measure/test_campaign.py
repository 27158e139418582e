"""Campaigns: sweep parsing with line numbers, expansion, crash isolation, runners.

The campaign as a process (SIGKILL, SIGTERM) is tested through the CLI in
tests/cli/test_campaign_cli.py.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from gpucast.domain.campaign import CampaignProgress, Sweep
from gpucast.domain.errors import DataFormatError, InvalidInputError
from gpucast.measure.campaign import LocalRunner, campaign_status, load_sweep, run_campaign

HERE = Path(__file__).resolve().parent
# Tiny single-process points: each measures a few mlp steps in well under a second.
FAST_SETTINGS = (
    "settings: {max_time_s: 0.2, min_samples: 3, target_ci: 0.5, steps: 3, warmup_steps: 1}"
)


def write(tmp_path: Path, text: str, name: str = "sweep.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# ------------------------------------------------------------------ loading
def test_sweep_expands_axes_and_repeats(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "name: s1\nworkloads: [mlp]\nbatch_sizes: [4, 8]\ndevices: cpu\n"
        "strategies: [single, ddp, ps]\nnprocs: [2, 3]\nps_shards: [1, 2]\nsync: [sync, async]\n"
        "repeats: 2\n",
    )
    sweep = load_sweep(path)
    points = sweep.points()
    keys = [p.key for p in points]
    assert len(keys) == len(set(keys))
    # per repeat and batch size: 1 single + 2 ddp + ps (n=2: shards 1 x 2 modes; n=3: 2 x 2)
    assert len(points) == 2 * 2 * (1 + 2 + 2 + 4)
    assert "mlp/bs4/fp32/cpu/ps/n3/shards2/async/r1" in keys
    assert all(p.nproc == 1 for p in points if p.strategy == "single")


def test_one_process_and_no_gpu_pass_where_they_mean_something(tmp_path: Path) -> None:
    """Only a ddp/fsdp point needs 2+ processes, only a CUDA point a GPU (QA 40 C7)."""
    single = write(tmp_path, "workloads: [mlp]\nbatch_sizes: [4]\nnprocs: [1]\n", "a.yaml")
    assert [p.nproc for p in load_sweep(single).points()] == [1]
    cpu = "workloads: [mlp]\nbatch_sizes: [4]\ndevices: [cpu]\nsettings: {gpus_per_point: 0}\n"
    assert load_sweep(write(tmp_path, cpu, "b.yaml")).settings.gpus_per_point == 0


def test_sweep_precisions_take_any_case(tmp_path: Path) -> None:
    from gpucast.app.campaign import _check_workload

    path = write(tmp_path, "workloads: [mlp]\nbatch_sizes: [4]\nprecisions: [FP32, Bf16]\n")
    sweep = load_sweep(path, check_workload=_check_workload)
    assert sweep.precisions == ("fp32", "bf16")
    bad = write(tmp_path, "workloads: [mlp]\nbatch_sizes: [4]\nprecisions: [FP4]\n", "bad.yaml")
    with pytest.raises(DataFormatError, match=r"'precisions'.*fp32, bf16, fp16") as info:
        load_sweep(bad, check_workload=_check_workload)
    assert "line 3" in str(info.value)


@pytest.mark.parametrize(
    ("text", "line", "pattern"),
    [
        ("workloads: [mlp]\nbatch_sizes: [4]\nbogus: 1\n", 3, "'bogus'.*unknown key"),
        ("workloads: [mlp]\nbatch_sizes: []\n", 2, "'batch_sizes'.*empty"),
        ("workloads:\n  - mlp\n  - resnet-9000\nbatch_sizes: [4]\n", 3, "'workloads'.*resnet-9000"),
        ("batch_sizes: [4]\nworkloads: [cifar-resnet21]\n", 2, "'workloads'.*depth.*got 21"),
        ("workloads: [mlp]\nbatch_sizes: [4]\nsettings:\n  stepz: 3\n", 4, "settings.stepz"),
        ("workloads: [mlp]\nbatch_sizes: [4, x]\n", 2, "'batch_sizes'.*integer"),
        # a configuration among the workloads: its options are checked as its points build it
        (
            "batch_sizes: [4]\nworkloads:\n  - mlp\n  - mlp -o bogus=1\n",
            4,
            "'workloads'.*mlp option 'bogus'.*mlp takes hidden",
        ),
        # QA session 36 #24: no fix, and a YAML `nan` was "not a number" rather than not finite
        (
            "workloads: [mlp]\nbatch_sizes: [4]\ndevices: [tpu]\n",
            3,
            r"'devices'.*tpu.*; e\.g\. devices: \[cpu\]",
        ),
        (
            "workloads: [mlp]\nbatch_sizes: [4]\nsettings: {max_time_s: nan}\n",
            3,
            r"'settings.max_time_s'.*finite number > 0 \(got 'nan'\); e\.g\. settings: \{max_t",
        ),
        (
            "workloads: [mlp]\nbatch_sizes: [4]\nsettings: {timeout_s: .inf}\n",
            3,
            r"'settings.timeout_s'.*finite number > 0.*; e\.g\. settings: \{timeout_s: 1800\}",
        ),
        (
            "workloads: [mlp]\nbatch_sizes: [4]\nsettings: {steps: 1}\n",
            3,
            r"settings.steps.*; e\.g\. settings: \{steps: 20\}",
        ),
        # QA session 36: both passed the sweep's check, then failed at every point (exit 1)
        (
            "workloads: [mlp]\nbatch_sizes: [4]\nsettings: {min_samples: 1000000000}\n",
            3,
            "settings.min_samples'.*<= 100,000",
        ),
        ("workloads: [mlp]\nbatch_sizes: [4]\nsettings: {target_ci: 5}\n", 3, "target_ci.*1\\]"),
        ("workloads: [mlp]\nbatch_sizes: [4\n", None, "not valid YAML"),
        ("workloads: [mlp]\nbatch_sizes: [4]\nworkloads: [gcn]\n", 3, "'workloads'.*lines 1 and 3"),
        # QA 38 M F7: both are plain mlp (the built-in value), measured twice without a word
        (
            'batch_sizes: [4]\nworkloads:\n  - mlp\n  - "mlp -o hidden=1024,1024"\n',
            4,
            r"'workloads'.*is mlp, listed already \(line 3\); list it once .*repeats",
        ),
        (
            'batch_sizes: [4]\nworkloads:\n  - "mlp -o hidden=1024,1024"\n  - mlp\n',
            4,
            r"'workloads'.*'mlp' is mlp, listed already \(line 3\)",
        ),
        # QA 40 C9: "key 'workloads': workload: cannot import ..." named the field twice
        (
            'workloads: ["nosuchmod_qa40:factory"]\nbatch_sizes: [4]\n',
            1,
            r"key 'workloads': cannot import module 'nosuchmod_qa40'",
        ),
        # QA 40 C1: a key with no value raised yaml's ParserError as a traceback (exit 1)
        ("workloads:\nbatch_sizes: [4]\n", 1, r"'workloads'.*empty.*; give workloads a value"),
        ("workloads: [mlp]\nbatch_sizes:\n", 2, r"'batch_sizes'.*empty.*batch_sizes: \[32\]"),
        ("workloads: [mlp]\nbatch_sizes: [4]\nsync: ~\n", 3, r"'sync'.*empty"),
        ("workloads: [mlp]\nbatch_sizes: [4]\nrepeats:\n", 3, r"'repeats'.*has no value; give"),
        ("name:\nworkloads: [mlp]\nbatch_sizes: [4]\n", 1, r"'name'.*has no value"),
        ("workloads: [mlp]\nbatch_sizes: [4]\nsettings:\n", 3, r"'settings'.*got no value"),
        # QA 40 C7: a 1-process ddp/fsdp point (measure train --nproc 1: exit 2) and a CUDA
        # point Ray reserves no GPU for were accepted
        (
            "workloads: [mlp]\nbatch_sizes: [4]\nstrategies: [single, ddp]\nnprocs: [1, 2]\n",
            4,
            r"'nprocs'.*ddp needs at least 2 processes.*\(got 1\); e\.g\. nprocs: \[2, 4\]",
        ),
        (
            "workloads: [mlp]\nbatch_sizes: [4]\nstrategies: [fsdp]\nnprocs: 1\n",
            4,
            r"'nprocs'.*fsdp needs at least 2",
        ),
        (
            "workloads: [mlp]\nbatch_sizes: [4]\ndevices: [cuda]\n"
            "settings: {steps: 3, gpus_per_point: 0}\n",
            4,
            r"'settings.gpus_per_point'.*> 0 with device cuda.*; drop it",
        ),
        # QA 40 C6: name "" said the constraint without what it got, nor a fix
        (
            'name: ""\nworkloads: [mlp]\nbatch_sizes: [4]\n',
            1,
            r"'name'.*'\.', '_' or '-' \(got ''\); e\.g\. name: p100-scaling",
        ),
        (
            "workloads: [mlp]\nbatch_sizes: [4]\nsettings: {steps: }\n",
            3,
            r"'settings.steps'.*has no value",
        ),
        (
            "workloads: [mlp]\nbatch_sizes: [4]\nsettings:\n  steps: 5\n  steps: 50\n",
            5,
            "'steps' is given twice \\(lines 4 and 5\\)",
        ),
    ],
)
@pytest.mark.parametrize("names_only", [False, True], ids=["build", "app-check"])
def test_bad_sweeps_name_the_key_and_line(
    tmp_path: Path, text: str, line: int | None, pattern: str, names_only: bool
) -> None:
    # the app's check (cached names for built-ins, no torch in the driver) finds what
    # building every workload finds
    from gpucast.app.campaign import _check_workload

    path = write(tmp_path, text)
    with pytest.raises(DataFormatError, match=pattern) as info:
        load_sweep(path, check_workload=_check_workload) if names_only else load_sweep(path)
    if line is not None:
        assert f"line {line}" in str(info.value)


# ------------------------------------------------------------------ running
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


def test_crashing_point_fails_alone_and_can_be_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = HERE / "exiting_model.py"
    path = write(
        tmp_path,
        f"workloads: [mlp, '{model}:factory']\nbatch_sizes: [4]\ndevices: [cpu]\n{FAST_SETTINGS}\n",
    )
    db = tmp_path / "c.db"
    monkeypatch.setenv("GPUCAST_TEST_CRASH", "1")
    result = run_campaign(load_sweep(path), db)
    assert result.status == "incomplete"
    status = campaign_status(db, "sweep")
    by_status = {p["status"]: p for p in status["points"]}
    assert set(by_status) == {"done", "failed"}
    assert (
        "killed by signal" in by_status["failed"]["error"]
        or "code 7" in by_status["failed"]["error"]
    )
    monkeypatch.delenv("GPUCAST_TEST_CRASH")
    assert run_campaign(load_sweep(path), db).status == "incomplete"  # failures not retried
    again = run_campaign(load_sweep(path), db, retry_failed=True)
    assert again.status == "done" and again.progress.done == 2
    runs, points = _rows(db)
    assert runs == 2 and [p[1] for p in points] == ["done", "done"]


def test_status_of_an_unknown_campaign_lists_the_known(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    fast = load_sweep(write(tmp_path, f"workloads: [mlp]\nbatch_sizes: [2]\n{FAST_SETTINGS}\n"))
    sweep = Sweep(
        name="tiny", workloads=("mlp",), batch_sizes=(2,), devices=("cpu",), settings=fast.settings
    )
    run_campaign(sweep, db)
    with pytest.raises(InvalidInputError, match="known: tiny"):
        campaign_status(db, "other")
    assert campaign_status(db, "tiny")["done"] == 1


def test_distributed_points_are_stored_as_distributed_runs(tmp_path: Path) -> None:
    sweep = write(
        tmp_path,
        f"workloads: [mlp]\nbatch_sizes: [4]\ndevices: [cpu]\nstrategies: [ps]\nnprocs: [2]\n"
        f"sync: [async]\n{FAST_SETTINGS}\n",
    )
    db = tmp_path / "c.db"
    result = run_campaign(load_sweep(sweep), db)
    assert result.status == "done", campaign_status(db, "sweep")
    from gpucast.store import Store
    from gpucast.store.campaigns import load_distributed

    with Store(db) as store:
        (m,) = load_distributed(store)
    assert m.config.label == "ps-async" and m.config.n_workers == 1


def test_a_configured_workload_is_measured_and_stored_as_configured(tmp_path: Path) -> None:
    """``workloads: ["mlp -o hidden=8"]``: every point (single and distributed) builds the
    configured model and stores its run under that name, as ``measure train -o`` does."""
    sweep = write(
        tmp_path,
        'workloads: ["mlp -o hidden=8"]\nbatch_sizes: [4]\ndevices: [cpu]\n'
        f"strategies: [single, ddp]\nnprocs: [2]\n{FAST_SETTINGS}\n",
    )
    db = tmp_path / "c.db"
    result = run_campaign(load_sweep(sweep), db)
    assert result.status == "done", campaign_status(db, "sweep")
    from gpucast.store import Store
    from gpucast.store.campaigns import load_distributed

    with Store(db) as store:
        assert {r.workload for r in store.list_runs()} == {"mlp -o hidden=8"}
        (m,) = load_distributed(store)
        (single,) = store.list_runs(kind="measurement")
        spec = store.get_run(single.id).measurement().spec
    assert spec.options == (("hidden", (8,)),) and m.spec.options == (("hidden", (8,)),)
    assert m.n_parameters == 784 * 8 + 8 + 8 * 10 + 10  # mlp's 784 -> 8 -> 10 layers


def test_ray_runner_runs_points_as_tasks(tmp_path: Path) -> None:
    pytest.importorskip("ray", reason="ray is an optional extra (pip install 'gpucast[ray]')")
    from gpucast.measure.campaign_ray import RayRunner

    sweep = write(
        tmp_path, f"workloads: [mlp]\nbatch_sizes: [2, 4]\ndevices: [cpu]\n{FAST_SETTINGS}\n"
    )
    db = tmp_path / "c.db"
    ray_runner = RayRunner(
        address=None, init_kwargs={"num_cpus": 2, "num_gpus": 0, "include_dashboard": False}
    )
    result = run_campaign(load_sweep(sweep), db, runner=ray_runner)
    assert result.status == "done" and result.progress.done == 2
    runs, points = _rows(db)
    assert runs == 2 and {p[1] for p in points} == {"done"}


def test_a_stop_before_the_first_point_leaves_everything_pending(tmp_path: Path) -> None:
    sweep = write(tmp_path, f"workloads: [mlp]\nbatch_sizes: [2, 4]\n{FAST_SETTINGS}\n")
    db = tmp_path / "c.db"
    seen: list[CampaignProgress] = []
    result = run_campaign(
        load_sweep(sweep), db, runner=LocalRunner(), should_stop=lambda: True,
        on_progress=seen.append,
    )  # fmt: skip
    assert result.status == "interrupted" and result.progress.pending == 2
    assert seen and seen[-1] == result.progress
    assert campaign_status(db, "sweep")["resumable"]
    assert _rows(db)[0] == 0


def test_point_resources_for_ray() -> None:
    from gpucast.domain.campaign import CampaignPoint, MeasureSettings
    from gpucast.measure.campaign_ray import resources_for

    gpu = CampaignPoint(
        workload="mlp", batch_size=2, precision="fp32", device="cuda", strategy="ddp", nproc=4
    )
    cpu = CampaignPoint(
        workload="mlp", batch_size=2, precision="fp32", device="cpu", strategy="single"
    )
    assert resources_for(gpu, MeasureSettings()) == {"num_cpus": 4.0, "num_gpus": 4.0}
    assert resources_for(cpu, MeasureSettings()) == {"num_cpus": 1.0, "num_gpus": 0.0}
    assert resources_for(gpu, MeasureSettings(gpus_per_point=1))["num_gpus"] == 1.0
