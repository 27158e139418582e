"""``gpucast.validate``: the request (``what``, the data folder), typed errors, and the checks'
results (``to_dict`` is what ``gpucast validate --json`` prints)."""

from __future__ import annotations

from pathlib import Path

import pytest

import gpucast
from gpucast.app.validation import ValidateRequest, validate
from gpucast.domain.errors import InvalidSpecError


def _cmdare(root: Path) -> Path:
    """A cmdare/ folder holding only a small checkpoint table (20 saves of 4 models)."""
    folder = root / "cmdare" / "checkpoint"
    folder.mkdir(parents=True)
    lines = ["Model,Local duration,Duration,Checkpoint Size (MB),Index File Size"]
    for i, size in enumerate((5, 20, 80, 160)):
        for j in range(5):
            lines.append(f"m{i},0.1,{3 + 0.02 * size + 0.01 * j},{size},{size / 4}")
    (folder / "whole_data.csv").write_text("\n".join(lines) + "\n")
    return root


def test_checkpoint_check_on_a_small_folder(tmp_path: Path) -> None:
    root = _cmdare(tmp_path)
    result = gpucast.validate(data_dir=root, what="checkpoint")
    assert result.data_dir == root / "cmdare"
    check = result.check("checkpoint")
    assert check.rows == 20 and len(check.per_model) == 4 and check.per_gpu == ()
    assert check.target_mape_pct == 5.0
    data = result.to_dict()
    assert set(data) == {"data_dir", "checks"} and list(data["checks"]) == ["checkpoint"]
    assert data["checks"]["checkpoint"]["mape_pct"] == check.mape_pct
    frame = result.to_frame()
    assert len(frame) == 4 and set(frame["check"]) == {"checkpoint"}
    # a request object naming the cmdare folder itself; a flag value as typed: the same result
    same = validate(ValidateRequest(what="checkpoint", data_dir=root / "cmdare"))
    assert same.to_dict() == data
    assert validate(data_dir=str(root), what=" CHECKPOINT").to_dict() == data


def test_data_dir_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUCAST_SHARED_DATA", str(_cmdare(tmp_path)))
    assert validate(what="checkpoint").check("checkpoint").rows == 20


def test_a_check_without_its_data_names_data_dir(tmp_path: Path) -> None:
    with pytest.raises(InvalidSpecError, match=r"lacks single_gpu_speed\.csv") as exc:
        validate(data_dir=_cmdare(tmp_path), what="speed")
    assert exc.value.field == "data-dir"


def test_bad_options_raise_one_typed_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidSpecError, match=r"^what: must be one of speed, cluster") as what:
        validate(data_dir=tmp_path, what="nope")
    assert what.value.field == "what"
    with pytest.raises(InvalidSpecError, match="GPUCAST_SHARED_DATA") as missing:
        validate()
    assert missing.value.field == "data-dir"
    with pytest.raises(InvalidSpecError, match="has no cmdare/ folder"):
        validate(data_dir=tmp_path)
    with pytest.raises(InvalidSpecError, match="did you mean 'what'"):
        validate(wat="speed")


@pytest.mark.shared_data
def test_published_checkpoint_and_cluster(shared_data: Path) -> None:
    result = validate(data_dir=shared_data, what="all")
    assert [c.name for c in result.checks] == ["speed", "cluster", "checkpoint"]
    ckpt = result.check("checkpoint")
    assert ckpt.rows == 100 and len(ckpt.per_model) == 20 and 0 < ckpt.mape_pct < 10
    cluster = result.check("cluster")
    assert {r["gpu"] for r in cluster.per_gpu} == {"K80", "P100"} and cluster.rows == 48
    speed = result.check("speed")
    per_gpu = {r["gpu"]: r["mape_pct"] for r in speed.per_gpu}
    assert per_gpu["K80"] < 5.5 and per_gpu["P100"] < 9.8 and speed.target_met is False


def test_a_rerun_reads_the_cache_and_changed_data_is_refitted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The held-out rows are cached on the data files, the catalog and the model code: a
    second run reads them back (the same result), a data file edited is cross-validated anew."""
    import os

    from gpucast.app import validation as module

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = _cmdare(tmp_path)
    calls: list[str] = []
    real = module._RUN["checkpoint"]

    def counted(cmdare: Path) -> object:
        calls.append("checkpoint")
        return real(cmdare)

    monkeypatch.setitem(module._RUN, "checkpoint", counted)  # type: ignore[arg-type]
    first = validate(data_dir=root, what="checkpoint").to_dict()
    assert validate(data_dir=root, what="checkpoint").to_dict() == first
    assert calls == ["checkpoint"]
    csv = root / "cmdare" / "checkpoint" / "whole_data.csv"
    csv.write_text(csv.read_text().replace("m3,0.1,", "m3,0.2,"))
    stat = csv.stat()
    os.utime(csv, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    validate(data_dir=root, what="checkpoint")
    assert calls == ["checkpoint", "checkpoint"]


def test_the_tours_host_path_command_prints_what_the_readme_says() -> None:
    """QA 38 I #13: the tour's `--calibrate-p50-ms 33.9 --calibrate-at 198.7=49.6` command fits
    14.2 ms / 267 req/s where the README gave the benchmark's 10.2 / 244 (PERSEUS's jittered
    client, max batch 128, 10 Gbit/s). The README states both; the validated line the command
    prints names the setup the error was measured on."""
    result = gpucast.simulate_serve(
        model="resnet50", gpu="P4", rate=147, arrivals="constant", instances=4,
        preferred="4,8", calibrate_p50_ms=33.9, calibrate_at="198.7=49.6",
    )  # fmt: skip
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    fitted = f"{result.host_s * 1e3:.1f} ms, {result.host_capacity_rps:.0f} req/s"
    assert f"--calibrate-at 198.7=49.6   # host path from two loads: {fitted}" in readme
    assert f"fits {fitted.replace(', ', ' and ')} from the" in readme.replace("\n", " ")
    (line,) = result.validation.values()
    for setup in ("4 instances", "batching to 128", "10 Gbit/s link", "one gap late"):
        assert setup in line, setup
