"""`gpucast plan train --target`: the work to a quality target, with its rule shown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import gpucast
from gpucast.cli.app import app as cli
from gpucast.domain.jsonable import json_text

runner = CliRunner()
SMALL = ["plan", "train", "--workload", "cifar-resnet20", "--no-spot", "--gpu", "V100"]


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("GPUCAST_SHARED_DATA", raising=False)
    monkeypatch.chdir(tmp_path)


def _plan(*args: str) -> dict:  # type: ignore[type-arg]
    result = runner.invoke(cli, [*SMALL, *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)  # type: ignore[no-any-return]


def _efficiency(plan: dict) -> str:  # type: ignore[type-arg]
    (note,) = [a for a in plan["assumptions"] if a["name"] == "statistical efficiency"]
    return str(note["value"])


def test_epochs_at_a_batch_equal_epochs_and_reference_batch() -> None:
    a = _plan("--target", "10epochs@128", "--dataset-size", "50000")
    b = _plan("--epochs", "10", "--reference-batch", "128", "--dataset-size", "50000")
    best_a, best_b = a["candidates"][a["recommended"]], b["candidates"][b["recommended"]]
    assert best_a["epochs"] == pytest.approx(best_b["epochs"])
    assert best_a["cost_usd"] == pytest.approx(best_b["cost_usd"])
    assert "10 epochs to target at global batch 128" in _efficiency(a)
    assert "at the recommended global batch" in _efficiency(b)


def test_mlperf_target_is_turned_into_samples_at_each_global_batch() -> None:
    plan = _plan("--target", "mlperf:resnet")
    text = _efficiency(plan)
    assert "mlperf:resnet" in text and "B_noise" in text and "at the recommended" in text
    assert "its seeds trained resnet50, not cifar-resnet20" in text  # QA 39 Y #3
    assert plan["request"]["target"] == "mlperf:resnet"
    for c in plan["candidates"]:
        assert 30 < c["epochs"] < 90  # ImageNet epochs of the MLPerf reference


def test_the_footer_does_not_credit_a_fitted_critical_batch_to_the_family() -> None:
    # QA 39 Y #14: "critical batch 45,642 (cifar-cnn)" read as the family's prior
    result = runner.invoke(cli, [*SMALL, "--target", "mlperf:resnet"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "(the statistical efficiency's B_noise; workload family cifar-cnn)" in text


def test_mlperf_target_times_the_run_with_its_evaluations() -> None:
    from gpucast.catalog.mlperf_eval import mlperf_eval_schedule
    from gpucast.catalog.steptime import shipped_step_time_model

    model = shipped_step_time_model()
    assert model is not None and model.eval_latency_s_ > 0
    rule = mlperf_eval_schedule("resnet")
    plan = _plan("--target", "mlperf:resnet")
    (note,) = [a for a in plan["assumptions"] if a["name"] == "evaluations"]
    assert "every 5,124,668 samples on 50,000 samples" in note["value"]
    assert "mlperf_eval.csv" in note["source"] and note["override"]
    for c in plan["candidates"]:
        b = c["breakdown_s"]
        samples = c["epochs"] * 1_281_167
        runs = max(1.0, samples / rule.every_samples)
        # every worker evaluates its share (an async PS's global batch is one worker's)
        batch = c["global_batch"] * (c["gpus"] if c["strategy"] == "ps" else 1)
        forward = rule.eval_samples / batch / 3 * b["compute_s"]
        assert b["evaluation_s"] == pytest.approx(runs * (model.eval_latency_s_ + forward))
        assert 0 < b["evaluation_s"] < b["train_s"]
        if c["market"] == "on-demand":
            assert c["time_s"] == pytest.approx(b["startup_s"] + b["train_s"])
    # a target in samples holds no evaluations
    plain = _plan("--target", "5e6samples@1024")
    assert not [a for a in plain["assumptions"] if a["name"] == "evaluations"]
    assert all(c["breakdown_s"]["evaluation_s"] == 0.0 for c in plain["candidates"])


def test_zeus_target_uses_the_published_seeds(shared_data: Path) -> None:
    plan = _plan("--target", "zeus:cifar100", "--data-dir", str(shared_data))
    assert "zeus:cifar100" in _efficiency(plan)
    assert "learning rate fixed" in _efficiency(plan)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--target", "soon"], "target"),
        (["--target", "mlperf:resnet", "--epochs", "3"], "not both"),
        # the field first, as every other target error (QA 39 Y #4)
        (["--target", "mlperf:imagenet"], "target: unknown MLPerf benchmark 'imagenet'"),
        (["--target", "zeus:imagenet"], "--data-dir"),
        (["--target", "0samples@128"], "> 0"),
        (["--target", "mlperf:resnet", "--critical-batch", "100"], "critical-batch"),
        (["--workload", "mlp"], "no convergence data or target given"),
        # less than one step at its own batch (QA 39 Y #5)
        (["--target", "1e6samples@2000000"], "target: 1,000,000 samples to target is less"),
        (
            ["--epochs", "90", "--reference-batch", "2000000", "--dataset-size", "1000"],
            "reference-batch: 90,000 samples to target is less than one step",
        ),
        # QA 41 QT: the flag's spelling, as every other field ("reference_batch" before)
        (["--epochs", "90", "--reference-batch", "0"], "reference-batch: must be an integer"),
        # QA 41 QT: "(the batch after @ ... is it)" followed --epochs too, about another flag
        (["--target", "90epochs@256", "--epochs", "9"], "not both; drop --epochs\n"),
        (["--target", "mlperf:resnet", "--dataset-size", "9"], "dataset-size: mlperf:resnet"),
    ],
)
def test_bad_targets_are_one_line_and_exit_2(args: list[str], needle: str) -> None:
    result = runner.invoke(cli, [*SMALL, *args])
    assert result.exit_code == 2, result.output
    assert needle in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_a_measured_noise_scale_sets_the_critical_batch(tmp_path: Path) -> None:
    model = Path(__file__).parents[1] / "measure" / "regression_model.py"
    workload = f"{model}:factory"
    db = str(tmp_path / "store.db")
    measured = runner.invoke(
        cli,
        ["--db", db, "measure", "train", workload, "--batch-size", "256", "--noise-scale",
         "--max-time-s", "1", "--min-samples", "3", "--device", "cpu", "--json"],
    )  # fmt: skip
    assert measured.exit_code == 0, measured.output
    noise = json.loads(measured.output)["gradient_noise"]
    assert 3.0 < noise["noise_scale"] < 30.0  # 9 in closed form
    result = runner.invoke(
        cli,
        ["--db", db, "plan", "train", "--workload", workload, "--target", "1e7samples@64",
         "--no-spot", "--gpu", "T4", "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    (note,) = [a for a in plan["assumptions"] if a["name"] == "statistical efficiency"]
    assert "measured for this workload" in note["value"] and "B_simple" in note["source"]
    assert plan["critical_batch"] == pytest.approx(noise["noise_scale"])
    # a given critical batch wins over the stored one
    given = runner.invoke(
        cli,
        ["--db", db, "plan", "train", "--workload", workload, "--target", "1e7samples@64",
         "--no-spot", "--gpu", "T4", "--critical-batch", "4096", "--json"],
    )  # fmt: skip
    assert json.loads(given.output)["critical_batch"] == 4096
    # predict train --learners prices Crossbow with the same stored B_noise (QA 39 Y #2: it
    # took the family's prior, 4,096, where plan train took the measured one)
    crossbow = runner.invoke(
        cli,
        ["--db", db, "predict", "train", "--workload", workload, "--batch-size", "64",
         "--gpu", "T4", "--learners", "2", "--json"],
    )  # fmt: skip
    assert crossbow.exit_code == 0, crossbow.output
    data = json.loads(crossbow.output)
    assert data["crossbow"]["noise_batch"] == pytest.approx(noise["noise_scale"])
    assert "B_simple" in data["crossbow_assumption"]["source"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--noise-scale", "--batch-size", "2"], "noise-micro-batches"),
        (["--noise-scale", "--distributed", "ddp"], "noise-scale"),
        (["--noise-scale", "--noise-micro-batches", "1"], "noise-micro-batches"),
    ],
)
def test_bad_noise_options_are_one_line(args: list[str], needle: str, tmp_path: Path) -> None:
    result = runner.invoke(cli, ["--db", str(tmp_path / "s.db"), "measure", "train", "mlp", *args])
    assert result.exit_code == 2, result.output
    assert needle in result.output and len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "s.db").exists()


def test_goodput_objective_shows_the_batch_chosen_and_why() -> None:
    plan = _plan("--epochs", "10", "--dataset-size", "50000", "--objective", "goodput")
    best = plan["candidates"][plan["recommended"]]
    assert best["goodput_samples_per_s"] == max(
        c["goodput_samples_per_s"] for c in plan["candidates"]
    )
    chosen = [o for o in plan["batch_choice"] if o["chosen"]]
    assert [o["global_batch"] for o in chosen] == [best["global_batch"]]
    assert "goodput" in plan["batch_why"]
    result = runner.invoke(
        cli, [*SMALL, "--epochs", "10", "--dataset-size", "50000", "--objective", "goodput"]
    )
    assert result.exit_code == 0, result.output
    assert "batch: global batch" in result.output
    assert "global batch on the recommended hardware" in result.output


SIM = ["simulate", "train", "--gpu", "K80", "--workers", "4", "--region", "us-east1",
       "--workload", "resnet50", "--strategy", "allreduce", "--runs", "100",
       "--speed", "1.0"]  # fmt: skip


def test_simulate_train_turns_a_target_into_steps_at_its_global_batch() -> None:
    result = runner.invoke(cli, [*SIM, "--target", "1e6samples@512", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    (note,) = [a for a in data["assumptions"] if a["name"] == "statistical efficiency"]
    # 4 workers x batch 128 = global batch 512, the reference: 1e6 / 512 = 1,954 steps
    assert "1,954 steps of 512 samples" in note["value"]
    steps = runner.invoke(cli, [*SIM, "--steps", "1954", "--json"])
    assert json.loads(steps.output)["duration_s"] == data["duration_s"]
    larger = runner.invoke(cli, [*SIM, "--target", "1e6samples@128", "--json"])
    (note,) = [
        a for a in json.loads(larger.output)["assumptions"] if a["name"] == "statistical efficiency"
    ]
    assert "at this global batch 512" in note["value"]


def test_simulate_train_scales_a_target_with_a_given_critical_batch() -> None:
    # QA 39 Y #1: its note named --critical-batch as the override, and the flag did not exist
    args = [*SIM, "--target", "1e6samples@128", "--critical-batch", "1000", "--json"]
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    (note,) = [a for a in data["assumptions"] if a["name"] == "statistical efficiency"]
    # 1e6 x (1 + 512/1000) / (1 + 128/1000) = 1,340,426 samples = 2,619 steps of 512
    assert "B_noise 1,000: given" in note["value"]
    assert "2,619 steps of 512 samples" in note["value"]
    api = gpucast.simulate_train(
        gpu="K80", workers=4, region="us-east1", workload="resnet50", strategy="allreduce",
        runs=100, speed="1.0", target="1e6samples@128", critical_batch=1000,
    )  # fmt: skip
    assert json.loads(json_text(api.to_dict()))["duration_s"] == data["duration_s"]


def test_simulate_train_takes_epochs_of_the_family_dataset_as_plan_train() -> None:
    # QA 39 Y #13: plan train took 90epochs@B for resnet50, simulate train refused it
    result = runner.invoke(cli, [*SIM, "--target", "90epochs@512", "--json"])
    assert result.exit_code == 0, result.output
    notes = {a["name"]: a["value"] for a in json.loads(result.output)["assumptions"]}
    assert notes["dataset size"] == "1,281,167 samples per epoch"
    steps = -(-90 * 1_281_167 // 512)  # at the reference batch: ceil(samples / 512)
    assert f"{steps:,} steps of 512 samples" in notes["statistical efficiency"]


def test_simulate_train_runs_an_mlperf_target_with_its_evaluations() -> None:
    import re

    result = runner.invoke(cli, [*SIM, "--target", "mlperf:resnet", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    notes = {a["name"]: a["value"] for a in data["assumptions"]}
    train = re.search(r"([\d,]+) steps of 512 samples", notes["statistical efficiency"])
    extra = re.search(r"simulated as ([\d,]+) more steps", notes["evaluations"])
    assert train is not None and extra is not None
    steps, more = (int(m.group(1).replace(",", "")) for m in (train, extra))
    # every 4 epochs, a forward pass over 50,000 images at a third of a 1 s step per 512
    runs = max(1.0, steps * 512 / 5_124_668)
    assert more == pytest.approx(runs * 50_000 / 512 / 3, rel=0.02)
    same = runner.invoke(cli, [*SIM, "--steps", str(steps + more), "--json"])
    assert json.loads(same.output)["duration_s"] == data["duration_s"]


def test_simulate_train_says_when_evaluations_are_outside_the_timed_run() -> None:
    import re

    result = runner.invoke(cli, [*SIM, "--target", "mlperf:stable_diffusion", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    notes = {a["name"]: a["value"] for a in data["assumptions"]}
    assert "outside the timed run" in notes["evaluations"]
    train = re.search(r"([\d,]+) steps of 512 samples", notes["statistical efficiency"])
    assert train is not None
    steps = int(train.group(1).replace(",", ""))
    same = runner.invoke(cli, [*SIM, "--steps", str(steps), "--json"])
    assert json.loads(same.output)["duration_s"] == data["duration_s"]  # no steps added


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ([], "--steps or as --target"),
        (["--steps", "10", "--target", "mlperf:resnet"], "--steps or as --target"),
        (["--workload", "mlp", "--target", "90epochs@512"], "dataset-size"),  # no default
        (["--target", "mlperf:nope"], "target: unknown MLPerf benchmark"),
        (["--steps", "10", "--critical-batch", "100"], "critical-batch: only applies"),
        (["--target", "mlperf:resnet", "--critical-batch", "100"], "critical-batch"),
        (["--target", "1e6samples@128", "--critical-batch", "0"], "critical-batch"),
        # QA 41 QT: as plan train (exit 2; no fix named before)
        (["--target", "mlperf:resnet", "--dataset-size", "9"], "dataset-size: mlperf:resnet"),
        (["--target", "9epochs@128", "--dataset-size", "0"], "(got 0); e.g. --dataset-size"),
    ],
)
def test_simulate_target_bad_input(args: list[str], needle: str) -> None:
    result = runner.invoke(cli, [*SIM, *args])
    assert result.exit_code == 2, result.output
    assert needle in result.output and len(result.output.strip().splitlines()) == 1


def _rule_note(plan: dict) -> str:  # type: ignore[type-arg]
    (note,) = [a for a in plan["assumptions"] if a["name"] == "learning rate"]
    return str(note["value"])


def test_lr_rule_prices_a_fixed_rule_and_auto_names_its_choice() -> None:
    base = ["--target", "10epochs@128", "--dataset-size", "50000", "--batch-size", "512"]
    tuned = _plan(*base)
    sqrt = _plan(*base, "--lr-rule", "sqrt")
    auto = _plan(*base, "--lr-rule", "auto")
    best = [p["candidates"][p["recommended"]] for p in (tuned, sqrt, auto)]
    assert best[1]["epochs"] > best[0]["epochs"] * 1.01  # sqrt under-steps SGD at 4 x B0+
    assert best[2]["epochs"] == pytest.approx(best[0]["epochs"], rel=0.011)
    assert "sqrt rule" in _rule_note(sqrt) and "sgd optimizer" in _rule_note(sqrt)
    (rule,) = [a for a in sqrt["assumptions"] if a["name"] == "learning rate"]
    assert "--target Nepochs@B's B" in rule["override"]  # not --reference-batch alone (QA 39 Y #9)
    # cifar family: B_noise 2,048; at 512 linear costs +1.3% (> 1%): AdaScale
    assert "learning rate chosen: adascale" in _efficiency(auto)
    assert "linear +1.3%" in _efficiency(auto)
    adam = _plan(*base, "--lr-rule", "sqrt", "--optimizer", "adam")
    assert adam["candidates"][adam["recommended"]]["epochs"] < best[1]["epochs"]
    assert not [a for a in tuned["assumptions"] if a["name"] == "learning rate"]


def test_lr_rule_bad_input_is_one_line() -> None:
    result = runner.invoke(cli, [*SMALL, "--lr-rule", "cubic"])
    assert result.exit_code == 2
    assert "lr-rule" in result.output and "auto, tuned" in result.output
    result = runner.invoke(cli, [*SMALL, "--lr-rule", "linear", "--optimizer", "quantum"])
    assert result.exit_code == 2 and "optimizer" in result.output
    result = runner.invoke(cli, [*SMALL, "--optimizer", "adam"])
    assert result.exit_code == 2 and "optimizer: only applies with --lr-rule" in result.output


def test_lr_rule_keeps_a_curve_measured_under_its_own_rule(shared_data: Path) -> None:
    args = ["--target", "zeus:cifar100", "--data-dir", str(shared_data)]
    kept = _plan(*args, "--lr-rule", "auto")
    assert "the data's own" in _rule_note(kept) and "fixed rule" in _rule_note(kept)
    result = runner.invoke(cli, [*SMALL, *args, "--lr-rule", "linear"])
    assert result.exit_code == 2
    assert "not identifiable" in result.output and "--target Nepochs@B" in result.output
