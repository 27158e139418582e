"""predict train --learners K (Crossbow) through the CLI and the Python API."""

from __future__ import annotations

import json

from typer.testing import CliRunner

import gpucast
from gpucast.cli.app import app

runner = CliRunner()
ARGS = ["predict", "train", "--workload", "mlp", "--batch-size", "8", "--gpu", "V100"]


def test_learners_compare_with_one_large_batch() -> None:
    result = runner.invoke(app, [*ARGS, "--learners", "4", "--critical-batch", "64", "--json"])
    assert result.exit_code == 0, result.output
    cb = json.loads(result.output)["crossbow"]
    assert cb["learners"] == 4 and cb["single_batch"] == 32
    low, high = cb["time_to_accuracy_ratio"]["low"], cb["time_to_accuracy_ratio"]["high"]
    assert 0 < low < high  # SMA at small-batch efficiency beats large-batch-like SMA
    assert high == cb["single_samples_per_s"] / cb["samples_per_s"]
    api = gpucast.predict_train(
        workload="mlp", batch_size=8, gpu="V100", learners=4, critical_batch=64
    )
    assert api.crossbow.samples_per_s == cb["samples_per_s"]
    assert api.crossbow_assumption.source == "--critical-batch"
    text = runner.invoke(app, [*ARGS, "--learners", "4"])
    assert "crossbow: 4 learners x 8 share the GPU" in text.output
    plain = runner.invoke(app, [*ARGS, "--json"])
    assert json.loads(plain.output)["crossbow"] is None


def test_bad_learners_is_one_line_exit_2() -> None:
    for extra in (
        ["--learners", "0"],
        ["--learners", "2", "--critical-batch", "-5"],
        ["--critical-batch", "290"],  # one learner: nothing to price it with (QA 39 Y #6)
    ):
        result = runner.invoke(app, [*ARGS, *extra])
        assert result.exit_code == 2, result.output
        assert len(result.output.strip().splitlines()) == 1


def test_learners_whose_replicas_do_not_fit_are_refused() -> None:
    # QA 39 Y #16: 8 BERT-large learners of 8 were priced on one T4 (16 GB) without a word
    args = ["predict", "train", "--workload", "bert-large", "--batch-size", "8", "--gpu", "T4"]
    result = runner.invoke(app, [*args, "--learners", "8"])
    assert result.exit_code == 2, result.output
    line = result.output.strip()
    assert len(line.splitlines()) == 1
    assert line.startswith("error: learners: 8 learners of 8 need") and "GiB usable" in line


def test_the_most_learners_that_fit_is_the_largest_that_does() -> None:
    """The fix names the largest count that fits (found by bisection: a linear scan down from
    --learners 1000000000 took 3 minutes, the fuzz suite's slowest case)."""
    from gpucast.domain.errors import InvalidSpecError

    try:
        gpucast.predict_train(workload="mlp", batch_size=4, gpu="V100", learners=10**9)
    except InvalidSpecError as exc:
        most = int(str(exc.fix).split("--learners ")[1].split()[0])
    else:
        raise AssertionError("10**9 learners fit one V100")
    assert gpucast.predict_train(workload="mlp", batch_size=4, gpu="V100", learners=most)
    try:
        gpucast.predict_train(workload="mlp", batch_size=4, gpu="V100", learners=most + 1)
    except InvalidSpecError as exc:
        assert f"--learners {most} or fewer" in str(exc.fix)
    else:
        raise AssertionError(f"{most + 1} learners fit, the fix said at most {most}")
