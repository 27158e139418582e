"""Shared test fixtures: the published data folder, the GPU marker, an isolated store."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

# No test may depend on wall-clock speed: Hypothesis's per-example deadline (200 ms) and
# too-slow health check fail on a loaded CI machine that is several times slower than ours.
settings.register_profile("gpucast", deadline=None, suppress_health_check=(HealthCheck.too_slow,))
settings.load_profile("gpucast")

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = (REPO_ROOT / ".." / "shared" / "data").resolve()


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:  # pragma: no cover
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _cuda_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device; none on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


def _load_benchmark(name: str) -> ModuleType:
    path = REPO_ROOT / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being defined
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def load_benchmark() -> Callable[[str], ModuleType]:
    """``load_benchmark(name)``: ``benchmarks/<name>.py`` imported as a module (the
    benchmarks are scripts, not a package), so a test can run a benchmark's core."""
    return _load_benchmark


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The published measurements in ../shared/data; skips the test when absent."""
    if not (SHARED_DATA / "README.md").is_file():
        pytest.skip(f"published data not found at {SHARED_DATA} (clone with ../shared beside it)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def _run_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One fit-and-profile cache for the whole test run, shared by the xdist workers (the
    parent of their temp folders): its entries are keyed on everything they depend on (code,
    data files with their mtimes, parameters) and written atomically, so sharing them only
    saves recomputing the same profile or fit (profiling CM-DARE's models cold: ~40 s).
    ``tests/store/test_cache.py``, which counts entries, keeps a cache per test."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if base.name.startswith("popen-gw") else base
    folder = root / "xdg-cache-run"
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(autouse=True)
def _isolated_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _run_cache: Path) -> None:
    """Never let a test write the user's real store or cache."""
    monkeypatch.setenv("GPUCAST_DB", str(tmp_path / "gpucast-test.db"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(_run_cache))
    monkeypatch.delenv("GPUCAST_SHARED_DATA", raising=False)
    monkeypatch.delenv("GPUCAST_OFFERS", raising=False)
    monkeypatch.delenv("GPUCAST_NO_PROFILE_CACHE", raising=False)


@pytest.fixture(scope="session", autouse=True)
def _one_click_command_per_app() -> Iterator[None]:
    """Typer's ``CliRunner.invoke`` rebuilds the whole click command tree on every call (~60
    ms here: every parameter's signature and Pydantic coercion adapter, then each verb's group
    again), which is what a process pays once at start-up and the suite paid ~4,000 times.
    A click command is built to be invoked repeatedly, so each Typer app is built once per
    test process and reused (its verbs stay loaded; its parameters keep their adapters). The
    CLI's own start-up is tested in subprocesses (``tests/cli/test_startup.py``)."""
    import typer.testing

    build = getattr(typer.testing, "_get_command", None)
    if build is None:  # a Typer without the hook: every invoke builds, as before
        yield
        return
    built: dict[int, tuple[object, Any]] = {}

    def once(app: Any) -> Any:
        if id(app) not in built:
            built[id(app)] = (app, build(app))  # keeps the app alive: its id stays its own
        return built[id(app)][1]

    typer.testing._get_command = once
    try:
        yield
    finally:
        typer.testing._get_command = build
