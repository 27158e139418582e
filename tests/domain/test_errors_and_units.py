from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpucast.domain.errors import (
    DataFormatError,
    InvalidInputError,
    InvalidSpecError,
    UnknownGpuError,
)
from gpucast.domain.prediction import Estimate
from gpucast.domain.units import (
    count_of,
    format_amount,
    format_duration,
    format_latency,
    format_ms,
    format_ms_against,
    format_pct_against,
    format_ratio,
    format_slo_latency,
    format_span,
    format_usd,
    parse_duration_s,
)
from gpucast.domain.workload import WorkloadSpec


def test_unknown_gpu_lists_close_matches() -> None:
    err = UnknownGpuError("V10O", ["V100-16GB", "V100-32GB", "T4", "A100-40GB"])
    assert err.exit_code == 2
    assert "V100-16GB" in str(err)
    assert "unknown GPU 'V10O'" in str(err)


def test_a_far_fetched_name_is_not_suggested() -> None:
    """QA #32: 'nope' offered unet3d (0.4 alike); below the cutoff the known names are
    listed instead. Typos and case still find their name."""
    from gpucast.domain.errors import SUGGEST_CUTOFF, UnknownWorkloadError, close_matches

    known = ["resnet50", "resnet18", "unet3d", "bert-base"]
    far = UnknownWorkloadError("nope", known)
    assert "did you mean" not in str(far) and far.close_matches == []
    assert str(far).startswith("workload: unknown workload 'nope': known: bert-base, resnet18")
    assert far.detail.startswith("unknown workload 'nope'")
    assert close_matches("resnt50", known)[0] == "resnet50"
    assert close_matches("RESNET-50", known)[0] == "resnet50"  # case ignored
    assert sorted(close_matches("a100", ["A100-40GB", "A100-80GB", "T4"])) == [
        "A100-40GB",
        "A100-80GB",
    ]
    assert SUGGEST_CUTOFF >= 0.5


def test_an_unknown_name_can_name_its_flag_and_its_kind() -> None:
    """QA #15: simulate train --lifetimes nope said "unknown name 'nope': known: ;"."""
    from gpucast.domain.errors import UnknownNameError

    err = UnknownNameError("nope", [], field="lifetimes", kind="lifetimes model", fix="fit one")
    assert str(err) == "lifetimes: unknown lifetimes model 'nope': none known; fit one"


def test_an_unknown_name_keeps_its_field_as_a_spec_error_does() -> None:
    # QA 40 P #3: "gpu: unknown GPU 'V1000'" had no .field (InvalidSpecError has one), so a
    # caller catching InvalidInputError and reading error.field got an AttributeError
    from gpucast.domain.errors import UnknownNameError, UnknownWorkloadError

    assert UnknownGpuError("V1000", ["V100"]).field == "gpu"
    assert UnknownWorkloadError("nope", ["mlp"]).field == "workload"
    assert UnknownNameError("nope", [], field="lifetimes").field == "lifetimes"
    assert UnknownNameError("nope", []).field is None


def test_an_unknown_model_starts_with_its_flag_as_every_error_does() -> None:
    # QA 40 P #5: predict infer --model llama-7b said "unknown model 'llama-7b': ..." where
    # every other line starts with its flag (every raiser's flag is --model)
    from gpucast.domain.errors import UnknownModelError

    err = UnknownModelError("llama-7b", ["llama-2-7b"])
    assert err.field == "model"
    assert str(err) == "model: unknown model 'llama-7b': did you mean llama-2-7b?"


def test_data_format_error_names_file_line_column() -> None:
    err = DataFormatError("rows.csv", "not a number", line=7, column="Step Time (s)", fix="fix it")
    text = str(err)
    assert "rows.csv, line 7, column 'Step Time (s)'" in text
    assert isinstance(err, InvalidInputError)


@pytest.mark.parametrize(
    ("text", "seconds"), [("90", 90), ("90s", 90), ("15m", 900), ("24h", 86400), ("2d", 172800)]
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration_s(text) == seconds


@pytest.mark.parametrize(
    ("seconds", "kwargs", "text"),
    [
        (0.0123, {}, "12 ms"),
        (0.0123, {"digits": 1, "unit": False}, "12.3"),
        (9.5, {}, "9500 ms"),
        (2061.395, {}, "34.4 min"),
        (2061.395, {"unit": False}, "2,061,395"),  # under an ms heading: ms, not "34.4 min"
        (9.5, {"digits": 1, "unit": False}, "9,500.0"),
        (8093.992, {}, "2.25 h"),
        (math.nan, {}, "-"),
    ],
)
def test_format_latency_beyond_10_s_is_a_duration_with_its_unit_and_ms_without(
    seconds: float, kwargs: dict[str, object], text: str
) -> None:
    assert format_latency(seconds, **kwargs) == text  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("seconds", "kwargs", "text"),
    [
        (0.0102, {}, "10.2"),  # one decimal as before from 0.1 ms up
        (0.0002, {}, "0.2"),
        (0.0009996, {}, "1.0"),
        (2.01e-5, {}, "0.020"),  # "p50 0.00 ms" / "0.0 ms" for an MLP on an H100
        (2.2e-6, {"decimals": 2}, "0.0022"),
        (1e-12, {}, "0.000000"),  # at most 6 decimals
        (0.0, {}, "0"),
        (1.5, {}, "1,500.0"),  # thousands separated (a latency read "7766.3 ms")
        (math.nan, {}, "-"),
    ],
)
def test_format_ms_keeps_two_significant_digits_of_a_small_latency(
    seconds: float, kwargs: dict[str, int], text: str
) -> None:
    assert format_ms(seconds, **kwargs) == text


@given(st.floats(min_value=1e-9, max_value=1e3))
def test_format_ms_never_reads_zero_for_a_latency_from_a_nanosecond(seconds: float) -> None:
    assert float(format_ms(seconds).replace(",", "")) > 0
    assert float(format_ms_against(seconds, 2.0).replace(",", "")) > 0


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (59 * 60, "59 min"),
        (3600, "1 h"),
        (5400, "1.5 h"),
        (86400, "1 day"),
        (2 * 86400, "2 days"),
        (365.25 * 86400, "1 year"),
        (45, "45 s"),
    ],
)
def test_format_duration_reads_as_a_person_writes_it(seconds: float, text: str) -> None:
    # the serverless verbs printed a 59-minute trace as "0.983333 h"
    assert format_duration(seconds) == text


@pytest.mark.parametrize("text", ["", "-5h", "abc", "0", "1y"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(InvalidSpecError, match="deadline"):
        parse_duration_s(text, field="deadline")


@pytest.mark.parametrize("text", ["0", "0h", "0.0d"])
def test_a_zero_duration_names_the_form_that_works(text: str) -> None:
    # session 34 QA: plan train --deadline 0 said only "deadline: must be > 0 (got '0')"
    with pytest.raises(InvalidSpecError, match=r"deadline: must be > 0 .*; give a duration like"):
        parse_duration_s(text, field="deadline")


@pytest.mark.parametrize(
    ("seconds", "constraint"),
    [(math.inf, "a finite number > 0"), (-math.inf, "a finite number > 0"),
     (math.nan, "a finite number > 0"), (-1.0, "> 0")],
)  # fmt: skip
def test_a_duration_in_seconds_out_of_range_says_why_and_the_fix(
    seconds: float, constraint: str
) -> None:
    # QA 40 P #4: plan_train(deadline=float("inf")) said "deadline: must be > 0 (got inf)";
    # #6: deadline=-1 named no fix (the same value as text, "-1h", does)
    from gpucast.domain.units import duration_s

    with pytest.raises(InvalidSpecError) as info:
        duration_s(seconds, field="deadline")
    assert str(info.value) == (
        f"deadline: must be {constraint} (got {seconds}); give a duration like 90s, 15m, 24h or 2d"
    )


def test_workload_spec_validates() -> None:
    with pytest.raises(InvalidSpecError, match="batch_size"):
        WorkloadSpec(name="mlp", batch_size=0)
    with pytest.raises(InvalidSpecError, match="precision"):
        WorkloadSpec(name="mlp", batch_size=8, precision="int4")  # type: ignore[arg-type]


@given(
    st.floats(min_value=1e-6, max_value=1e6),
    st.floats(min_value=0, max_value=0.9),
    st.floats(min_value=0, max_value=5),
)
def test_estimate_interval_invariant(value: float, down: float, up: float) -> None:
    est = Estimate(
        value=value,
        lower=value * (1 - down),
        upper=value * (1 + up),
        unit="s",
        bottleneck="compute",
        source="fitted",
        breakdown={"compute": value},
    )
    assert est.lower <= est.value <= est.upper
    assert est.relative_halfwidth >= 0
    assert est.to_dict()["breakdown"] == {"compute": value}


def test_estimate_rejects_nan_and_bad_interval() -> None:
    with pytest.raises(InvalidSpecError):
        Estimate(value=math.nan, lower=0, upper=1, unit="s", bottleneck="x", source="fitted")
    with pytest.raises(InvalidSpecError):
        Estimate(value=2, lower=3, upper=4, unit="s", bottleneck="x", source="fitted")


@pytest.mark.parametrize(
    ("ratio", "text"),
    [(14_838.4, "14,838x"), (2.5, "2.5x"), (0.0535, "0.0535x"), (0.004, "<0.01x"),
     (5e-6, "<0.01x"), (0.0, "0x")],
)  # fmt: skip
def test_format_ratio_keeps_small_ratios_legible(ratio: float, text: str) -> None:
    assert format_ratio(ratio) == text


def test_format_ms_against_shows_which_side_of_the_limit() -> None:
    assert format_ms_against(0.0010097, 0.001) == "1.01"  # not "1.0": it misses a 1 ms SLO
    assert format_ms_against(0.00100001, 0.001) == "1.00001"
    assert format_ms_against(0.0035, 2.0) == "3.5"
    assert format_ms_against(0.0009996, 0.001) == "1.0"  # within, and reads as within
    assert format_ms_against(141.7, 200.0) == "141,700.0"


def test_format_pct_against_shows_which_side_of_the_share() -> None:
    assert format_pct_against(0.94996, 0.95) == "94.996"  # not "95.0": 95% not reached
    assert format_pct_against(0.364, 0.95) == "36.4"
    assert format_pct_against(0.95, 0.95) == "95.0"
    assert format_pct_against(0.0001, 1e-12) == "0.01"  # a non-zero share never reads as 0
    assert format_pct_against(0.0, 1e-12) == "0.0"


@given(st.floats(1e-6, 1e3), st.floats(1e-6, 1e3))
def test_format_ms_against_never_puts_a_value_on_the_wrong_side(value: float, limit: float) -> None:
    shown = float(format_ms_against(value, limit).replace(",", ""))
    if value * 1e3 > limit * 1e3 and value * 1e3 - limit * 1e3 > 1e-6:
        assert shown > limit * 1e3


@pytest.mark.parametrize(
    ("low", "high", "text"),
    [
        (0.277, 0.32, "0.28-0.32 s"),  # was "0.3-0.3 s"
        (44.2, 51.0, "44-51 s"),
        (0.2771, 0.2774, "0.2771-0.2774 s"),  # more digits until the ends differ
        (1.5, 1.5, "1.5 s"),  # one value for equal ends
        (1234.0, 2345.0, "1,234-2,345 s"),
    ],
)
def test_format_span_never_prints_equal_ends(low: float, high: float, text: str) -> None:
    assert format_span(low, high, "s") == text


@pytest.mark.parametrize(
    ("value", "text"),
    [(0.00412, "0.00412"), (0.0572, "0.0572"), (2.0, "2.00"), (12.345, "12.3"), (1234.5, "1,234"),
     (0.0, "0"), (3e-6, "<0.0001"), (math.inf, "n/a"), (27.0, "27.0"), (7.1, "7.10"),
     (99.96, "100"), (9.996, "10.0"), (0.1, "0.100")],
)  # fmt: skip
def test_format_amount_never_reads_zero_for_a_small_amount(value: float, text: str) -> None:
    assert format_amount(value) == text


def test_count_of_is_singular_for_one() -> None:
    assert (count_of(1, "GPU"), count_of(8, "GPU"), count_of(1024, "GPU")) == (
        "1 GPU", "8 GPUs", "1,024 GPUs"
    )  # fmt: skip


@pytest.mark.parametrize(("seconds", "text"), [(0.05, "50 ms"), (3.0, "3 s"), (0.9995, "999.5 ms")])
def test_format_slo_latency_writes_it_as_given(seconds: float, text: str) -> None:
    assert format_slo_latency(seconds) == text


def test_format_sig_caps_the_decimals_instead_of_printing_below() -> None:
    """Session 35 QA: predict gnn --gpus 2 printed 'all-reduce <0.001 ms' for 0.0503 ms (its
    third significant digit needed a fourth decimal), a term of an epoch that did not add up."""
    from gpucast.domain.units import format_sig

    assert format_sig(0.0503, max_decimals=3) == "0.050"
    assert format_sig(0.00085, max_decimals=3) == "<0.001"
    assert format_sig(0.00853) == "0.00853" and format_sig(110_836.2) == "110,836"
    assert format_sig(4.2e-5) == "0.000042"  # --split stages read "<0.000001 s"


def test_an_unknown_gpu_region_or_provider_starts_with_its_field() -> None:
    """QA 34 B #8: every error line starts with the field it is about; an unknown GPU read
    "unknown GPU 'FOO'" alone. A raiser's own field (e.g. a cluster file's) still wins."""
    from gpucast.domain.errors import UnknownGpuError, UnknownProviderError, UnknownRegionError

    assert str(UnknownGpuError("FOO", ["T4"])).startswith("gpu: unknown GPU 'FOO'")
    assert str(UnknownRegionError("mars", ["us-east-1"])).startswith("region: unknown region")
    assert str(UnknownProviderError("ibm", ["aws"])).startswith("provider: unknown provider")
    assert str(UnknownGpuError("FOO", ["T4"], field="cluster.gpu")).startswith("cluster.gpu: ")


def test_a_small_target_is_not_printed_as_nothing() -> None:
    """QA 38 M F8: `measure train --target-ci 0.0001` said `target ±0.0%` and `±0.0% asked`."""
    from datetime import UTC, datetime

    from gpucast.domain.measurement import EnvironmentFingerprint, Measurement
    from gpucast.domain.units import percent_text
    from gpucast.domain.workload import WorkloadSpec

    assert percent_text(0.0001) == "0.01%" and percent_text(0.02) == "2.0%"
    assert percent_text(0.02, 2) == "2.00%" and percent_text(0.0) == "0.0%"
    # QA 41 QF F9: a share below 1e-6 (2 swaps in 101 M calls) in fixed point, never 2e-06%
    assert percent_text(2e-8) == "0.000002%" and percent_text(2.7e-5) == "0.0027%"
    m = Measurement(
        spec=WorkloadSpec(name="mlp", batch_size=4), mode="train",
        step_times_s=(0.01, 0.0102, 0.0098), samples_per_step=4, stop_reason="time_budget",
        target_ci=0.0001, created_at=datetime.now(UTC), device="cpu",
        environment=EnvironmentFingerprint(
            host="h", os="linux", python_version="3.11", cpu_model="cpu", cpu_cores=2,
            torch_threads=2, torch_version="2",
        ),
    )  # fmt: skip
    assert any("±0.01% asked" in w for w in m.warnings), m.warnings


@pytest.mark.parametrize(
    "typed",
    [["hidden=64", "hidden=32"], ["hidden=64,hidden=32"], [("hidden", 64), "hidden=32"]],
)
def test_a_workload_option_given_twice_is_refused(typed: list) -> None:
    """QA 38 M F10: `measure train mlp -o hidden=64 -o hidden=32` measured hidden=32 without a
    word (the last one won)."""
    from gpucast.domain.workload import parse_workload_options

    with pytest.raises(InvalidSpecError) as info:
        parse_workload_options(typed)
    assert str(info.value) == (
        "option: hidden is given twice (hidden=64, hidden=32); give it once, e.g. -o hidden=32"
    )


def test_format_usd_gives_cents_below_a_dollar_and_whole_dollars_above() -> None:
    # QA 39 L #11: a 23.8 s plan llm-train run read "$0"
    assert [format_usd(v) for v in (0.0, 0.0041, 0.38, 0.996, 1.0, 1.5, 1234.4)] == [
        "$0", "$0.0041", "$0.38", "$1", "$1", "$2", "$1,234"
    ]  # fmt: skip
    assert format_usd(float("nan")) == "n/a"


def test_a_user_string_is_shown_as_typed_not_as_repr() -> None:
    # QA 39 O #19: --metric 'x=\d+' read "(got 'x=\\d+')", the backslash doubled by repr
    from gpucast.domain.errors import UnknownNameError, as_typed

    said = str(InvalidSpecError("metric", "needs a capture group", got=r"x=\d+"))
    assert said == r"metric: needs a capture group (got 'x=\d+')"
    assert as_typed("it's") == '"it\'s"' and as_typed(3) == "3" and as_typed(None) == "None"
    assert as_typed("a\tb") == r"'a\tb'"  # unprintable: repr's escape shows it
    assert r"unknown GPU 'C:\gpus'" in str(UnknownNameError(r"C:\gpus", ["T4"], kind="GPU"))
