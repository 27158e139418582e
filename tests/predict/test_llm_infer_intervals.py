"""What an LLM inference prediction states as its 80% band, and the shipped bands being what
held-out rows of LLM-Inference-Bench give."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpucast.catalog.engines import (
    INTERVAL_COLUMNS,
    load_llm_infer_intervals,
    parse_llm_infer_intervals,
)
from gpucast.domain.errors import DataFormatError
from gpucast.predict.intervals import IntervalTable
from gpucast.predict.llm_infer_intervals import (
    PRIOR_HALFWIDTH,
    _calibrated,
    gpu_factor_rows,
    held_out_residuals,
    interval_table,
    stated_ratios,
)


def _table() -> IntervalTable:
    return IntervalTable(
        q_low={"model_unseen/latency": math.log(0.8), "model_unseen/ttft": math.log(0.9),
               "engine_unseen/latency": math.log(0.6), "gpu_unseen/latency": math.log(1.3)},
        q_high={"model_unseen/latency": math.log(1.2), "model_unseen/ttft": math.log(1.1),
                "engine_unseen/latency": math.log(1.8), "gpu_unseen/latency": math.log(5.0)},
        n={"model_unseen/latency": 10, "model_unseen/ttft": 3, "engine_unseen/latency": 10,
           "gpu_unseen/latency": 10},
        mape_pct={"model_unseen/latency": 10.0, "model_unseen/ttft": 5.0,
                  "engine_unseen/latency": 30.0, "gpu_unseen/latency": 60.0},
    )  # fmt: skip


def test_a_fitted_engine_on_the_fitted_gpu_states_the_model_left_out_band() -> None:
    band = stated_ratios(_table(), engine_fitted=True, gpu_fitted=True, same_vendor=True)
    assert band.regimes == ("model_unseen",)
    assert band.latency == pytest.approx((0.8, 1.2)) and band.ttft == pytest.approx((0.9, 1.1))
    assert "a model left out" in band.note and "MAPE 10.0%" in band.note


def test_an_engine_on_priors_states_the_engine_left_out_band() -> None:
    band = stated_ratios(_table(), engine_fitted=False, gpu_fitted=True, same_vendor=True)
    assert band.regimes == ("engine_unseen",)
    # no TTFT rows of that regime: its latency band stands in
    assert band.latency == pytest.approx((0.6, 1.8)) and band.ttft == pytest.approx((0.6, 1.8))


def test_another_gpu_is_the_envelope_with_what_was_measured_or_a_prior() -> None:
    other = stated_ratios(_table(), engine_fitted=True, gpu_fitted=False, same_vendor=False)
    assert other.regimes == ("model_unseen", "gpu_unseen")
    assert other.latency == pytest.approx((0.8, 5.0)) and other.ttft == pytest.approx((0.9, 5.0))
    same = stated_ratios(_table(), engine_fitted=True, gpu_fitted=False, same_vendor=True)
    assert same.regimes == ("model_unseen", "prior")
    prior = (1 / (1 + PRIOR_HALFWIDTH), 1 + PRIOR_HALFWIDTH)
    assert same.latency == pytest.approx(prior) and "fitted on no rows" in same.note
    # QA 33b #25: the note said "+-50%" beside a band printed x0.67-1.50
    assert "widened to x0.67-1.50 (a prior, up to 1.5x faster or slower" in same.note
    assert "+-50%" not in same.note


def _csv(**overrides: str) -> str:
    row = dict.fromkeys(INTERVAL_COLUMNS, "x")
    row.update(name="model_unseen/latency", ratio_low="0.7", ratio_high="1.3", level="0.9",
               n="5", mape_pct="10", fitted_gpu="A100-40GB", vendor="nvidia",
               as_of="2026-12-04")  # fmt: skip
    row.update(overrides)
    return ",".join(INTERVAL_COLUMNS) + "\n" + ",".join(row[c] for c in INTERVAL_COLUMNS) + "\n"


def test_the_interval_file_is_parsed_strictly() -> None:
    table, gpu, vendor = parse_llm_infer_intervals(_csv())
    assert (gpu, vendor) == ("A100-40GB", "nvidia")
    assert table.ratios("model_unseen/latency") == pytest.approx((0.7, 1.3))
    with pytest.raises(DataFormatError, match="line 2, column 'ratio_low'"):
        parse_llm_infer_intervals(_csv(ratio_low="1.5"))
    with pytest.raises(DataFormatError, match="ratio_high"):
        parse_llm_infer_intervals(_csv(ratio_high="-1"))
    with pytest.raises(DataFormatError, match="level"):
        parse_llm_infer_intervals(_csv(level="0.3"))
    with pytest.raises(DataFormatError, match="as_of"):
        parse_llm_infer_intervals(_csv(as_of="soon"))
    twice = _csv() + _csv().splitlines()[1] + "\n"
    with pytest.raises(DataFormatError, match="appears twice"):
        parse_llm_infer_intervals(twice)
    other = _csv() + _csv(name="gpu_unseen/latency", fitted_gpu="H100").splitlines()[1] + "\n"
    with pytest.raises(DataFormatError, match="same fitted_gpu"):
        parse_llm_infer_intervals(other)


def test_interval_table_calibrates_each_band_over_its_groups() -> None:
    """Groups that move together need a wider band than their pooled 10th/90th."""
    rng = np.random.default_rng(0)
    shifts = np.repeat([-0.3, -0.1, 0.0, 0.1, 0.3], 40)
    residuals = pd.DataFrame(
        {
            "regime": "model_unseen",
            "quantity": "latency",
            "group": np.repeat(list("abcde"), 40),
            "residual": shifts + rng.normal(0.0, 0.05, shifts.size),
        }
    )
    table = interval_table(residuals)
    assert table.level["model_unseen/latency"] > 0.9
    low, high = table.ratios("model_unseen/latency")
    nominal = np.exp(np.quantile(residuals["residual"], (0.1, 0.9)))
    assert low < nominal[0] and high > nominal[1]


def test_shipped_bands_are_what_the_held_out_rows_give(shared_data: Path) -> None:
    from gpucast.inputs.llm_bench import bench_data

    bench = bench_data(shared_data)
    shipped, gpu, _ = load_llm_infer_intervals()
    residuals = held_out_residuals(
        bench.throughput, bench.ttft, specs=bench.specs, gpus=bench.gpus,
        engines=bench.engines, fitted_gpu=gpu,
    )  # fmt: skip
    assert set(residuals["regime"]) == {
        "model_unseen",
        "engine_unseen",
        "gpu_unseen",
        "gpu_calibrated",
    }
    assert set(residuals.loc[residuals["regime"] == "gpu_unseen", "gpu"]) == {"MI250"}
    refit = interval_table(residuals)
    assert set(refit.n) == set(shipped.n)
    for name in shipped.n:
        assert refit.n[name] == shipped.n[name], name
        assert refit.ratios(name) == pytest.approx(shipped.ratios(name), rel=2e-3), (
            f"{name}: rerun python benchmarks/llm_inference_accuracy.py --intervals and update "
            "llm_infer_intervals.csv"
        )


def test_shipped_gpu_factors_are_what_the_rows_off_the_fitted_gpu_give(shared_data: Path) -> None:
    """``llm_infer_gpu_factors.csv`` is the mean log ratio of each engine's MI250 rows to the
    A100 fit; the shipped engines carry it."""
    from gpucast.catalog.engines import load_inference_engines
    from gpucast.inputs.llm_bench import bench_data

    bench = bench_data(shared_data)
    residuals = held_out_residuals(
        bench.throughput, bench.ttft, specs=bench.specs, gpus=bench.gpus,
        engines=bench.engines, fitted_gpu="A100-40GB",
    )  # fmt: skip
    rows = gpu_factor_rows(residuals)
    by_bench = {e.bench_framework: e for e in load_inference_engines()}
    assert len(rows) == 2
    for r in rows.itertuples():
        engine = by_bench[str(r.framework)]
        assert engine.gpu_factors[str(r.gpu)] == pytest.approx(r.latency_factor, rel=1e-3), (
            "rerun python benchmarks/llm_inference_accuracy.py --gpu-factors and update "
            "llm_infer_gpu_factors.csv"
        )
    total = sum(len(e.gpu_factors) for e in load_inference_engines())
    assert total == len(rows)


def test_a_calibrated_gpu_states_its_own_band_and_the_calibrated_residual_is_shifted() -> None:
    """``gpu_calibrated`` alone, TTFT widened to its latency band; each model's residual less
    the mean of the other models' latency rows of its engine and GPU."""
    table = IntervalTable(
        q_low={**_table().q_low, "gpu_calibrated/latency": math.log(0.8),
               "gpu_calibrated/ttft": math.log(1.2)},
        q_high={**_table().q_high, "gpu_calibrated/latency": math.log(1.25),
                "gpu_calibrated/ttft": math.log(1.3)},
        n={**_table().n, "gpu_calibrated/latency": 8, "gpu_calibrated/ttft": 3},
        mape_pct={**_table().mape_pct, "gpu_calibrated/latency": 12.0,
                  "gpu_calibrated/ttft": 20.0},
    )  # fmt: skip
    band = stated_ratios(
        table, engine_fitted=True, gpu_fitted=False, same_vendor=False, gpu_calibrated=True
    )
    assert band.regimes == ("gpu_calibrated",)
    assert band.latency == pytest.approx((0.8, 1.25)) and band.ttft == pytest.approx((0.8, 1.3))
    assert "this GPU's own rows" in band.note
    frame = pd.DataFrame(
        {"regime": "gpu_unseen", "quantity": "latency", "group": "vLLM", "framework": "vLLM",
         "gpu": "X", "model": ["a", "a", "b", "c"], "residual": [0.1, 0.3, 0.5, 0.9]}
    )  # fmt: skip
    calibrated = _calibrated(frame)
    assert list(calibrated["residual"]) == pytest.approx(
        [0.1 - 0.7, 0.3 - 0.7, 0.5 - 1.3 / 3, 0.9 - 0.3]  # the other models' rows' mean
    )
    assert set(calibrated["regime"]) == {"gpu_calibrated"}
    assert gpu_factor_rows(frame)["latency_factor"].iloc[0] == pytest.approx(math.exp(0.45))
