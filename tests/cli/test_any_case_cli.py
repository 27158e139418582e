"""Names in any case: ``--precision BF16`` is ``bf16``, ``--software TUNED`` is ``tuned`` and
``--slo P99<50MS`` is ``p99<50ms`` on every verb (QA, session 33; #8 of its second pass).

Every request field that holds a precision, a software stack or a latency SLO parses with
:func:`gpucast.domain.options.lower_text` (or ``lower_list``), so the checks after it see the
canonical lower case; an unknown precision is still one line listing the accepted ones, exit
code 2.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import pkgutil
from collections.abc import Callable

import pytest
from typer.testing import CliRunner

import gpucast.app
import gpucast.domain
from gpucast.cli.app import app
from gpucast.domain.options import META_KEY, convert, fields_of

runner = CliRunner()


def _fields(holds: Callable[[str], bool]) -> list[tuple[str, str]]:
    """(request class, field name) of every option field whose name ``holds``."""
    found: list[tuple[str, str]] = []
    for package in (gpucast.app, gpucast.domain):
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            for obj in vars(module).values():
                if not (isinstance(obj, type) and dataclasses.is_dataclass(obj)):
                    continue
                if obj.__module__ != module.__name__:
                    continue
                for f in dataclasses.fields(obj):
                    if holds(f.name) and META_KEY in f.metadata:
                        found.append((f"{obj.__module__}:{obj.__qualname__}", f.name))
    return found


PRECISION_FIELDS = _fields(lambda name: "precision" in name)
SOFTWARE_FIELDS = _fields(lambda name: name == "software")
SLO_FIELDS = _fields(lambda name: name == "slo")


def test_the_walk_finds_the_precision_fields_of_every_verb() -> None:
    names = {cls.rsplit(":", 1)[1] for cls, _ in PRECISION_FIELDS}
    assert {"TrainRequest", "PredictTrainRequest", "PredictInferRequest"} <= names
    assert {"PlanLlmTrainRequest", "SimulateServeRequest", "ProfileRequest"} <= names
    assert len(PRECISION_FIELDS) >= 15, PRECISION_FIELDS


@pytest.mark.parametrize(("cls", "name"), PRECISION_FIELDS, ids=lambda v: str(v))
def test_every_precision_field_takes_any_case(cls: str, name: str) -> None:
    module, _, qualname = cls.partition(":")
    request_cls = getattr(importlib.import_module(module), qualname)
    field = next(f for f in fields_of(request_cls) if f.name == name)
    if field.kind == "list":
        assert convert(field, "FP32, Fp16") == ("fp32", "fp16")
    else:
        assert convert(field, " BF16 ") == "bf16"


def test_the_walk_finds_the_software_and_slo_fields() -> None:
    software = {cls.rsplit(":", 1)[1] for cls, _ in SOFTWARE_FIELDS}
    assert {"PredictTrainRequest", "TrainRequest", "PredictGnnRequest"} <= software, software
    slo = {cls.rsplit(":", 1)[1] for cls, _ in SLO_FIELDS}
    assert {"PlanServeRequest", "SimulateServeRequest", "PlanServerlessRequest"} <= slo, slo


@pytest.mark.parametrize(
    ("cls", "name"), SOFTWARE_FIELDS + SLO_FIELDS, ids=lambda v: str(v)
)  # fmt: skip
def test_every_software_and_slo_field_takes_any_case(cls: str, name: str) -> None:
    module, _, qualname = cls.partition(":")
    request_cls = getattr(importlib.import_module(module), qualname)
    field = next(f for f in fields_of(request_cls) if f.name == name)
    typed, canonical = (" TUNED", "tuned") if name == "software" else ("P99<50MS ", "p99<50ms")
    assert convert(field, typed) == canonical


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        (["predict", "train", "--workload", "resnet50", "--gpu", "A100-80GB",
          "--batch-size", "64", "--precision", "Fp16", "--json"], "fp16"),
        (["predict", "infer", "--model", "llama-3-8b", "--gpu", "H100-SXM", "--input-len",
          "512", "--output-len", "128", "--batch-size", "4", "--precision", "FP8",
          "--kv-precision", "FP8", "--json"], "fp8"),
        (["predict", "llm-train", "--model", "llama-3-8b", "--gpu", "H100-SXM", "--gpus",
          "8", "--global-batch", "64", "--precision", "BF16", "--json"], "bf16"),
        (["predict", "train", "--workload", "resnet50", "--gpu", "A100-80GB",
          "--batch-size", "64", "--software", "TUNED", "--json"], "tuned"),
        (["plan", "serve", "--model", "resnet50:150", "--slo", "P99<50MS", "--limit", "1",
          "--json"], "p99<50ms"),
    ],
    ids=["predict-train", "predict-infer", "predict-llm-train", "software", "slo"],
)  # fmt: skip
def test_upper_case_precisions_run_as_their_lower_case(argv: list[str], shown: str) -> None:
    result = runner.invoke(app, argv)
    assert result.exit_code == 0, result.output
    lower = runner.invoke(app, [shown if a.lower() == shown else a for a in argv])
    assert lower.exit_code == 0, lower.output
    assert json.loads(result.output) == json.loads(lower.output)


def test_an_unknown_precision_is_one_line_listing_the_accepted_ones() -> None:
    result = runner.invoke(
        app,
        ["predict", "train", "--workload", "resnet50", "--gpu", "A100-80GB", "--batch-size",
         "64", "--precision", "FP4"],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert "precision" in lines[0] and "fp32, bf16, fp16, tf32, fp8" in lines[0]
