"""What practitioners train in on each GPU, and how a plan states it."""

from __future__ import annotations

import pytest

from gpucast.domain.workload import (
    auto_precision_assumption,
    practitioner_compute_precision,
    precision_label,
    profiled_precision,
)


@pytest.mark.parametrize(
    ("bf16", "tf32", "want"),
    [(True, True, "bf16"), (True, False, "bf16"), (False, True, "tf32"), (False, False, "fp32")],
)
def test_practitioners_use_bf16_then_tf32_then_fp32(bf16: bool, tf32: bool, want: str) -> None:
    assert practitioner_compute_precision(has_bf16=bf16, has_tf32=tf32) == want


def test_tf32_is_an_fp32_workload_with_tf32_matmuls() -> None:
    assert profiled_precision("tf32") == "fp32"
    assert profiled_precision("bf16") == "bf16"
    assert precision_label("tf32") == "fp32 (TF32 matmuls)"
    assert precision_label("fp32") == "fp32"


def test_the_assumption_lists_gpus_per_precision() -> None:
    said = auto_precision_assumption(
        {"K80": "fp32", "A100-40GB": "bf16", "X": "tf32", "H100-SXM": "bf16"}
    )
    assert said.value.startswith(
        "auto -- bf16 on A100-40GB, H100-SXM; fp32 (TF32 matmuls) on X; fp32 on K80 ("
    )
    assert said.source == "--precision auto (the default)"
    assert "--precision fp32|bf16|fp16" in said.override
    many = auto_precision_assumption({f"G{k}": "bf16" for k in range(10)})
    assert "and 2 more" in many.value
    kept = auto_precision_assumption({"K80": "bf16"}, fixed="store run #3 was profiled at bf16")
    assert kept.source == "store run #3 was profiled at bf16"
    assert "bf16 on K80 (store run #3" in kept.value


def test_fp8_is_a_bf16_workload_with_fp8_matmuls() -> None:
    from gpucast.domain.workload import FP8, TRAIN_PRECISION_CHOICES, measured_precision

    assert FP8 in TRAIN_PRECISION_CHOICES
    assert profiled_precision(FP8) == "bf16"
    assert precision_label(FP8) == "fp8 (matmuls; bf16 elsewhere)"
    # a bf16 run calibrates no fp8 step; tf32 keeps its fp32 runs
    assert measured_precision(FP8) == FP8
    assert measured_precision("tf32") == "fp32" and measured_precision("bf16") == "bf16"
    said = auto_precision_assumption({"H100-SXM": FP8}, requested=FP8)
    assert said.value.startswith("fp8 -- fp8 (matmuls; bf16 elsewhere) on H100-SXM (")
    assert said.source == "--precision fp8" and "bf16" in said.override


def test_fp8_on_a_gpu_without_its_units_is_one_clear_error() -> None:
    from gpucast.catalog import load_catalog
    from gpucast.domain.errors import InvalidSpecError
    from gpucast.domain.workload import check_precision_units

    catalog = load_catalog()
    check_precision_units("fp8", catalog.gpu("H100-SXM"), catalog)  # has fp8: passes
    check_precision_units("fp16", catalog.gpu("T4"), catalog)  # one it has units for: passes
    check_precision_units("tf32", catalog.gpu("T4"), catalog)  # fp32 with TF32 where there are
    with pytest.raises(InvalidSpecError) as err:
        check_precision_units("fp8", catalog.gpu("T4"), catalog)
    text = str(err.value)
    assert text.startswith("precision: fp8 needs fp8 tensor cores, which the T4 has not")
    assert "(it trains in fp16, fp32)" in text
    assert "--precision fp16" in (err.value.fix or "") and "\n" not in text


@pytest.mark.parametrize(
    ("precision", "gpu", "runs_on"),
    [
        ("bf16", "V100-16GB", False),  # Volta: fp16 tensor cores only; bf16 is emulated
        ("bf16", "T4", False),
        ("bf16", "P4", False),
        ("bf16", "A100-40GB", True),
        ("fp16", "K80", False),  # no fp16 rate on the datasheet
        ("fp16", "P100", True),  # 2x fp32 on the datasheet
        ("fp8", "A100-40GB", False),
        ("fp8", "H100-SXM", True),
        ("tf32", "K80", True),  # fp32 with TF32 matmuls where there are TF32 units
        ("fp32", "K80", True),
        ("int8", "V100-16GB", True),  # keeps its fallback (the catalog's column has gaps)
    ],
)
def test_one_rule_says_which_gpus_run_a_precision(precision: str, gpu: str, runs_on: bool) -> None:
    from gpucast.catalog import load_catalog
    from gpucast.domain.errors import InvalidSpecError
    from gpucast.domain.workload import check_precision_units

    catalog = load_catalog()
    spec = catalog.gpu(gpu)
    assert spec.runs(precision) is runs_on
    if runs_on:
        check_precision_units(precision, spec, catalog)
        return
    with pytest.raises(InvalidSpecError) as err:
        check_precision_units(precision, spec, catalog)
    assert f"{precision} needs" in err.value.message and spec.name in err.value.message
    assert f"a GPU with {precision} units" in (err.value.fix or "")


def test_the_fix_names_only_precisions_the_verb_takes() -> None:
    from gpucast.catalog import load_catalog
    from gpucast.domain.workload import units_fix

    catalog = load_catalog()
    k80, v100 = catalog.gpu("K80"), catalog.gpu("V100-16GB")
    assert units_fix([v100], catalog, "bf16").startswith("use --precision fp16 (or auto), or ")
    # serving takes no auto and no tf32; an LLM verb no fp32: only a GPU is left to suggest
    assert units_fix([k80], catalog, "fp16", or_else="", choices=("fp32", "fp16")).startswith(
        "use --precision fp32, or a GPU with fp16 units (P100, "
    )
    assert units_fix([k80], catalog, "fp16", or_else="", choices=("fp16", "int8")).startswith(
        "use a GPU with fp16 units"
    )


def test_every_training_verb_has_the_one_default_precision() -> None:
    """QA #10: predict train and predict energy defaulted to fp32, plan train and simulate
    train to auto; all four read one constant now, and state it as the default."""
    from gpucast.app.energy import PredictEnergyRequest
    from gpucast.app.predict import PredictTrainRequest
    from gpucast.app.simulation import SimulateTrainRequest
    from gpucast.domain.options import field_for
    from gpucast.domain.plan import TrainRequest
    from gpucast.domain.workload import (
        AUTO_PRECISION,
        TRAIN_PRECISION_DEFAULT,
        precision_assumption,
        precision_shown,
    )

    assert TRAIN_PRECISION_DEFAULT == AUTO_PRECISION
    for cls in (PredictTrainRequest, PredictEnergyRequest, TrainRequest, SimulateTrainRequest):
        f = field_for(cls, "precision")
        assert f is not None and f.default == TRAIN_PRECISION_DEFAULT, cls.__name__
        assert f.info.help.startswith("auto"), cls.__name__  # the default first
    said = precision_assumption("bf16", [("H100-SXM", True)], auto=True)
    assert said.source == "--precision auto (the default)"
    assert precision_shown("bf16", "auto") == "bf16 by auto, the --precision default"
    assert precision_shown("fp32", "fp32") == "fp32"


def test_the_override_offers_only_other_precisions_the_gpus_run() -> None:
    """QA34 B #3: a bf16 prediction offered --precision auto|bf16, and an fp32 one on a V100
    offered bf16, which it has no units for."""
    from gpucast.domain.workload import precision_assumption

    assert precision_assumption("bf16", [("A100", True)]).override == "--precision auto|fp32|fp16"
    assert precision_assumption("fp32", [("V100", False)]).override == "--precision auto|fp16"
    auto = precision_assumption("fp32", [("V100", False)], auto=True)
    assert auto.override == "--precision fp16"


def test_the_override_offers_no_fp16_to_gpus_without_fp16_units() -> None:
    """QA 39: `plan train --gpu K80 --precision fp32` offered `--precision auto|fp16` and
    `plan train --gpu T4 --precision tf32` `fp32|bf16|fp16|auto`: fp16 on a K80 and bf16 on a
    T4 are refused (exit 2)."""
    from gpucast.domain.workload import auto_precision_assumption, precision_assumption

    k80 = precision_assumption("fp32", [("K80", False)], fp16_units=False)
    assert k80.override == "--precision auto"
    auto = precision_assumption("fp32", [("K80", False)], auto=True, fp16_units=False)
    assert auto.override == ""
    tf32 = auto_precision_assumption({"T4": "fp32"}, requested="tf32", units=("fp16",))
    assert tf32.override == "--precision fp32|fp16|auto"
    fixed = auto_precision_assumption({"K80": "fp32"}, fixed="a profile file", units=())
    assert fixed.override == "--precision fp32"
    # unchanged where every unit is there (the whole catalog's plan skips the GPUs without)
    assert auto_precision_assumption({"A100": "bf16"}).override == "--precision fp32|bf16|fp16"
