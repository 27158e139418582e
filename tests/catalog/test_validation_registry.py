"""The validation registry: a figure is attached only to the regime it was measured in."""

from __future__ import annotations

from gpucast.catalog.validation import validation_for


def test_a_validated_regime_carries_its_error_data_and_command() -> None:
    v = validation_for("ps-cluster", ["K80"], "fp32", 4)
    assert v.validated and v.error is not None and "2.73%" in v.error
    assert "cluster_scaling" in v.data and v.command.startswith("python benchmarks/")


def test_another_regime_says_not_validated_and_where_it_was() -> None:
    for gpus, precision, workers in ((["H100-SXM"], "bf16", 64), (["K80"], "fp32", 64),
                                     (["K80"], "bf16", 4)):  # fmt: skip
        v = validation_for("ps-cluster", gpus, precision, workers)
        assert not v.validated and v.error is None
        assert v.text().startswith("not validated for") and "validated only for K80" in v.text()


def test_a_model_never_validated_says_so_plainly() -> None:
    v = validation_for("fsdp", ["A100-80GB"], "bf16", 16)
    assert v.text() == "not validated for A100-80GB, bf16, 16 GPUs"


def test_data_parallel_scaling_carries_the_mlperf_and_pollux_figures() -> None:
    # a DDP plan on the GPUs and scales MLPerf and Pollux ran states their figures
    mlperf = validation_for("allreduce", ["H100-SXM"], "bf16", 3584)
    assert mlperf.validated and "mlperf_training_v4.0" in mlperf.data
    pollux = validation_for("allreduce", ["T4"], "fp32", 16)
    assert pollux.validated and "9.7%" in (pollux.error or "")
    for gpus, precision, n in ((["A100-80GB"], "bf16", 16), (["T4"], "fp32", 64)):
        assert not validation_for("allreduce", gpus, precision, n).validated


def test_a_row_without_data_does_not_say_on_none() -> None:
    v = validation_for("gnn-split", ["A100-80GB"], "fp32")
    assert v.validated and v.data == ""
    assert v.text().endswith("(for A100-80GB, fp32, 1 GPU)") and "on none" not in v.text()


def test_the_line_tells_the_predictions_regime_from_the_data_measured() -> None:
    """QA 41 R15: "(A100-40GB, bf16, 1 GPU on cmdare/checkpoint/...)" read as if CM-DARE's
    TensorFlow saves had been A100 bf16 ones."""
    v = validation_for("checkpoint", ["A100-40GB"], "bf16", 1)
    assert v.text() == (
        "all: MAPE 6.50% per save leave-one-model-out (for A100-40GB, bf16, 1 GPU; measured on "
        "cmdare/checkpoint/whole_data.csv (20 models, TensorFlow saves on GCE))"
    )


def test_a_regime_known_to_lack_data_says_why() -> None:
    """fp8 steps of profiled workloads: the row says the fp8 efficiency rests on GPT-3 runs
    alone; the 16-bit regimes keep their figures."""
    v = validation_for("roofline-step", ["H100-SXM"], "fp8")
    assert not v.validated and v.error is None
    assert v.text().startswith("not validated for H100-SXM, fp8, 1 GPU: no step at fp8")
    assert "GPT-3" in v.text() and "widest band" in v.text()
    assert validation_for("roofline-step", ["H100-SXM"], "bf16").validated
    other = validation_for("roofline-step", ["A100-80GB"], "bf16").text()
    assert "validated only for" in other and "fp8" not in other
