"""plan llm-train with a fixed layout (``--tp --pp --cp --vpp --micro-batch --zero
--recompute``, predict llm-train's flags): every row has it, the shapes it cannot take are left
out and counted, and a plan with nothing left is one error naming the flag to drop."""

from __future__ import annotations

import dataclasses
import re

import pytest

import gpucast
from gpucast.app.llm import PredictLlmTrainRequest
from gpucast.app.llm_plan import PlanLlmTrainRequest
from gpucast.domain.errors import InvalidSpecError, NoFeasiblePlanError
from gpucast.domain.options import META_KEY

JOB = {"model": "llama-2-7b", "tokens": 1e10, "seq_len": 2048, "global_batch": 256,
       "max_gpus": 16}  # fmt: skip


def test_every_row_of_a_plan_with_tp_8_pp_1_has_that_layout() -> None:
    gpus = ["H100", "T4", "A10G"]  # fp16: the T4 has no bf16 units
    fixed = gpucast.plan_llm_train(**JOB, gpu=gpus, tp=8, pp=1, precision="fp16")
    free = gpucast.plan_llm_train(**JOB, gpu=gpus, precision="fp16")
    assert fixed.candidates
    assert all(" tp=8 pp=1 " in f" {c.layout} " for c in fixed.candidates)
    # the free search may pick any layout, so fixing one can only slow a shape down
    free_rows = {(c.instance_type, c.nodes): c for c in free.candidates}
    for c in fixed.candidates:
        assert c.step_time_s >= free_rows[c.instance_type, c.nodes].step_time_s * (1 - 1e-9)
    # T4 comes in 1- and 4-GPU nodes alone; A10G in 1-, 4- and 8-GPU ones
    assert fixed.left_out == (
        "tp=8 needs 8 GPUs per node: 1 GPU type left out (T4), and some nodes or GPU "
        "counts of 1 more (A10G)",
    )
    assert {c.gpu for c in fixed.candidates} == {"H100-SXM", "A10G"}
    assert fixed.assumptions["layouts"] == (
        "tp=8, pp=1 fixed (--tp, --pp); the rest searched; " + fixed.left_out[0]
    )
    assert fixed.assumptions["layout search"].startswith("dp over each GPU count at tp 8, pp 1,")
    assert fixed.to_dict()["left_out"] == list(fixed.left_out)
    assert free.left_out == () and free.assumptions["layouts"].startswith("all searched (--tp")


def test_the_searched_choices_a_user_fixes_bound_every_row() -> None:
    plan = gpucast.plan_llm_train(
        **JOB, gpu=["H100"], micro_batch=1, zero=2, recompute="full", vpp=2
    )
    for c in plan.candidates:
        assert "mb=1x" in c.layout and "recompute=full" in c.layout
        assert "zero=2" in c.layout or c.layout.startswith("dp=1 ")  # ZeRO shards over dp
        assert "vpp=2" in c.layout and " pp=1 " not in c.layout  # interleaving needs stages
    assert plan.assumptions["layouts"] == (
        "vpp=2, micro-batch=1, zero=2, recompute=full fixed (--vpp, --micro-batch, --zero, "
        "--recompute); the rest searched; --zero 2 shards over the dp x cp ranks: a layout of "
        "dp x cp = 1 has nothing to shard and runs (and is priced) as ZeRO-0"
    )
    search = plan.assumptions["layout search"]
    assert "micro-batch 1, ZeRO-2, full recompute, cp 1/2, vpp 2" in search


@pytest.mark.parametrize(
    ("bad", "says"),
    [({"zero": 3, "pp": 2}, "ZeRO-3 with pp=2 is not planned"),
     ({"zero": 3, "vpp": 2}, "ZeRO-3 with vpp=2 (pp > 1) is not planned")],
)  # fmt: skip
def test_zero_3_with_pipeline_stages_is_refused_by_both_verbs(
    bad: dict[str, int], says: str
) -> None:
    """QA 37 FO#4: ZeRO-3 with pp > 1 was planned although DeepSpeed's pipeline engine refuses
    it; given, both verbs refuse it in one line with the fix."""
    with pytest.raises(InvalidSpecError, match=re.escape(says)) as predict:
        gpucast.predict_llm_train(model="llama-2-7b", gpu="H100", global_batch=8, **bad)
    with pytest.raises(InvalidSpecError) as plan:
        gpucast.plan_llm_train(model="llama-2-7b", tokens=1e9, global_batch=8, **bad)
    assert str(plan.value) == str(predict.value) and "use --zero 1, or --pp 1" in str(plan.value)


def test_the_search_leaves_zero_3_out_of_pipelines_and_says_so() -> None:
    plan = gpucast.plan_llm_train(**JOB, gpu=["H100"], zero=3)
    assert plan.candidates
    for c in plan.candidates:
        assert "zero=3" not in c.layout or " pp=1 " in c.layout, c.layout
    assert "ZeRO-3 only at pp=1: DeepSpeed" in plan.assumptions["layout search"]
    best = gpucast.predict_llm_train(model="llama-2-7b", gpu="H100", gpus=16, global_batch=64,
                                     zero=3, top=20)  # fmt: skip
    for p in (best.best, *best.alternatives):
        assert p.layout.zero_stage < 3 or p.layout.pp == 1, p.layout
    assert "ZeRO-3 only at pp=1" in best.assumptions["ZeRO and pipelines"]


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (
            {"gpu": ["T4"], "tp": 8, "precision": "fp16"},
            "tp=8 needs 8 GPUs per node; drop --tp to search it",
        ),
        ({"tp": 64}, "tp=64 does not divide the 32 attention heads; drop --tp to search it"),
        ({"pp": 1, "vpp": 2}, "drop --pp/--vpp to search them"),
        ({"micro_batch": 3}, "divides no data-parallel replica's share of the 256 sequences"),
    ],
)
def test_a_fixed_layout_no_offer_takes_is_one_error_naming_the_flag(
    options: dict[str, object], named: str
) -> None:
    # the flag at fault first, as predict llm-train's error and every input error (QA 39)
    flag = next(k for k in ("tp", "pp", "micro_batch") if k in options).replace("_", "-")
    with pytest.raises(NoFeasiblePlanError, match=f"^{flag}: no offer of up to 16 GPUs") as err:
        gpucast.plan_llm_train(**JOB, **options)
    assert named in str(err.value) and "\n" not in str(err.value)


def test_a_fixed_layout_that_fits_nowhere_names_every_fixed_flag() -> None:
    """Shapes that take the layout but where it does not fit: the search's reason, and the
    fixed flags to drop."""
    with pytest.raises(NoFeasiblePlanError, match="does not fit") as err:
        gpucast.plan_llm_train(
            model="llama-2-70b", tokens=1e10, seq_len=4096, global_batch=64, max_gpus=16,
            gpu=["H100"], tp=1, pp=1, recompute="none",
        )  # fmt: skip
    assert str(err.value).endswith("drop --tp/--pp/--recompute to search them")


@pytest.mark.parametrize(
    "bad",
    [{"tp": 0}, {"pp": -1}, {"cp": True}, {"vpp": 0}, {"micro_batch": 0}, {"zero": 4},
     {"recompute": "most"}],
)  # fmt: skip
def test_both_verbs_check_the_layout_flags_alike(bad: dict[str, object]) -> None:
    with pytest.raises(InvalidSpecError) as predict:
        gpucast.predict_llm_train(model="llama-2-7b", gpu="H100", global_batch=8, **bad)
    with pytest.raises(InvalidSpecError) as plan:
        gpucast.plan_llm_train(model="llama-2-7b", tokens=1e9, global_batch=8, **bad)
    assert str(plan.value) == str(predict.value)


def test_tp_and_pp_are_one_definition_for_both_verbs() -> None:
    def helps(request: type) -> dict[str, str]:
        return {
            f.name: f.metadata[META_KEY].help
            for f in dataclasses.fields(request)
            if f.name in ("tp", "pp")
        }

    assert helps(PlanLlmTrainRequest) == helps(PredictLlmTrainRequest)


def test_llm_training_refuses_tensorflow_1_in_both_verbs() -> None:
    """QA 37 FO#5: Megatron-style layouts were predicted under ``--software tf1``."""
    with pytest.raises(InvalidSpecError, match="PyTorch family only") as predict:
        gpucast.predict_llm_train(model="llama-2-7b", gpu="H100", global_batch=8, software="tf1")
    with pytest.raises(InvalidSpecError) as plan:
        gpucast.plan_llm_train(model="llama-2-7b", tokens=1e9, global_batch=8, software="tf1")
    assert str(plan.value) == str(predict.value) and str(plan.value).startswith("software: ")
    assert "use --software tuned" in str(plan.value)


def test_more_gpus_a_node_than_any_catalog_server_of_the_type_is_said() -> None:
    """QA 37 FO#5: ``--gpus-per-node 16`` on H100 priced one 16-GPU NVSwitch node that no
    catalog server has, silently; it is said (a server of one's own may have them: GH200 in
    8s), and a partial node (4 of 8) or the default says nothing."""
    sixteen = gpucast.predict_llm_train(
        model="llama-2-7b", gpu="H100", gpus=32, gpus_per_node=16, global_batch=64, top=0
    )
    said = sixteen.assumptions["node size"]
    assert said.startswith("warning: no H100-SXM node of the catalog") and "largest has 8" in said
    for per_node in (4, None):
        four = gpucast.predict_llm_train(
            model="llama-2-7b", gpu="H100", gpus=8, gpus_per_node=per_node, global_batch=64,
            top=0,
        )  # fmt: skip
        assert "node size" not in four.assumptions


def test_a_global_batch_past_1e8_sequences_is_refused_by_both_verbs() -> None:
    """QA 37 FO#6: 1e11 sequences a step ran (342 years a step); capped as --tokens is."""
    with pytest.raises(InvalidSpecError, match=r"global-batch: must be at most 1e\+08") as one:
        gpucast.predict_llm_train(model="llama-2-7b", gpu="H100", global_batch=10**8 + 1)
    with pytest.raises(InvalidSpecError) as plan:
        gpucast.plan_llm_train(model="llama-2-7b", tokens=1e12, global_batch=10**11)
    assert str(plan.value).split(" (got")[0] == str(one.value).split(" (got")[0]
    assert str(plan.value).endswith("e.g. --global-batch 512")
