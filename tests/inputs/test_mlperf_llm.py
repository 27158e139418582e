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
    TUNED,
    interval_table,
    llm_system_predictions,
    regime_for,
    stated_band,
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
    assert 0 < low < 1 < high
    assert note.startswith("80% interval") and "tuned-stack" in note and "MLPerf" in note
    _any_low, any_high, any_note = stated_band("pytorch")
    assert any_high >= high and "tuned-stack" not in any_note


def test_shipped_bands_are_what_the_published_systems_give(shared_data: Path) -> None:
    predictions = llm_system_predictions(shared_data)
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
