"""QA 41 QS #1: options that shape spot servers only, given to a job or plan without any, are
refused (exit 2, one line naming the flag and the fix) -- they did nothing without a word, and
`plan train --on-demand` still listed them among its assumptions as applied."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

import gpucast
from gpucast.app.llm_plan import PlanLlmTrainRequest
from gpucast.app.simulation import SimulateTrainRequest
from gpucast.cli.app import app
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.plan import TrainRequest

_SIM = dict(gpu="V100", workers=2, region="us-east1", provider="gcp", workload="mlp", steps=100)
_LLM = dict(model="llama-3-8b", tokens=2e11, seq_len=8192, global_batch=512, deadline_s="7d")

_SPOT_ONLY: list[tuple[str, Any]] = [
    ("hazard_per_hour", 0.5),
    ("lifetimes", "aws-v100"),
    ("interruption_band", ">20%"),
    ("spot_scenario", "optimistic"),
    ("fallback_after_s", 900.0),
    ("move_region", "us-central1"),
]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        *_SPOT_ONLY,
        ("spot_kind", "preemptible"),
        ("lifetime_method", "km"),
        ("replace", False),
        ("elastic", True),
    ],
)
def test_simulate_on_demand_refuses_spot_only_options(name: str, value: Any) -> None:
    extra = {"strategy": "allreduce"} if name == "elastic" else {}
    with pytest.raises(InvalidSpecError, match=r"(on demand|cloud regions) .*add --spot"):
        SimulateTrainRequest(**_SIM, **extra, spot=False, **{name: value})  # type: ignore[arg-type]
    SimulateTrainRequest(**_SIM, **extra, spot=True, **{name: value})  # type: ignore[arg-type]


@pytest.mark.parametrize(("name", "value"), [*_SPOT_ONLY, ("elastic", True)])
def test_plan_train_without_spot_refuses_spot_only_options(name: str, value: Any) -> None:
    if name == "move_region":
        value = "auto"
    with pytest.raises(InvalidSpecError, match=r"on demand only \(--no-spot\).*drop --no-spot"):
        TrainRequest(workload="resnet50", epochs=5, allow_spot=False, **{name: value})
    TrainRequest(workload="resnet50", epochs=5, allow_spot=True, **{name: value})


@pytest.mark.parametrize(("name", "value"), [*_SPOT_ONLY[:4], ("checkpoint_storage", "ebs-io2")])
def test_plan_llm_train_without_spot_refuses_spot_only_options(name: str, value: Any) -> None:
    with pytest.raises(InvalidSpecError, match=r"spot rows need --spot.*add --spot"):
        PlanLlmTrainRequest(**_LLM, **{name: value})  # type: ignore[arg-type]
    PlanLlmTrainRequest(**_LLM, allow_spot=True, **{name: value})  # type: ignore[arg-type]


def test_defaults_and_spot_jobs_are_untouched() -> None:
    """The defaults (nothing given) pass on demand; the on-demand job itself still runs."""
    SimulateTrainRequest(**_SIM, spot=False)  # type: ignore[arg-type]
    TrainRequest(workload="resnet50", epochs=5, allow_spot=False)
    PlanLlmTrainRequest(**_LLM)  # type: ignore[arg-type]
    result = gpucast.simulate_train(**_SIM, spot=False, speed="2", runs=5)  # type: ignore[arg-type]
    assert result.to_dict()["revocations"]["mean"] == 0


def test_cli_names_the_flag_and_exits_2() -> None:
    out = CliRunner().invoke(
        app,
        ["plan", "train", "--workload", "resnet50", "--epochs", "5", "--on-demand",
         "--move-region", "auto", "--fallback-after", "15m"],
    )  # fmt: skip
    assert out.exit_code == 2, out.output
    lines = [ln for ln in out.output.splitlines() if ln.strip()]
    assert len(lines) == 1
    assert "fallback-after: shapes spot servers only" in lines[0]
    assert "(got '15 min'); drop --no-spot, or drop --fallback-after" in lines[0]
    sim = CliRunner().invoke(
        app,
        ["simulate", "train", "--gpu", "V100", "--workers", "2", "--region", "us-east1",
         "--workload", "mlp", "--steps", "100", "--hazard-per-hour", "0.5"],
    )  # fmt: skip
    assert sim.exit_code == 2, sim.output
    assert "hazard-per-hour: shapes spot servers only, and this job runs on demand" in sim.output


def test_the_unused_revocation_notice_is_said() -> None:
    """QA 41 QS #2: `catalog spot` lists each provider's notice (AWS 120 s) and billing
    increment, which the Monte Carlo never uses; a spot result now says so, on demand not."""
    spot = gpucast.simulate_train(**_SIM, spot=True, speed="2", runs=5, hazard_per_hour=0.1)  # type: ignore[arg-type]
    (notice,) = [a for a in spot.assumptions if a.name == "revocation notice"]
    assert notice.value.startswith("not used: a revocation loses the work since the last")
    assert "aws 120 s" in notice.value and "gcp 30 s" in notice.value
    assert "billed per second held" in notice.value
    demand = gpucast.simulate_train(**_SIM, spot=False, speed="2", runs=5)  # type: ignore[arg-type]
    assert not any(a.name == "revocation notice" for a in demand.assumptions)


def test_a_given_checkpoint_interval_says_what_it_costs() -> None:
    """QA 41 QS #3: a 3 s checkpoint every second of training nearly quadrupled the job, on
    demand too, without a word; the note gives the share and the way out."""
    kw = dict(_SIM, spot=True, speed="2", runs=5, hazard_per_hour=0.5, steps=4000)
    dense = gpucast.simulate_train(**kw, checkpoint_every="1s", checkpoint_s=3.0)  # type: ignore[arg-type]
    (note,) = [n for n in dense.notes if "adds" in n and "to the training time" in n]
    assert note.startswith("the given checkpoint interval applies to the on-demand runs too")
    assert "adds 300% to the training time; drop --checkpoint-every" in note
    sparse = gpucast.simulate_train(**kw, checkpoint_every=1000, checkpoint_s=3.0)  # type: ignore[arg-type]
    (note,) = [n for n in sparse.notes if "to the training time" in n]
    assert note.endswith("adds 1% to the training time")
    # the on-demand runs do take the given checkpoints: slower than without them
    plain = gpucast.simulate_train(**kw)  # type: ignore[arg-type]
    assert not any("to the training time" in n for n in plain.notes)
    od = [r.to_dict()["on_demand"]["duration_s"]["median"] for r in (dense, plain)]
    assert od[0] > 3.0 * od[1]


def test_a_cluster_without_a_spot_price_names_itself_not_no_spot() -> None:
    """A --cluster with no spot price plans on demand; a spot-only option beside it is refused
    in the cluster's words (not as if --no-spot had been given), and with a spot price taken."""
    with pytest.raises(InvalidSpecError, match=r"the cluster DGX-H100 has no spot price"):
        gpucast.plan_train(workload="resnet50", epochs=5, cluster="DGX-H100", hazard_per_hour=0.3)
    out = CliRunner().invoke(
        app,
        ["plan", "train", "--workload", "mlp", "--epochs", "1", "--dataset-size", "20000",
         "--cluster", "DGX-H100", "--elastic", "--strategy", "ddp"],
    )  # fmt: skip
    assert out.exit_code == 2, out.output
    assert "elastic: shapes spot servers only, and the cluster DGX-H100" in out.output
    assert "--no-spot" not in out.output


def test_an_on_demand_plan_lists_no_spot_assumptions() -> None:
    """QA 41 QS (left open, then fixed): `plan train --no-spot` listed spot lifetimes, managed
    recovery, the checkpoint and the Monte Carlo among its assumptions, none of them used."""
    spot_only = {"restart penalty", "checkpoint", "revocation notice", "DDP/FSDP on spot",
                 "spot lifetimes", "managed recovery", "spot simulation"}  # fmt: skip
    base = dict(workload="resnet50", epochs=1, max_gpus=8, provider="gcp")
    on_demand = {a.name for a in gpucast.plan_train(**base, allow_spot=False).assumptions}
    assert not on_demand & spot_only and {"start-up", "risk", "parameter server"} <= on_demand
    spot = {a.name for a in gpucast.plan_train(**base).assumptions}
    assert spot_only <= spot
