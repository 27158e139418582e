"""simulate train --elastic: a synchronous job on spot servers that goes on with the ready
workers (re-planning its batch) instead of waiting for replacements."""

from __future__ import annotations

from typing import Any

import pytest

import gpucast
from gpucast.domain.errors import InvalidInputError

SIM: dict[str, Any] = {
    "gpu": "K80", "workers": 8, "region": "us-east1", "provider": "gcp", "spot": True,
    "replace": True, "workload": "mlp", "strategy": "allreduce", "batch_size": 32,
    "steps": 20_000, "runs": 200, "speed": "2.0", "hazard_per_hour": 2.0,
}  # fmt: skip


def test_elastic_finishes_sooner_and_cheaper_than_waiting() -> None:
    wait = gpucast.simulate_train(**SIM)
    el = gpucast.simulate_train(**SIM, elastic=True)
    assert el.transient.duration_s.mean() < 0.9 * wait.transient.duration_s.mean()
    assert el.transient.cost_usd.mean() < wait.transient.cost_usd.mean()
    # on demand nothing is revoked: the same job, but the elastic one checkpoints less often
    # (Young's interval from one node's hazard: no node's loss rolls it back)
    assert el.on_demand.duration_s.mean() <= wait.on_demand.duration_s.mean()
    assert el.on_demand.duration_s.mean() == pytest.approx(
        wait.on_demand.duration_s.mean(), rel=0.1
    )
    note = next(n for n in el.notes if n.startswith("--elastic re-plans"))
    assert "7 GPUs:" in note and "of the full cluster's progress" in note
    said = {a.name: a for a in el.assumptions}
    assert "elastic batch" in said and "statistical efficiency" in str(
        [a.name for a in el.assumptions]
    )
    assert any("costs 100 s" in n for n in el.notes)  # the restart penalty by default
    # QA 39 K #13: what rolls an elastic job back, and the hazard its interval rests on
    assert any("unless every node is down at once (back to the last checkpoint)" in n
               for n in el.notes)  # fmt: skip
    (young,) = [n for n in el.notes if n.startswith("checkpoint every")]
    assert "at one node's hazard (an elastic job rolls back only when every node" in young
    assert not any("one node's hazard" in n for n in wait.notes)
    slow = gpucast.simulate_train(**SIM, elastic=True, reshard_s=600.0)
    assert slow.transient.duration_s.mean() > el.transient.duration_s.mean()


def test_a_fixed_learning_rate_makes_the_re_planned_batches_cost_more() -> None:
    kw = {**SIM, "workload": "resnet50", "batch_size": 64, "elastic": True, "runs": 50}
    runs = {r: gpucast.simulate_train(**kw, lr_rule=r) for r in (None, "linear", "fixed")}
    # the planned batch is where the step was tuned: the same steps to target there
    assert len({r.scenario.steps for r in runs.values()}) == 1

    def note(r: Any) -> str:
        return str(next(n for n in r.notes if n.startswith("--elastic re-plans")))

    # 4 K80s keep 64 per GPU (global 256 of the planned 512): a tuned or linear-scaled step
    # gains a little statistical efficiency, a fixed one (twice the tuned step) loses
    assert "4 GPUs: 64 per GPU (global 256, statistical efficiency x1.01)" in note(runs[None])
    assert "(global 256, statistical efficiency x1.01)" in note(runs["linear"])
    assert "(global 256, statistical efficiency x0.81)" in note(runs["fixed"])
    assert runs["fixed"].transient.duration_s.mean() >= runs[None].transient.duration_s.mean()
    (said,) = [a for a in runs["fixed"].assumptions if a.name.startswith("learning rate")]
    assert "fixed rule from the step tuned at global batch 512" in said.value


def test_a_mixed_cluster_splits_the_global_batch_in_proportion_to_speed() -> None:
    kw = {**SIM, "gpu": "V100:4,K80:4", "workload": "resnet50", "batch_size": 64, "runs": 30}
    kw.pop("workers")
    kw.pop("speed")
    equal = gpucast.simulate_train(**kw)
    el = gpucast.simulate_train(**kw, elastic=True)
    note = next(n for n in el.notes if n.startswith("--elastic re-plans"))
    assert "all 8 GPUs: per-GPU batches in proportion to speed (V100 " in note
    shares = note.split("(V100 ")[1].split(";")[0]  # "108, K80 20"
    fast, slow = int(shares.split(",")[0]), int(shares.split("K80 ")[1])
    assert fast > 64 > slow and 4 * fast + 4 * slow == 512
    # on demand nothing is revoked: the whole gain is the balanced step (not waiting on K80s)
    assert el.on_demand.duration_s.mean() < 0.9 * equal.on_demand.duration_s.mean()
    assert "7 GPUs: global batch 512 kept (V100 " in note


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"elastic": True, "strategy": "ps-async"}, r"elastic: re-plans a synchronous job"),
        ({"reshard_s": 30.0}, r"reshard-s: only applies to --elastic"),
        ({"elastic": True, "reshard_s": -1.0}, r"reshard-s: must be a finite number"),
        ({"elastic": True, "batch_size": 0}, r"batch-size: must be >= 1"),
        ({"lr_rule": "linear"}, r"lr-rule: only applies to --elastic"),
        ({"elastic": True, "lr_rule": "cubic"}, r"lr-rule: must be one of auto, tuned"),
    ],
)
def test_bad_elastic_input_is_one_line(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        gpucast.simulate_train(**{**SIM, **changes})


def test_a_cluster_slower_than_fewer_of_its_gpus_is_said_so() -> None:
    """QA 37 FO#10: 4 x V100 DDP over the default network printed "1 GPU: ... 109% of the full
    cluster's progress" and nothing else; the numbers stay, and the note now says the cluster
    is slower than one GPU and what to change. A cluster that scales says nothing of it."""
    slow = gpucast.simulate_train(
        gpu="V100", workers=4, region="us-east1", workload="resnet50", strategy="allreduce",
        spot=True, elastic=True, steps=2000, runs=20, hazard_per_hour=2.0,
    )  # fmt: skip
    note = next(n for n in slow.notes if n.startswith("--elastic re-plans"))
    one = note.split("1 GPU: ")[1].split(";")[0]
    share = int(one.split("% of the full cluster's progress")[0].rsplit(" ", 1)[1])
    assert share > 100 and "(more than all 4 make)" in one
    assert note.endswith(
        "The full cluster is slower than 1 GPU: its synchronisation costs more than its other "
        "GPUs add; run fewer GPUs, or give it a faster network"
    )
    big = {"workload": "resnet50", "batch_size": 64, "speed": None, "runs": 20}
    scales = gpucast.simulate_train(**{**SIM, **big}, elastic=True)
    said = next(n for n in scales.notes if n.startswith("--elastic re-plans"))
    assert "slower than" not in said and "more than all" not in said
