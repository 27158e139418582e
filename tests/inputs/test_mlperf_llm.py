"""The MLPerf LLM systems as predict llm-train prices them, and the bands their residuals earn."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpucast.catalog.llm import load_llm_train_intervals
from gpucast.inputs.mlperf_llm import (
    ANY_STACK,
    RUNS_FILE,
    TUNED,
    UNSEEN_GPU_REGIME,
    fit_fp8_ratio,
    fit_host_layer_s,
    gpu_band,
    interval_table,
    llm_system_predictions,
    regime_for,
    stated_band,
    submitter_held_out_predictions,
    system_stack,
)


def test_a_deepspeed_system_runs_the_pytorch_stack_and_the_rest_the_tuned_one() -> None:
    assert system_stack("h100_n4_ngc24.1_pytorch_deepspeed") == "pytorch"
    assert system_stack("eos_n8_ngc24.04_nemo") == "tuned"
    assert system_stack("HPE-Cray-XD670-Gen11-H100-SXM5-80GB_n2_pytorch_24.04") == "tuned"
    assert regime_for("tuned") == TUNED
    assert regime_for("pytorch") == regime_for("tf1") == ANY_STACK


def _frame(residuals: list[float], submitters: list[str], software: list[str]) -> pd.DataFrame:
    return pd.DataFrame({"residual": residuals, "submitter": submitters, "software": software})


def test_the_tuned_band_leaves_other_stacks_out_and_the_pooled_one_spans_them() -> None:
    rng = np.random.default_rng(3)
    tuned = list(rng.normal(0.1, 0.1, 30))
    frame = _frame(
        [*tuned, 1.4, 1.5, 1.6],
        [f"s{i % 6}" for i in range(30)] + ["slow"] * 3,
        ["tuned"] * 30 + ["pytorch"] * 3,
    )
    table = interval_table(frame)
    assert table.n == {TUNED: 30, ANY_STACK: 33}
    t_low, t_high = table.ratios(TUNED)
    a_low, a_high = table.ratios(ANY_STACK)
    assert t_high < math.exp(1.0) < a_high  # the slow stack widens only the pooled band
    assert max(a_low, t_low) < 1.1 < t_high


def test_a_submitter_unlike_the_others_widens_the_band_past_the_nominal_percentiles() -> None:
    alike = [0.0, 0.05, -0.05, 0.02, -0.02, 0.04, -0.04, 0.01] * 2
    frame = _frame(
        [*alike, 0.6, 0.7], [f"s{i % 8}" for i in range(16)] + ["odd"] * 2, ["tuned"] * 18
    )
    table = interval_table(frame)
    assert table.level[TUNED] > 0.9
    nominal = np.exp(np.quantile(frame["residual"], 0.9))
    assert table.ratios(TUNED)[1] > nominal


def test_the_stated_band_names_its_regime_and_holds_the_point() -> None:
    low, high, note = stated_band("tuned")
    assert 0 < low < high and high > 1
    # a band above the point says so: the interval starts at the prediction
    assert (low > 1) == ("starts at the prediction" in note)
    assert note.startswith("80% interval") and "tuned-stack" in note and "MLPerf" in note
    _any_low, any_high, any_note = stated_band("pytorch")
    assert any_high >= high and "tuned-stack" not in any_note


def test_a_gpu_the_step_time_data_never_ran_widens_the_band() -> None:
    from gpucast.inputs.calibration import step_time_efficiency
    from gpucast.predict.roofline import RooflineEfficiency, regime_band

    eff = step_time_efficiency("tuned").value
    band = stated_band("tuned")
    assert "H100-SXM" in eff.gpu_factors and "B200" not in eff.gpu_factors
    assert gpu_band(band, "H100-SXM", eff) == band
    low, high, note = gpu_band(band, "B200", eff)
    held_low, held_high = regime_band(eff, UNSEEN_GPU_REGIME, None)
    assert (low, high) == (min(band[0], held_low), max(band[1], held_high))
    assert low < band[0] and high >= band[1]
    assert note.startswith(band[2]) and "B200 has no run in the step-time data" in note
    # an unfitted model has no leave-one-GPU-out band to widen to
    assert gpu_band(band, "B200", RooflineEfficiency()) == band


def test_shipped_bands_are_what_the_published_systems_give(shared_data: Path) -> None:
    # each submitter priced by a model fitted without it (the fp8 efficiency is fitted on
    # NVIDIA's GPT-3 runs alone: NVIDIA's systems are priced with it borrowed; the host time
    # on every tuned LoRA submitter's runs); a submitter in neither fit keeps the shipped one
    predictions = submitter_held_out_predictions(shared_data)
    shipped_fit = llm_system_predictions(shared_data)
    fitted = (predictions["software"] == "tuned").to_numpy()
    assert not fitted.all()
    assert np.allclose(predictions["residual"][~fitted], shipped_fit["residual"][~fitted])
    moved = ~np.isclose(predictions["residual"][fitted], shipped_fit["residual"][fitted])
    assert moved.any()
    gpt3 = (predictions["benchmark"] == "gpt3").to_numpy()
    assert (predictions["predicted_min"][gpt3] < shipped_fit["predicted_min"][gpt3]).all()
    assert set(predictions["benchmark"]) == {"gpt3", "llama2_70b_lora"}
    assert set(predictions.loc[predictions["software"] == "pytorch", "submitter"]) == {
        "JuniperNetworks"
    }
    assert np.isfinite(predictions["residual"]).all()
    shipped, sources = load_llm_train_intervals()
    assert set(sources) == set(shipped.n)
    refit = interval_table(predictions)
    assert refit.n == dict(shipped.n)
    for name in shipped.n:
        assert refit.ratios(name) == pytest.approx(shipped.ratios(name), rel=2e-3), (
            f"{name}: rerun python benchmarks/steptime_accuracy.py --section llm --intervals "
            "and update llm_train_intervals.csv"
        )


def test_intels_gaudi2_runs_are_priced_on_their_mesh_inside_the_stated_band(
    shared_data: Path,
) -> None:
    # the data's only non-NVIDIA LLM runs, held out of every fit: priced from the datasheet,
    # GPT-3 on 1,024 devices at the tensor-parallel width Intel ran (8: the whole mesh)
    from gpucast.inputs.calibration import step_time_efficiency

    rows = llm_system_predictions(shared_data, vendors=None)
    gaudi = rows[rows["vendor"] == "intel"].set_index("benchmark")
    assert set(gaudi.index) == {"gpt3", "llama2_70b_lora"}
    assert (gaudi["gpu"] == "Gaudi2").all()
    assert " tp=8 " in gaudi.loc["gpt3", "layout"]
    low, high, note = gpu_band(stated_band("tuned"), "Gaudi2", step_time_efficiency("tuned").value)
    ratio = np.exp(gaudi["residual"].to_numpy())
    assert ((low <= ratio) & (ratio <= high)).all() and "Gaudi2 has no run" in note
    assert (np.abs(1.0 / ratio - 1.0) < 0.25).all()
    assert "Intel-HabanaLabs" not in set(llm_system_predictions(shared_data)["submitter"])


def _write_runs(
    folder: Path,
    systems: list[tuple[str, int, int, float]],
    accelerator: str = "NVIDIA H100-SXM5-80GB",
    benchmark: str = "gpt3",
) -> Path:
    """An MLPerf results table (the shared file's columns) of ``benchmark`` runs: (system,
    nodes, global batch, minutes) each run three times."""
    path = folder / RUNS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    header = (
        "round,submitter,system,benchmark,run_index,minutes,status,accelerator,"
        "accel_per_node,nodes,division,global_batch_size,file"
    )
    lines = [header]
    for system, nodes, batch, minutes in systems:
        for i in range(3):
            lines.append(
                f"v4.0,Lab,{system},{benchmark},{i},{minutes:.6f},success,{accelerator},8,"
                f"{nodes},closed,{batch},Lab/results/{system}/{benchmark}/result_{i}.txt"
            )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def test_the_fp8_efficiency_is_recovered_from_whole_fp8_runs(tmp_path: Path) -> None:
    # runs timed exactly as the model prices them with fp8 at 0.7x the 16-bit efficiency:
    # the fit finds 0.7 again, and the borrowed efficiency (1x) would price them fast
    shape = [("a", 32, 256)]
    probe = _write_runs(tmp_path / "probe", [(s, n, b, 1.0) for s, n, b in shape])
    truth = llm_system_predictions(probe, fp8_ratio=0.7).set_index("system")
    data = _write_runs(
        tmp_path / "data",
        [(s, n, b, float(truth.loc[f"Lab/{s}", "predicted_min"])) for s, n, b in shape],
    )
    fit = fit_fp8_ratio(data)
    assert fit is not None and fit.ratio == pytest.approx(0.7, abs=0.02)
    assert fit.systems == ("Lab/a",) and fit.mape_pct < 2.0
    assert "1 fp8 system:" in fit.source
    borrowed = llm_system_predictions(data, fp8_ratio=1.0)
    assert (borrowed["residual"] > 0.1).all()  # measured slower than the borrowed pricing
    assert fit_fp8_ratio(data, exclude=("Lab",)) is None
    assert llm_system_predictions(data, exclude=("Lab/a",)).empty


def test_another_vendors_runs_are_priced_but_kept_out_of_the_fits(tmp_path: Path) -> None:
    # an H100 GPT-3 run timed at 0.7x the 16-bit fp8 efficiency, and a Gaudi 2 one timed far
    # slower: the fit still finds 0.7 (it rests on NVIDIA's runs), while the Gaudi run is
    # priced from its datasheet when asked for (vendors=None) and named as Intel's
    probe = _write_runs(tmp_path / "probe", [("a", 32, 256, 1.0)])
    truth = llm_system_predictions(probe, fp8_ratio=0.7).iloc[0].predicted_min
    data = _write_runs(tmp_path / "data", [("a", 32, 256, float(truth))])
    gaudi = _write_runs(
        tmp_path / "gaudi", [("g", 32, 256, 5.0 * truth)], "Intel(R) Gaudi(R) 2 AI Accelerator"
    )
    runs = data / RUNS_FILE
    extra = (gaudi / RUNS_FILE).read_text(encoding="utf-8").splitlines()[1:]
    runs.write_text(runs.read_text(encoding="utf-8") + "\n".join(extra) + "\n", "utf-8")
    fit = fit_fp8_ratio(data)
    assert fit is not None and fit.ratio == pytest.approx(0.7, abs=0.02)
    assert fit.systems == ("Lab/a",)
    assert set(llm_system_predictions(data)["system"]) == {"Lab/a"}
    every = llm_system_predictions(data, vendors=None).set_index("system")
    assert every.loc["Lab/g", "vendor"] == "intel" and every.loc["Lab/a", "vendor"] == "nvidia"
    assert every.loc["Lab/g", "gpu"] == "Gaudi2" and "fp8" in every.loc["Lab/g", "layout"]
    assert every.loc["Lab/g", "residual"] > 0.5  # 5x the H100 run: slower than priced
    assert llm_system_predictions(data, vendors=("intel",))["system"].tolist() == ["Lab/g"]


def test_runs_on_gpus_without_fp8_say_nothing_of_it(tmp_path: Path) -> None:
    data = _write_runs(tmp_path, [("a", 32, 256, 100.0)], accelerator="NVIDIA A100-SXM4-80GB")
    assert fit_fp8_ratio(data) is None  # bf16 runs: no ratio to fit, none stored


def test_the_host_what_if_paces_lora_and_leaves_cuda_graph_runs_alone(tmp_path: Path) -> None:
    # NVIDIA's 64 x H100 LoRA shape (batch 8, one sequence a data-parallel rank) and a GPT-3
    # system, whose runs capture CUDA graphs: only LoRA's micro-batches wait for the host
    lora = _write_runs(tmp_path / "lora", [("l", 8, 8, 5.0)], benchmark="llama2_70b_lora")
    ahead = llm_system_predictions(lora, host_layer_s=0.0).iloc[0]
    paced = llm_system_predictions(lora, host_layer_s=0.008).iloc[0]
    assert paced.predicted_min > 1.3 * ahead.predicted_min
    steps = 3187.2 / 8  # mlperf:llama2_70b_lora samples to target at batch 8, one step each
    assert paced.predicted_min * 60 >= steps * 80 * 0.008  # 80 layers, at least 8 ms each
    gpt = _write_runs(tmp_path / "gpt", [("g", 32, 256, 100.0)])
    assert llm_system_predictions(gpt, host_layer_s=0.008).iloc[0].predicted_min == (
        pytest.approx(llm_system_predictions(gpt, host_layer_s=0.0).iloc[0].predicted_min)
    )


def test_the_host_time_is_recovered_from_how_runs_scale_whatever_their_level(
    tmp_path: Path,
) -> None:
    # LoRA runs on 8, 64 and 1,024 GPUs timed as the model prices them with the host at 6 ms
    # per layer, all 1.3x slower (a level the fit leaves to the band): the fit finds 6 ms
    shape = [("a", 1, 8), ("b", 8, 8), ("c", 128, 128)]
    probe = _write_runs(
        tmp_path / "probe", [(s, n, b, 1.0) for s, n, b in shape], benchmark="llama2_70b_lora"
    )
    truth = llm_system_predictions(probe, host_layer_s=0.006).set_index("system")
    data = _write_runs(
        tmp_path / "data",
        [(s, n, b, 1.3 * float(truth.loc[f"Lab/{s}", "predicted_min"])) for s, n, b in shape],
        benchmark="llama2_70b_lora",
    )
    fit = fit_host_layer_s(data)
    assert fit is not None and fit.seconds == pytest.approx(0.006, abs=0.0005)
    assert fit.level == pytest.approx(1.3, rel=0.02)
    assert fit.spread_after < 0.01 < fit.spread_before
    assert fit.gpu_counts == (8, 64, 1024) and "3 tuned-stack systems" in fit.source
    # one GPU count cannot tell pacing from the level: nothing to fit
    assert fit_host_layer_s(data, exclude=("Lab/b", "Lab/c")) is None


def test_a_runs_one_off_warm_up_is_recovered_with_the_host_time(tmp_path: Path) -> None:
    # LoRA runs on 8 to 1,024 GPUs timed as the model prices them with the host at 6 ms per
    # layer and a 20 s warm-up once per run, all 1.3x slower: the fit finds both; the warm-up
    # shows where runs are short (1,024 GPUs: ~1 min) and hides where they are long
    shape = [("a", 1, 8), ("d", 2, 16), ("b", 8, 8), ("c", 128, 128)]
    probe = _write_runs(
        tmp_path / "probe", [(s, n, b, 1.0) for s, n, b in shape], benchmark="llama2_70b_lora"
    )
    truth = llm_system_predictions(probe, host_layer_s=0.006, warmup_s=20.0).set_index("system")
    without = llm_system_predictions(probe, host_layer_s=0.006, warmup_s=0.0).set_index("system")
    assert (truth["predicted_min"] - without["predicted_min"]).to_numpy() == pytest.approx(1 / 3)
    data = _write_runs(
        tmp_path / "data",
        [(s, n, b, 1.3 * float(truth.loc[f"Lab/{s}", "predicted_min"])) for s, n, b in shape],
        benchmark="llama2_70b_lora",
    )
    fit = fit_host_layer_s(data)
    assert fit is not None
    assert fit.seconds == pytest.approx(0.006, abs=0.0005)
    # the warm-up is added to the prediction, which the common level then scales: 20 s
    assert fit.warmup_s == pytest.approx(20.0, abs=0.5)
    assert fit.level == pytest.approx(1.3, rel=0.02)
    assert fit.spread_after < 0.01 < fit.spread_before
    assert "warm-up of" in fit.source
    # two GPU counts cannot tell a warm-up from the level and the pacing: none is fitted
    two = fit_host_layer_s(data, exclude=("Lab/a", "Lab/d"))
    assert two is not None and two.warmup_s == 0.0
