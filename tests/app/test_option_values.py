"""Option values a Python caller passes (QA 38 A #2, #3): any iterable for a list option, a
number or a path for a text option, and one InvalidSpecError -- never an AttributeError --
for a value an option cannot take."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpucast.app.simulation import SimulateTrainRequest
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.options import build
from gpucast.domain.plan import TrainRequest

PLAN = {"workload": "resnet50", "epochs": 1, "dataset_size": 100}
SIMULATE = {"gpu": "K80", "workers": 2, "region": "us-east1", "workload": "cifar-resnet32"}


@pytest.mark.parametrize(
    "gpus",
    [
        ["H100-SXM", "A100-80GB"],
        ("H100-SXM", "A100-80GB"),
        "H100-SXM,A100-80GB",
        iter(["H100-SXM", "A100-80GB"]),
        (gpu for gpu in ["H100-SXM", "A100-80GB"]),
    ],
)
def test_a_list_option_takes_any_ordered_iterable(gpus: Any) -> None:
    assert build(TrainRequest, {**PLAN, "gpus": gpus}).gpus == ("H100-SXM", "A100-80GB")


def test_a_set_is_read_in_sorted_order() -> None:
    request = build(
        TrainRequest,
        {**PLAN, "gpus": {"H100-SXM", "A100-80GB"}, "batch_sizes": {64, 32}, "providers": {"aws"}},
    )
    assert request.gpus == ("A100-80GB", "H100-SXM")
    assert request.batch_sizes == (32, 64)
    assert request.providers == ("aws",)


def test_a_text_option_reads_a_path_or_a_number_as_its_text() -> None:
    request = build(SimulateTrainRequest, {**SIMULATE, "region": Path("us-east1"), "steps": 100})
    assert request.region == "us-east1"
    assert build(TrainRequest, {**PLAN, "gpus": [100]}).gpus == ("100",)


@pytest.mark.parametrize("value", [["K80"], ("K80", "T4"), {"K80"}, {"name": "K80"}])
def test_a_text_option_refuses_a_collection_in_one_line(value: Any) -> None:
    with pytest.raises(InvalidSpecError, match=r"^gpu: must be one value, not a") as info:
        build(SimulateTrainRequest, {**SIMULATE, "gpu": value, "steps": 100})
    assert "\n" not in str(info.value)


def test_a_list_option_refuses_a_mapping() -> None:
    with pytest.raises(InvalidSpecError, match=r"^gpu: each item must be one value, not a dict"):
        build(TrainRequest, {**PLAN, "gpus": {"H100-SXM": 1}})


def test_an_option_of_a_verb_that_takes_none_says_so() -> None:
    # QA 38 A #5: "name: is not an option of catalog gpus; known: " (an empty list)
    from gpucast.app.catalog import CatalogGpusRequest

    with pytest.raises(InvalidSpecError) as info:
        build(CatalogGpusRequest, {"name": "H100"})
    assert str(info.value) == "name: is not an option of catalog gpus; catalog gpus takes none"


def test_a_request_built_by_hand_reads_its_values_as_the_options_do() -> None:
    # QA 38 A #9: SimulateTrainRequest(spot="no") ran on spot (a silently wrong cost), runs=2.5
    # failed with TypeError; keyword options read both as the command line does
    from gpucast.app._request import resolve

    given = {**SIMULATE, "steps": 100, "spot": "no", "runs": 20.0}
    by_hand = SimulateTrainRequest(**given)
    request = resolve(SimulateTrainRequest, by_hand, {})
    assert request == resolve(SimulateTrainRequest, None, given)
    assert (request.spot, request.runs) == (False, 20)
    plan = TrainRequest(**PLAN, gpus="H100-SXM,A100-80GB")
    assert resolve(TrainRequest, plan, {}).gpus == ("H100-SXM", "A100-80GB")
    with pytest.raises(InvalidSpecError, match=r"^runs: must be a whole number \(got 2\.5\)"):
        resolve(SimulateTrainRequest, SimulateTrainRequest(**SIMULATE, steps=100, runs=2.5), {})


def test_a_request_built_by_hand_is_read_before_its_own_checks_run() -> None:
    # QA 40 P #1: PredictTrainRequest(batch_size="64") raised TypeError ('<' between str and
    # int) in its own __post_init__, before resolve() read the value as --batch-size reads it
    from gpucast.app.predict import PredictTrainRequest

    request = PredictTrainRequest(workload="resnet50", batch_size="64", gpu="V100")  # type: ignore[arg-type]
    assert request.batch_size == 64
    with pytest.raises(InvalidSpecError) as info:
        PredictTrainRequest(workload="resnet50", batch_size="sixty", gpu="V100")  # type: ignore[arg-type]
    assert (info.value.field, info.value.exit_code) == ("batch-size", 2)
    assert str(info.value) == (
        "batch-size: must be a whole number (got 'sixty'); e.g. --batch-size 64"
    )


def test_a_request_built_by_hand_reads_text_through_its_field_s_own_parser() -> None:
    # QA 40 P #8: TrainRequest(deadline_s="24h") said "deadline: must be a number (got
    # '24h'); e.g. --deadline 24h", providers="gcp" was read letter by letter ("unknown
    # provider 'g'"), and PredictInferRequest(precision="FP8") was refused where
    # precision="FP8" as a keyword ran: a field with its own parse now reads text as its flag does
    from gpucast.app.infer import PredictInferRequest

    plan = TrainRequest(**PLAN, deadline_s="24h", providers="GCP,aws")  # type: ignore[arg-type]
    assert (plan.deadline_s, plan.providers) == (86400.0, ("gcp", "aws"))
    assert plan == build(TrainRequest, {**PLAN, "deadline": "24h", "provider": "GCP,aws"})
    infer = {"model": "llama-2-7b", "gpu": "A100", "input_len": 100, "output_len": 10}
    assert PredictInferRequest(**infer, precision="FP8").precision == "fp8"


def test_a_request_built_by_hand_with_none_for_a_required_field_says_it_is_required() -> None:
    # QA 40 P #2: PredictTrainRequest(workload=None, ...) reached the workload parser, a
    # TypeError ("argument of type 'NoneType' is not iterable"); keyword options say "is required"
    import gpucast
    from gpucast.app.predict import PredictTrainRequest

    with pytest.raises(InvalidSpecError) as by_keyword:
        gpucast.predict_train(workload=None, batch_size=64, gpu="V100")
    with pytest.raises(InvalidSpecError) as by_hand:
        PredictTrainRequest(workload=None, batch_size=64, gpu="V100")  # type: ignore[arg-type]
    assert str(by_hand.value) == str(by_keyword.value)
    assert str(by_hand.value) == "workload: is required; e.g. --workload resnet50"


@pytest.mark.parametrize("request_object", [False, True])
def test_one_option_in_two_spellings_is_refused(request_object: bool) -> None:
    # QA 38 A #14: batch_size=32 and "batch-size"=64 ran whichever came last, silently
    from gpucast.app._request import resolve

    given = {"batch_size": 32, "batch-size": 64}
    request = build(SimulateTrainRequest, {**SIMULATE, "steps": 100}) if request_object else None
    options = given if request_object else {**SIMULATE, "steps": 100, **given}
    with pytest.raises(InvalidSpecError) as info:
        resolve(SimulateTrainRequest, request, options)
    assert str(info.value) == (
        "batch-size: is given twice, as 'batch_size' and as 'batch-size'; keep one"
    )


def test_a_config_file_given_to_a_verb_that_reads_none_says_so() -> None:
    """QA 40 P #9: `predict_train(config="x.yaml")` listed the verb's options, true but no
    help: it says the verb reads no config file and which verbs do."""
    import gpucast

    with pytest.raises(InvalidSpecError) as err:
        gpucast.predict_train(config="x.yaml", workload="mlp", batch_size=4, gpu="T4")
    assert err.value.field == "config"
    assert "predict train reads no config file" in str(err.value)
    assert "the plan and simulate verbs take config=FILE" in str(err.value)
