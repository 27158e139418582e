"""The fit cache (gpucast.store.cache): hits, invalidation, corrupt and unwritable caches."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from gpucast.domain.errors import DataFormatError
from gpucast.predict.overheads import CheckpointModel
from gpucast.store import cache
from gpucast.store.cache import cache_dir, cache_key, cached_fit, cached_json, cached_model

ROWS = "checkpoint_mb,duration_s\n10,1.2\n20,2.1\n40,4.3\n80,8.0\n160,16.5\n"


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests count the cache's entries: each gets an empty cache of its own."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    path = tmp_path / "data" / "checkpoints.csv"
    path.parent.mkdir()
    path.write_text(ROWS, encoding="utf-8")
    return path


class CountingFit:
    """A real CheckpointModel fit on ``path`` that counts how often it ran."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.calls = 0

    def __call__(self) -> CheckpointModel:
        self.calls += 1
        return CheckpointModel().fit(pd.read_csv(self.path))


def fetch(fit: Callable[[], CheckpointModel], path: Path, **params: Any) -> CheckpointModel:
    return cached_model("ckpt", fit, model_type=CheckpointModel, files=[path], params=params)


def entries() -> list[Path]:
    return sorted(cache_dir().glob("ckpt-*.json"))


def test_cache_dir_follows_xdg_cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c" / "gpucast"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")  # ignored, as the XDG spec says
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "gpucast"


def test_a_hit_returns_an_equal_model_without_fitting(data_file: Path) -> None:
    fit = CountingFit(data_file)
    first = fetch(fit, data_file)
    assert fit.calls == 1 and len(entries()) == 1
    second = fetch(fit, data_file)
    assert fit.calls == 1
    assert second is not first
    assert second.to_dict() == first.to_dict()
    assert second.predict(50.0).value == first.predict(50.0).value


def test_other_parameters_are_another_entry(data_file: Path) -> None:
    fit = CountingFit(data_file)
    fetch(fit, data_file, loss="l1")
    fetch(fit, data_file, loss="l2")
    fetch(fit, data_file, loss="l1")
    assert fit.calls == 2 and len(entries()) == 2


def test_touching_the_data_file_invalidates(data_file: Path) -> None:
    fit = CountingFit(data_file)
    fetch(fit, data_file)
    st = data_file.stat()
    os.utime(data_file, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    fetch(fit, data_file)
    assert fit.calls == 2
    fetch(fit, data_file)
    assert fit.calls == 2


def test_editing_the_data_refits_on_the_new_data(data_file: Path) -> None:
    fit = CountingFit(data_file)
    before = fetch(fit, data_file)
    data_file.write_text(ROWS + "320,70.0\n", encoding="utf-8")  # size changes too
    after = fetch(fit, data_file)
    assert fit.calls == 2
    assert after.to_dict() != before.to_dict()


def test_a_file_added_to_a_data_folder_invalidates(data_file: Path) -> None:
    calls = []

    def fit() -> CheckpointModel:
        calls.append(1)
        return CheckpointModel().fit(pd.read_csv(data_file))

    folder = data_file.parent
    cached_model("ckpt", fit, model_type=CheckpointModel, files=[folder])
    cached_model("ckpt", fit, model_type=CheckpointModel, files=[folder])
    (folder / "more.csv").write_text(ROWS, encoding="utf-8")
    cached_model("ckpt", fit, model_type=CheckpointModel, files=[folder])
    assert len(calls) == 2


def test_a_corrupt_cache_file_is_refitted_and_overwritten(data_file: Path) -> None:
    fit = CountingFit(data_file)
    good = fetch(fit, data_file)
    (entry,) = entries()
    entry.write_text('{"gpucast_cache": 1, "key": ', encoding="utf-8")
    again = fetch(fit, data_file)
    assert fit.calls == 2
    assert again.to_dict() == good.to_dict()
    assert json.loads(entry.read_text(encoding="utf-8"))["value"]["model"] == good.to_dict()
    assert [p.name for p in entry.parent.iterdir()] == [entry.name]  # no temp file left
    fetch(fit, data_file)
    assert fit.calls == 2


def test_an_entry_whose_state_no_longer_loads_is_refitted(data_file: Path) -> None:
    fit = CountingFit(data_file)
    fetch(fit, data_file)
    (entry,) = entries()
    saved = json.loads(entry.read_text(encoding="utf-8"))
    saved["value"]["model"]["state"] = {"params": {}}  # a stale state shape
    entry.write_text(json.dumps(saved), encoding="utf-8")
    fetch(fit, data_file)
    assert fit.calls == 2


def test_a_cache_folder_that_cannot_be_created_still_returns_the_fit(
    data_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder's parent should be", encoding="utf-8")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    fit = CountingFit(data_file)
    model = fetch(fit, data_file)
    assert model.is_fitted and fit.calls == 1
    fetch(fit, data_file)
    assert fit.calls == 2  # nothing cached, nothing failed


def test_a_permission_error_on_write_still_returns_the_fit(
    data_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(path: Path, text: str, *, field: str = "output") -> None:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(cache, "write_text_atomic", refuse)  # root ignores chmod; fake it
    fit = CountingFit(data_file)
    assert fetch(fit, data_file).is_fitted
    assert fit.calls == 1 and entries() == []


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root ignores permissions")
def test_a_read_only_cache_folder_still_returns_the_fit(data_file: Path) -> None:
    folder = cache_dir()
    folder.mkdir(parents=True)
    folder.chmod(0o500)
    try:
        fit = CountingFit(data_file)
        assert fetch(fit, data_file).is_fitted
        assert fit.calls == 1 and entries() == []
    finally:
        folder.chmod(0o700)


def test_a_failing_fit_propagates_and_caches_nothing(data_file: Path) -> None:
    def fit() -> CheckpointModel:
        raise DataFormatError(str(data_file), "bad rows")

    with pytest.raises(DataFormatError):
        fetch(fit, data_file)
    assert entries() == []


def test_cached_fit_keeps_its_facts(data_file: Path) -> None:
    calls = []

    def fit() -> tuple[CheckpointModel, dict[str, Any]]:
        calls.append(1)
        frame = pd.read_csv(data_file)
        return CheckpointModel().fit(frame), {"saves": len(frame)}

    for _ in range(2):
        model, facts = cached_fit("ckpt", fit, model_type=CheckpointModel, files=[data_file])
        assert model.is_fitted and facts == {"saves": 5}
    assert len(calls) == 1


def test_cached_json_recomputes_when_load_rejects_the_entry() -> None:
    made: list[int] = []

    def make() -> list[int]:
        made.append(1)
        return [1, 2, 3]

    def picky(data: Any) -> list[int]:
        if data != [1, 2, 3]:
            raise ValueError("unexpected")
        return list(data)

    assert cached_json("nums", make, dump=list, load=picky) == [1, 2, 3]
    assert cached_json("nums", make, dump=list, load=picky) == [1, 2, 3]
    assert len(made) == 1
    (entry,) = cache_dir().glob("nums-*.json")
    saved = json.loads(entry.read_text(encoding="utf-8"))
    saved["value"] = ["not", "numbers"]
    entry.write_text(json.dumps(saved), encoding="utf-8")
    assert cached_json("nums", make, dump=list, load=picky) == [1, 2, 3]
    assert len(made) == 2


def test_refresh_recomputes_and_replaces_the_entry() -> None:
    values = iter([[1], [2], [3]])
    made: list[list[int]] = []

    def make() -> list[int]:
        made.append(next(values))
        return made[-1]

    assert cached_json("nums", make, dump=list, load=list) == [1]
    assert cached_json("nums", make, dump=list, load=list, refresh=True) == [2]
    assert cached_json("nums", make, dump=list, load=list) == [2]  # the refreshed entry
    assert len(made) == 2 and len(list(cache_dir().glob("nums-*.json"))) == 1


def test_the_key_names_code_version_files_and_params(data_file: Path) -> None:
    key = cache_key("ckpt", files=[data_file], params={"a": 1}, code=("gpucast.store.cache",))
    assert key["name"] == "ckpt" and key["params"] == {"a": 1} and key["gpucast"]
    assert key["files"] == [[str(data_file.resolve()), len(ROWS), data_file.stat().st_mtime_ns]]
    assert key["code"][0][0] == cache.__file__
    # a package counts every module in it, found without importing the package
    pkg = cache_key("x", code=("gpucast.workloads",))["code"]
    assert len(pkg) > 3 and all(entry[0].endswith(".py") for entry in pkg)
    # a module split into private parts counts them (session 41: an edit to a part kept the fit)
    split = [
        Path(entry[0]).name for entry in cache_key("x", code=("gpucast.predict.llm_infer",))["code"]
    ]
    assert split[0] == "llm_infer.py" and "_llm_infer_fit.py" in split and len(split) >= 5


def test_simulate_inputs_reuse_the_checkpoint_fit(
    shared_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpucast.inputs.spot import checkpoint_cost

    first = checkpoint_cost(8e6, shared_data)
    fits = []
    real_fit = CheckpointModel.fit

    def counting(self: CheckpointModel, *args: Any, **kwargs: Any) -> CheckpointModel:
        fits.append(1)
        return real_fit(self, *args, **kwargs)

    monkeypatch.setattr(CheckpointModel, "fit", counting)
    assert checkpoint_cost(8e6, shared_data) == first
    assert fits == []
