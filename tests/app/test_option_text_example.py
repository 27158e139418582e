"""``-o`` text without ``=`` suggests one of the workload's own options at its built-in value
(it suggested ``seq_len=128`` for every workload, resnet50 and user models included)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import gpucast
from gpucast.cli.app import app
from gpucast.domain.errors import InvalidSpecError, OptionTextError
from gpucast.workloads import get_workload, option_example


@pytest.mark.parametrize("workload", ["resnet50", "bert-large", "dlrm", "mlp"])
def test_the_example_is_one_of_the_workloads_options_at_its_default(workload: str) -> None:
    with pytest.raises(OptionTextError) as raised:
        gpucast.predict_train(workload, batch_size=8, gpu="V100", workload_options=["nonsense"])
    declared = dict(get_workload(workload).options)
    fix = raised.value.fix or ""
    assert fix.startswith("e.g. -o ") and f"{workload} takes {', '.join(sorted(declared))}" in fix
    key, _, value = fix.removeprefix("e.g. -o ").split(" ")[0].partition("=")
    assert key in declared and value == str(declared[key])
    assert "seq_len" not in fix or "seq_len" in declared


def test_a_user_model_it_cannot_read_gets_the_generic_form() -> None:
    with pytest.raises(OptionTextError, match=r"e\.g\. -o name=value \(a keyword of m:f\)"):
        gpucast.predict_train("m:f", batch_size=8, gpu="V100", workload_options=["nonsense"])


def test_a_user_model_gets_one_of_its_factorys_keywords() -> None:
    """QA 39: `-o width` for mymodels:cnn suggested `-o name=value`; the factory's keyword
    parameters are read without calling it."""
    from pathlib import Path

    model = Path(__file__).resolve().parents[1] / "workloads" / "example_user_model.py"
    with pytest.raises(OptionTextError) as raised:
        gpucast.predict_train(
            f"{model}:build", batch_size=8, gpu="V100", workload_options=["hidden"]
        )
    assert (raised.value.fix or "").startswith("e.g. -o features=6 (")
    assert (raised.value.fix or "").endswith("takes features, hidden)")


def test_without_a_workload_the_domain_error_is_generic() -> None:
    from gpucast.domain.workload import parse_workload_options

    with pytest.raises(InvalidSpecError, match=r"must be KEY=VALUE.*e\.g\. -o name=value$"):
        parse_workload_options(["nonsense"])
    assert option_example("no-such-workload") is None and option_example("m:f") is None


def test_the_cli_line_names_the_workloads_option() -> None:
    out = CliRunner().invoke(
        app, ["predict", "train", "--workload", "resnet50", "--gpu", "V100", "-o", "nonsense"]
    )
    assert out.exit_code == 2
    assert "e.g. -o num_classes=1000 (resnet50 takes num_classes)" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
