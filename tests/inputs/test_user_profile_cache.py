"""A user model's profile is cached on a hash of its code (gpucast.inputs.workload and
gpucast.inputs.user_code): a second call does not profile, editing the code does, and so does
``GPUCAST_NO_PROFILE_CACHE=1``; a tree too big to hash is profiled every time and says so."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import gpucast.profile
from gpucast.inputs import user_code as user_code_module
from gpucast.inputs.user_code import user_code
from gpucast.inputs.workload import (
    CACHED_PROFILE_NOTE,
    NO_PROFILE_CACHE_ENV,
    UNCACHED_PROFILE_NOTE,
    profile_origin,
    workload_profile,
)
from gpucast.store.cache import cache_dir

MODEL = """\
import torch
from torch import nn

from helper import WIDTH


def factory(hidden: int = 4):
    return nn.Linear(WIDTH, hidden), torch.zeros(2, WIDTH)
"""
PACKAGE = "gpucast_cache_test_pkg"


class CountingProfiler:
    """``gpucast.profile.profile_workload``, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.real = gpucast.profile.profile_workload

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return self.real(*args, **kwargs)


@pytest.fixture
def profiler(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> CountingProfiler:
    """A counting profiler and a cache of this test's own."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    counting = CountingProfiler()
    monkeypatch.setattr(gpucast.profile, "profile_workload", counting)
    return counting


@pytest.fixture
def model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``mymodel.py`` importing ``helper.py`` beside it, with a package and weights there."""
    folder = tmp_path / "project"
    (folder / "lib").mkdir(parents=True)
    (folder / "mymodel.py").write_text(MODEL, encoding="utf-8")
    (folder / "helper.py").write_text("WIDTH = 3\n", encoding="utf-8")
    (folder / "lib" / "__init__.py").write_text("", encoding="utf-8")
    (folder / "lib" / "layers.py").write_text("X = 1\n", encoding="utf-8")
    (folder / "weights.bin").write_bytes(b"\0" * 8)
    monkeypatch.syspath_prepend(str(folder))  # `from helper import WIDTH`
    return folder / "mymodel.py"


def entries() -> list[Path]:
    return sorted(cache_dir().glob("user-profile-*.json"))


def test_a_second_profile_comes_from_the_cache(profiler: CountingProfiler, model: Path) -> None:
    spec = f"{model}:factory"
    first = workload_profile(spec, "fp32")
    second = workload_profile(spec, "fp32")
    assert profiler.calls == 1
    assert len(entries()) == 1
    assert profile_origin(first) == ""  # profiled now
    note = profile_origin(second)
    assert note.startswith(CACHED_PROFILE_NOTE)
    assert user_code(spec).sha256[:12] in note and NO_PROFILE_CACHE_ENV in note  # type: ignore[index]
    assert second.notes[:-1] == first.notes
    assert second.to_dict() | {"notes": None} == first.to_dict() | {"notes": None}


@pytest.mark.parametrize(
    "key",
    [
        {"batch_size": 8},
        {"precision": "bf16"},
        {"optimizer": "adam"},
        {"options": {"hidden": 5}},
    ],
)
def test_the_parameters_are_in_the_key(
    profiler: CountingProfiler, model: Path, key: dict[str, Any]
) -> None:
    spec = f"{model}:factory"
    workload_profile(spec, "fp32")
    args = {"precision": "fp32", **key}
    other = workload_profile(spec, args.pop("precision"), **args)
    assert profiler.calls == 2
    assert profile_origin(other) == ""


@pytest.mark.parametrize("edited", ["mymodel.py", "helper.py", "lib/layers.py", "new.py"])
def test_editing_the_code_profiles_again(
    profiler: CountingProfiler, model: Path, edited: str
) -> None:
    spec = f"{model}:factory"
    workload_profile(spec, "fp32")
    path = model.parent / edited
    path.write_text((path.read_text() if path.exists() else "") + "# edited\n", encoding="utf-8")
    again = workload_profile(spec, "fp32")
    assert profiler.calls == 2
    assert profile_origin(again) == ""
    assert profile_origin(workload_profile(spec, "fp32")).startswith(CACHED_PROFILE_NOTE)
    assert profiler.calls == 2


def test_files_that_are_not_code_are_not_in_the_key(
    profiler: CountingProfiler, model: Path
) -> None:
    """Weights or configs the factory reads: the note names the bypass."""
    spec = f"{model}:factory"
    workload_profile(spec, "fp32")
    (model.parent / "weights.bin").write_bytes(b"\1" * 16)
    (model.parent / "notes.txt").write_text("not code", encoding="utf-8")
    assert NO_PROFILE_CACHE_ENV in profile_origin(workload_profile(spec, "fp32"))
    assert profiler.calls == 1


def test_the_bypass_profiles_again_and_refreshes_the_entry(
    profiler: CountingProfiler, model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = f"{model}:factory"
    workload_profile(spec, "fp32")
    monkeypatch.setenv(NO_PROFILE_CACHE_ENV, "1")
    assert profile_origin(workload_profile(spec, "fp32")) == ""
    assert profile_origin(workload_profile(spec, "fp32")) == ""
    assert profiler.calls == 3
    for off in ("0", "", "no"):
        monkeypatch.setenv(NO_PROFILE_CACHE_ENV, off)
        assert profile_origin(workload_profile(spec, "fp32")).startswith(CACHED_PROFILE_NOTE)
    assert profiler.calls == 3
    assert len(entries()) == 1


@pytest.mark.parametrize("limit", ["MAX_FILES", "MAX_BYTES", "MAX_ENTRIES"])
def test_a_tree_too_big_to_hash_is_not_cached(
    profiler: CountingProfiler, model: Path, monkeypatch: pytest.MonkeyPatch, limit: str
) -> None:
    monkeypatch.setattr(user_code_module, limit, 100 if limit == "MAX_BYTES" else 3)
    spec = f"{model}:factory"
    first = workload_profile(spec, "fp32")
    second = workload_profile(spec, "fp32")
    assert profiler.calls == 2
    assert entries() == []
    for prof in (first, second):
        (note,) = [n for n in prof.notes if n.startswith(UNCACHED_PROFILE_NOTE)]
        assert str(model.parent) in note and "too much to hash" in note
        assert "\n" not in note


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``PACKAGE.models.net`` on sys.path (from the current folder), forgotten afterwards."""
    root = tmp_path / "src" / PACKAGE
    (root / "models").mkdir(parents=True)
    (root / "__init__.py").write_text("", encoding="utf-8")
    (root / "models" / "__init__.py").write_text("", encoding="utf-8")
    (root / "models" / "net.py").write_text(MODEL.replace("from helper", "from .."), "utf-8")
    (root / "__init__.py").write_text("WIDTH = 3\n", encoding="utf-8")
    (root / "util.py").write_text("", encoding="utf-8")
    monkeypatch.chdir(root.parent)
    monkeypatch.syspath_prepend(str(root.parent))
    yield root
    for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
        del sys.modules[name]


def test_a_package_module_is_found_without_importing_it(package: Path) -> None:
    code = user_code(f"{PACKAGE}.models.net:factory")
    assert f"{PACKAGE}.models.net" not in sys.modules  # its parents may be
    assert code.module_file == (package / "models" / "net.py").resolve()
    assert code.root == package.resolve()
    assert code.n_files == 4 and code.sha256 is not None
    assert user_code(f"{PACKAGE}:factory").root == package.resolve()  # the package itself


def test_editing_a_package_file_profiles_again(profiler: CountingProfiler, package: Path) -> None:
    spec = f"{PACKAGE}.models.net:factory"
    workload_profile(spec, "fp32")
    assert profile_origin(workload_profile(spec, "fp32")).startswith(CACHED_PROFILE_NOTE)
    (package / "util.py").write_text("# edited\n", encoding="utf-8")
    assert profile_origin(workload_profile(spec, "fp32")) == ""
    assert profiler.calls == 2


def test_code_that_cannot_be_found_is_left_to_the_import(tmp_path: Path) -> None:
    missing = user_code(f"{tmp_path / 'nope.py'}:factory")
    assert missing.sha256 is None and "was not found" in missing.reason
    assert user_code("gpucast_no_such_module_xyz:factory").sha256 is None
    assert "not a Python source" in user_code("sys:factory").reason  # built into Python


def test_the_profile_verb_and_predict_train_use_the_cache(
    profiler: CountingProfiler, model: Path, tmp_path: Path
) -> None:
    import gpucast

    spec = f"{model}:factory"
    first = gpucast.profile_workload(workload=spec, batch_size=4, save=False)
    again = gpucast.profile_workload(workload=spec, batch_size=4, db=tmp_path / "s.db")
    assert profiler.calls == 1
    assert profile_origin(first.profile) == ""
    assert profile_origin(again.profile).startswith(CACHED_PROFILE_NOTE)
    assert again.run_id is not None
    predicted = [gpucast.predict_train(workload=spec, gpu="H100", batch_size=64) for _ in "ab"]
    assert profiler.calls == 2  # once at the profile batch predictions share
    assert predicted[0].profile_source == "" and predicted[0].to_dict()["profile_source"] is None
    assert predicted[1].profile_source.startswith(CACHED_PROFILE_NOTE)
    assert predicted[1].to_dict()["profile_source"] == predicted[1].profile_source
    assert predicted[1].step_time_s == predicted[0].step_time_s


def test_a_bad_user_module_creates_no_store(tmp_path: Path) -> None:
    import gpucast
    from gpucast.domain.errors import InvalidSpecError

    bad = tmp_path / "bad.py"
    bad.write_text("def factory():\n    raise ValueError('no')\n", encoding="utf-8")
    with pytest.raises(InvalidSpecError, match="ValueError: no"):
        gpucast.profile_workload(workload=f"{bad}:factory", db=tmp_path / "s.db")
    assert not (tmp_path / "s.db").exists()


def test_the_profile_verb_caches_a_built_in_too(profiler: CountingProfiler, tmp_path: Path) -> None:
    import gpucast

    first = gpucast.profile_workload(workload="mlp", batch_size=8, save=False)
    again = gpucast.profile_workload(workload="mlp", batch_size=8, db=tmp_path / "s.db")
    assert profiler.calls == 1 and again.run_id is not None
    assert again.profile.to_dict() == first.profile.to_dict()
    other = gpucast.profile_workload(workload="mlp", batch_size=16, save=False)
    assert profiler.calls == 2 and other.profile.batch_size == 16
