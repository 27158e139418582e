"""`gpucast --help`, `--version` and light verbs must not pay for the numeric stack at start-up."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HEAVY = ("torch", "pandas", "scipy", "numpy", "sklearn", "pyarrow")


def _loaded_after(statement: str) -> list[str]:
    code = (
        "import json, sys\n"
        f"{statement}\n"
        f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=120
    )
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


def test_importing_the_cli_loads_no_numeric_stack() -> None:
    assert _loaded_after("import gpucast.cli.app") == []


def test_the_check_sees_a_heavy_import() -> None:
    # The probe itself works: a verb that needs pandas does show up.
    assert "pandas" in _loaded_after("import gpucast.cli.app\nimport pandas")


def test_version_and_help_load_no_numeric_stack() -> None:
    for argv in (["--version"], ["--help"], ["plan", "train", "--help"]):
        statement = (
            "from gpucast.cli.app import main\n"
            f"sys.argv = ['gpucast', *{argv!r}]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass"
        )
        assert _loaded_after(statement) == [], argv


def test_a_campaign_driver_and_its_ray_tasks_load_no_torch(tmp_path: Path) -> None:
    # The driver only starts the points' processes (which import torch themselves): checking
    # a sweep of built-ins and running its campaign must not cost the driver a torch import
    # (once the built-in names are cached: the first call lists them, importing torch).
    from gpucast.inputs.workload import builtin_workloads

    assert "mlp" in builtin_workloads()
    sweep = tmp_path / "s.yaml"
    sweep.write_text(
        "workloads: [mlp]\nbatch_sizes: [1]\ndevices: [cpu, auto]\nstrategies: [single, ddp]\n"
        "settings: {max_time_s: 0.2}\n"
    )
    statement = (  # the device check (session 38) imports torch for a cuda device only; the
        # ranks-per-host bound (QA 40 C11) reads the host's memory without it
        "import gpucast.measure.campaign, gpucast.measure.campaign_ray\n"
        "from gpucast.app.campaign import _check_device, _check_nprocs, _check_workload\n"
        "from gpucast.measure.campaign import load_sweep\n"
        f"load_sweep({str(sweep)!r}, check_workload=_check_workload, check_device=_check_device,"
        " check_nprocs=_check_nprocs)"
    )
    assert "torch" not in _loaded_after(statement)


def test_lazy_measure_packages_resolve_every_public_name() -> None:
    import gpucast.measure
    import gpucast.measure.distributed

    for package in (gpucast.measure, gpucast.measure.distributed):
        for name in package.__all__:
            assert callable(getattr(package, name)), name
