"""``gpucast.fit_speed``, ``fit_cluster``, ``fit_checkpoint``: keyword options, request
objects, typed errors, and results whose ``to_dict`` is what ``--json`` prints."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import gpucast
from gpucast.app.fit import (
    FitCheckpointRequest,
    FitClusterRequest,
    FitSpeedRequest,
    fit_checkpoint,
    fit_cluster,
    fit_speed,
)
from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.predict.speed import SpeedFeatures


def speed_csv(path: Path, seed: int = 0) -> Path:
    """CM-DARE-format rows on K80 and P100 from a known linear model, 2% noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for m in range(8):
        flops = 5e8 * 1.4**m
        tensors = 40 + 17 * ((m * 7) % 12)
        for gpu, peak, (fixed, per_tensor, compute) in (
            ("K80", 4.0, (0.025, 0.0009, 5.0e-11)),
            ("P100", 10.0, (0.010, 0.00036, 2.0e-11)),
        ):
            for _ in range(3):
                noise = 1 + 0.02 * rng.standard_normal()
                rows.append(
                    {
                        "GPU (temp)": gpu,
                        "Model (temp)": f"m{m}",
                        "GPU TFLOPS": peak,
                        "Model FLOPs": flops,
                        "Number of Parameters": flops / 880.0,
                        "Number of Tensors": tensors,
                        "Step Time (s)": (fixed + per_tensor * tensors + compute * flops) * noise,
                    }
                )
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def cluster_folder(root: Path) -> Path:
    """A tiny cluster_scaling folder + features file shaped like CM-DARE's."""
    speeds = {
        ("K80", "small"): [5.0, 10.0, 14.8, 19.5],
        ("K80", "big"): [1.0, 1.9, 2.4, 2.6],
        ("P100", "small"): [9.0, 17.5, 25.0, 30.0],
        ("P100", "big"): [2.0, 2.5, 2.7, 2.75],
    }
    for (gpu, model), values in speeds.items():
        for n, speed in enumerate(values, start=1):
            path = root / "cluster_scaling" / gpu / f"{model}_{n}workers.csv"
            path.parent.mkdir(parents=True, exist_ok=True)
            lines = ["Wall time,Step,Value"] + [f"{i},{100 * i},{speed}" for i in range(1, 11)]
            path.write_text("\n".join(lines) + "\n")
    (root / "speed").mkdir()
    pd.DataFrame(
        {
            "Model (temp)": ["small", "big"],
            "Number of Parameters": [1e6, 3e7],
            "Number of Tensors": [100, 200],
        }
    ).to_csv(root / "speed" / "single_gpu_speed.csv", index=False)
    return root / "cluster_scaling"


def checkpoint_csv(path: Path, sizes_mb: tuple[int, ...] = (5, 10, 20, 40, 80, 160)) -> Path:
    lines = ["Model,Local duration,Duration,Checkpoint Size (MB),Index File Size"]
    for i, size in enumerate(sizes_mb):
        for j in range(3):
            lines.append(f"m{i},0.1,{3 + 0.02 * size + 0.01 * j},{size},{size / 4}")
    path.write_text("\n".join(lines) + "\n")
    return path


# -- fit speed ------------------------------------------------------------------------------
def test_fit_speed_keyword_options(tmp_path: Path) -> None:
    data = speed_csv(tmp_path / "rows.csv")
    out = tmp_path / "speed.json"
    result = gpucast.fit_speed(data=[data], out=out)
    assert out.is_file() and result.model_file == out
    assert result.rows == 48 and result.models == 8
    assert set(result.gpus) == {"K80", "P100"}
    summary = result.to_dict()
    assert summary["model_file"] == str(out) and set(summary) == {
        "model_file",
        "rows",
        "models",
        "warnings",
        "gpus",
    }
    frame = result.to_frame()
    assert list(frame["gpu"]) == list(result.gpus) and (frame["fixed_s"] >= 0).all()
    features = SpeedFeatures(model_flops=2e9, n_params=2.2e6, n_tensors=120)
    k80 = result.model.predict(features, "K80", peak_tflops=4.0).value
    p100 = result.model.predict(features, "P100", peak_tflops=10.0).value
    assert k80 > p100 > 0


def test_fit_speed_request_object_equals_keywords(tmp_path: Path) -> None:
    data = speed_csv(tmp_path / "rows.csv")
    by_request = fit_speed(FitSpeedRequest(data=(data,), out=tmp_path / "a.json"))
    by_flag_names = fit_speed(**{"data": str(data), "out": str(tmp_path / "a.json")})
    assert by_request.to_dict() == by_flag_names.to_dict()


def test_fit_speed_bad_options_raise_one_typed_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidSpecError, match=r"^data: is required"):
        fit_speed(out=tmp_path / "m.json")
    with pytest.raises(InvalidSpecError, match="needs at least one file") as exc:
        FitSpeedRequest(data=(), out=tmp_path / "m.json")
    assert exc.value.field == "data"
    with pytest.raises(InvalidSpecError, match="file not found") as missing:
        fit_speed(data=[tmp_path / "nope.csv"], out=tmp_path / "m.json")
    assert missing.value.field == "data" and "--data" in str(missing.value)
    with pytest.raises(InvalidSpecError, match="did you mean 'data'"):
        fit_speed(dta=[tmp_path / "x.csv"], out=tmp_path / "m.json")
    assert not (tmp_path / "m.json").exists()


def test_fit_speed_bad_cell_names_file_line_column(tmp_path: Path) -> None:
    data = tmp_path / "bad.csv"
    data.write_text(
        "GPU (temp),Model FLOPs,Number of Parameters,Number of Tensors,Step Time (s)\n"
        "K80,1e9,1e6,10,0.1\nK80,1e9,1e6,10,slow\n"
    )
    with pytest.raises(DataFormatError, match="line 3") as exc:
        fit_speed(data=[data], out=tmp_path / "m.json")
    assert exc.value.column == "Step Time (s)"


def test_fit_speed_out_over_its_data_file_is_refused(tmp_path: Path) -> None:
    """QA session 36: `fit speed --data rows.csv --out rows.csv` replaced the data with the
    fitted JSON (exit 0): a list of input files was not checked against --out."""
    data = speed_csv(tmp_path / "rows.csv")
    other = speed_csv(tmp_path / "other.csv", seed=1)
    before = data.read_bytes()
    for given in ([data], [other, data]):
        with pytest.raises(InvalidSpecError, match=r"^out: is the input file") as exc:
            fit_speed(data=given, out=data)
        assert "choose another --out path" in str(exc.value)
        assert data.read_bytes() == before


def test_fit_out_over_a_file_of_its_data_folder_is_refused(tmp_path: Path) -> None:
    """QA session 36: `--out` naming a file inside the folder a fit reads replaced it."""
    folder = cluster_folder(tmp_path)
    victim = folder / "K80" / "small_1workers.csv"
    before = victim.read_bytes()
    with pytest.raises(InvalidSpecError, match=r"^out: is a file inside the input folder"):
        fit_cluster(data=folder, out=victim)
    assert victim.read_bytes() == before
    fit_cluster(data=folder, out=folder / "new.json")  # a new file there is not data: fine
    assert (folder / "new.json").is_file()


# -- fit cluster ----------------------------------------------------------------------------
def test_fit_cluster(tmp_path: Path) -> None:
    out = tmp_path / "cluster.json"
    result = fit_cluster(data=cluster_folder(tmp_path), out=out)
    assert out.is_file()
    assert result.runs == 16 and result.models == 2
    assert result.ps_network_efficiency is not None and result.ps_network_efficiency > 0
    assert result.to_dict() == {
        "model_file": str(out),
        "runs": 16,
        "models": 2,
        "ps_network_efficiency": result.model.network_efficiency_,
        "per_tensor_cost_s": result.model.per_tensor_cost_s_,
        "lomo_mape_pct": result.model.cv_mape_pct_,
        "skipped": [],
    }
    again = fit_cluster(
        FitClusterRequest(data=tmp_path / "cluster_scaling", out=out),
        features=tmp_path / "speed" / "single_gpu_speed.csv",
    )
    assert again.to_dict() == result.to_dict()


def test_fit_cluster_bad_folder_names_the_option(tmp_path: Path) -> None:
    with pytest.raises(InvalidSpecError, match="is not a folder") as exc:
        fit_cluster(data=tmp_path / "nowhere", out=tmp_path / "c.json")
    assert exc.value.field == "data"
    cluster_folder(tmp_path)
    with pytest.raises(InvalidSpecError, match="file not found") as feats:
        fit_cluster(data=tmp_path / "cluster_scaling", out=tmp_path / "c.json", features="nope.csv")
    assert feats.value.field == "features"


# -- fit checkpoint -------------------------------------------------------------------------
def test_fit_checkpoint(tmp_path: Path) -> None:
    out = tmp_path / "ckpt.json"
    result = fit_checkpoint(FitCheckpointRequest(data=checkpoint_csv(tmp_path / "c.csv"), out=out))
    assert result.rows == 18 and out.is_file()
    assert result.to_dict()["lomo_mape_pct"] == result.lomo_mape_pct
    assert set(result.to_dict()) == {"model_file", "rows", "lomo_mape_pct", "skipped"}


def test_fit_checkpoint_reads_the_published_folder_as_the_other_fits_do(tmp_path: Path) -> None:
    """QA 35 E #20: `fit power` and `fit steptime` take --data-dir; `fit checkpoint` took only
    --data. Both work now (one of them), and the folder must hold CM-DARE's saves."""
    root = tmp_path / "data"
    (root / "cmdare" / "checkpoint").mkdir(parents=True)
    checkpoint_csv(root / "cmdare" / "checkpoint" / "whole_data.csv")
    by_dir = fit_checkpoint(data_dir=root, out=tmp_path / "a.json")
    by_file = fit_checkpoint(
        data=root / "cmdare" / "checkpoint" / "whole_data.csv", out=tmp_path / "b.json"
    )
    assert by_dir.rows == by_file.rows == 18
    assert by_dir.lomo_mape_pct == by_file.lomo_mape_pct
    with pytest.raises(InvalidSpecError, match="give one") as both:
        fit_checkpoint(data=tmp_path / "x.csv", data_dir=root, out=tmp_path / "c.json")
    assert both.value.field == "data"
    (root / "cmdare" / "checkpoint" / "whole_data.csv").unlink()
    with pytest.raises(InvalidSpecError, match=r"cmdare/checkpoint/whole_data\.csv") as missing:
        fit_checkpoint(data_dir=root, out=tmp_path / "c.json")
    assert missing.value.field == "data-dir"


def test_fit_checkpoint_too_few_rows(tmp_path: Path) -> None:
    data = tmp_path / "c.csv"
    data.write_text(
        "Model,Local duration,Duration,Checkpoint Size (MB),Index File Size\nm0,0.1,3.1,5,1\n"
    )
    with pytest.raises(DataFormatError, match="fewer than 3 usable rows"):
        fit_checkpoint(data=data, out=tmp_path / "m.json")
    assert not (tmp_path / "m.json").exists()


def test_fit_speed_refuses_a_step_time_beyond_a_day(tmp_path: Path) -> None:
    """QA session 36: one `Step Time (s)` of 1e300 (a typo) was fitted, and every prediction
    on its GPU then stated the interval [1.2e-302, 9.9e+299] s."""
    data = speed_csv(tmp_path / "rows.csv")
    lines = data.read_text().splitlines()
    cells = lines[2].split(",")
    cells[-1] = "1e300"  # Step Time (s) is the last column
    lines[2] = ",".join(cells)
    data.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataFormatError, match=r"must be <= 86,400 s") as exc:
        fit_speed(data=[data], out=tmp_path / "m.json")
    assert exc.value.line == 3 and exc.value.column == "Step Time (s)"
    assert not (tmp_path / "m.json").exists()
