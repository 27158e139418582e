"""predict llm-train: the fastest layout that fits, fixed choices honoured, clear refusals."""

from __future__ import annotations

import pytest

import gpucast
from gpucast.app.llm import GROWING_TERMS
from gpucast.domain.errors import InvalidSpecError, NoFeasiblePlanError


def test_the_best_layout_fits_and_beats_its_runners_up() -> None:
    result = gpucast.predict_llm_train(
        model="llama-2-7b", gpu="A100-80GB", gpus=8, seq_len=2048, global_batch=64, top=3
    )
    best = result.best
    assert best.fits and best.layout.gpus == 8 and best.layout.global_batch_size == 64
    assert all(best.step_time_s <= a.step_time_s for a in result.alternatives)
    assert 0.05 < best.mfu < 0.8
    data = result.to_dict()
    assert data["best"]["layout"] == best.layout.label()
    # units in the names, as predict train's JSON: no "unit" key, seconds in the breakdown
    assert data["best"]["step_time_s"]["value"] == best.step_time_s
    assert "step_time" not in data["best"] and "unit" not in data["best"]["step_time_s"]
    assert data["best"]["breakdown_s"] == dict(best.breakdown)
    assert sum(data["best"]["breakdown_s"].values()) == pytest.approx(best.step_time_s)
    assert "steptime.json" in data["step_time_model"] or "priors" in data["step_time_model"]


def test_fixed_choices_are_kept() -> None:
    result = gpucast.predict_llm_train(
        model="llama-2-7b", gpu="H100", gpus=8, seq_len=2048, global_batch=32, tp=2, zero=1,
        recompute="full",
    )  # fmt: skip
    for p in (result.best, *result.alternatives):
        assert p.layout.tp == 2 and p.layout.zero_stage == 1 and p.layout.recompute == "full"


def test_a_fixed_zero_stage_that_has_nothing_to_shard_says_so() -> None:
    # session 39 QA: --tp 8 --zero 2 on 8 GPUs printed zero=0 with no word of why
    result = gpucast.predict_llm_train(
        model="llama-2-7b", gpu="H100", gpus=8, seq_len=2048, global_batch=32, tp=8, zero=2, top=0
    )
    assert result.best.layout.zero_stage == 0 and result.best.layout.dp * result.best.layout.cp == 1
    assert result.assumptions["ZeRO"] == (
        "--zero 2 shards over the dp x cp ranks: a layout of dp x cp = 1 has nothing to shard "
        "and runs (and is priced) as ZeRO-0"
    )
    # a layout that shards keeps the stage and says nothing of it
    sharded = gpucast.predict_llm_train(
        model="llama-2-7b", gpu="H100", gpus=8, seq_len=2048, global_batch=32, tp=2, zero=2, top=0
    )
    assert sharded.best.layout.zero_stage == 2 and "ZeRO" not in sharded.assumptions


def test_the_mfu_assumption_says_what_model_flops_count() -> None:
    # session 39 QA: at 100K tokens llama-2-7b read MFU 15% while attention, not counted, is
    # most of the work; the assumption said only "model FLOPs / (...)"
    result = gpucast.predict_llm_train(
        model="llama-2-7b", gpu="H100", gpus=8, seq_len=2048, global_batch=32, top=0
    )
    best = result.best
    n_mm = best.model_flops_per_step / (6 * best.tokens_per_step)
    assert 6.0e9 < n_mm < 6.8e9  # 6 N T, N the matmul parameters (6.74e9 less the embedding)
    assert result.assumptions["MFU"].startswith(
        "model FLOPs (6 x the matmul parameters a token passes through x tokens, 4 x with LoRA; "
        "attention and recomputation not counted) / (step time x GPUs x each GPU's bf16 dense "
        "peak)"
    )


def test_interleaved_stages_and_context_parallel_are_searched_unless_fixed() -> None:
    common = {"model": "llama-2-70b", "gpu": "H100", "gpus": 64, "seq_len": 4096, "top": 40}
    searched = gpucast.predict_llm_train(**common, global_batch=64)
    layouts = [p.layout for p in (searched.best, *searched.alternatives)]
    assert {lay.cp for lay in layouts} == {1, 2}  # both context-parallel sizes tried
    assert any(lay.virtual_stages > 1 for lay in layouts if lay.pp > 1)  # interleaving tried
    flat = gpucast.predict_llm_train(**common, global_batch=64, cp=1, vpp=1)
    assert all(
        p.layout.cp == 1 and p.layout.virtual_stages == 1 for p in (flat.best, *flat.alternatives)
    )
    # a wider search can only find the same step or a faster one
    assert searched.best.step_time_s <= flat.best.step_time_s


def test_a_layout_fixed_by_flags_that_does_not_fit_is_the_one_named() -> None:
    with pytest.raises(NoFeasiblePlanError, match="does not fit") as err:
        gpucast.predict_llm_train(
            model="llama-2-70b", gpu="H100", gpus=8, global_batch=64, tp=1, pp=1, zero=0,
            recompute="none",
        )  # fmt: skip
    # the smallest layout the flags allow, not one at tp=8 the user ruled out
    assert "tp=1, pp=1" in str(err.value) and "no recompute" in str(err.value)


def test_lora_fits_where_full_fine_tuning_does_not() -> None:
    with pytest.raises(NoFeasiblePlanError, match="does not fit"):
        gpucast.predict_llm_train(
            model="llama-2-70b", gpu="H100", gpus=8, seq_len=4096, global_batch=8, zero=0,
            recompute="none",
        )  # fmt: skip
    lora = gpucast.predict_llm_train(
        model="llama-2-70b", gpu="H100", gpus=8, seq_len=4096, global_batch=8, lora_rank=16
    )
    assert lora.best.fits


def test_tensor_parallel_overlap_is_a_stated_choice_that_favours_wider_tp() -> None:
    # NVIDIA's MLPerf v4.0 Llama-2-70B LoRA on 8 x H100 ran TP 4 with TP comm overlap; with
    # the traffic exposed (Megatron's default) the search prefers a narrower TP
    common = {
        "model": "llama-2-70b", "gpu": "H100", "gpus": 8, "seq_len": 8192, "global_batch": 8,
        "lora_rank": 16, "precision": "fp8",
    }  # fmt: skip
    exposed = gpucast.predict_llm_train(**common)
    hidden = gpucast.predict_llm_train(**common, tp_overlap=0.8)
    assert "Megatron's default" in exposed.assumptions["tensor-parallel overlap"]
    assert hidden.assumptions["tensor-parallel overlap"].startswith("80%")
    assert hidden.best.step_time_s < exposed.best.step_time_s
    assert hidden.best.layout.tp > exposed.best.layout.tp
    plan = gpucast.plan_llm_train(
        model="llama-2-70b", tokens=1e9, seq_len=8192, global_batch=8, lora_rank=16,
        precision="fp8", gpus=("H100-SXM",), max_gpus=8, tp_overlap=0.8,
    )  # fmt: skip
    assert plan.assumptions["tensor-parallel overlap"].startswith("80%")
    # context parallelism and interleaved stages, fixed for every layout of the plan
    long = gpucast.plan_llm_train(
        model="llama-2-70b", tokens=1e9, seq_len=8192, global_batch=8, lora_rank=16,
        precision="fp8", gpus=("H100-SXM",), max_gpus=16, cp=2, vpp=8,
    )  # fmt: skip
    assert all("cp=2" in c.layout and "vpp=8" in c.layout for c in long.candidates)
    assert "cp 2, vpp 8" in long.assumptions["layout search"]
    with pytest.raises(InvalidSpecError, match="tp-overlap"):
        gpucast.plan_llm_train(model="llama-2-70b", tokens=1e9, global_batch=8, tp_overlap=2.0)


def test_the_host_paces_the_micro_batches_by_default_and_cuda_graphs_are_a_stated_choice() -> None:
    # NVIDIA's v4.0 LoRA on 64 x H100 (tp4 cp2, one micro-batch of 8,192 tokens): ~0.64 s a
    # step, which its GPUs alone would take far less for; the fitted host time says so, and
    # --host-ms-per-layer 0 (CUDA graphs) or a given time replace it
    from gpucast.catalog.steptime import shipped_step_time_model

    shipped = shipped_step_time_model()
    assert shipped is not None and 0.004 < shipped.host_layer_s_ < 0.012
    common = {
        "model": "llama-2-70b", "gpu": "H100", "gpus": 64, "seq_len": 8192, "global_batch": 8,
        "lora_rank": 16, "precision": "fp8", "tp": 4, "cp": 2, "pp": 1, "micro_batch": 1,
    }  # fmt: skip
    fitted = gpucast.predict_llm_train(**common)
    ahead = gpucast.predict_llm_train(**common, host_ms_per_layer=0)
    paced = gpucast.predict_llm_train(**common, host_ms_per_layer=8)
    assert "default, fitted: MLPerf Training v4.0 llama2_70b_lora" in fitted.assumptions["host"]
    assert (
        "--host-ms-per-layer 0 where the run captures CUDA graphs" in (fitted.assumptions["host"])
    )
    assert fitted.best.step_time_s >= 80 * shipped.host_layer_s_ - 1e-9
    assert fitted.best.step_time.breakdown["host_wait"] > 0
    assert ahead.assumptions["host"] == "keeps ahead of the GPUs, as with CUDA graphs (given)"
    assert paced.assumptions["host"].startswith("8 ms per layer")
    assert ahead.best.step_time.breakdown["host_wait"] == 0.0
    assert paced.best.step_time_s > ahead.best.step_time_s
    assert paced.best.step_time_s >= 80 * 0.008 - 1e-9  # 80 layers on every GPU (pp 1)
    plan = gpucast.plan_llm_train(
        model="llama-2-7b", tokens=1e9, global_batch=8, gpus=("H100-SXM",), max_gpus=8,
        host_ms_per_layer=8,
    )  # fmt: skip
    assert plan.assumptions["host"].startswith("8 ms per layer")


def test_a_plan_pays_the_fitted_warm_up_once_unless_cuda_graphs_run() -> None:
    # without CUDA graphs (the default host pacing) a run warms up after its clock starts:
    # the fitted seconds once per job, said in the plan; with them (--host-ms-per-layer 0)
    # the capture and warm-up come before the clock, as MLPerf's GPT-3 logs show
    from gpucast.catalog.steptime import shipped_step_time_model

    shipped = shipped_step_time_model()
    assert shipped is not None and 10.0 < shipped.warmup_s_ < 60.0
    options = {
        "model": "llama-2-7b", "tokens": 1e9, "global_batch": 8, "gpus": ("H100-SXM",),
        "max_gpus": 8,
    }  # fmt: skip
    paced = gpucast.plan_llm_train(**options, host_ms_per_layer=8)
    graphs = gpucast.plan_llm_train(**options, host_ms_per_layer=0)
    assert f"{shipped.warmup_s_:.1f} s once per run" in paced.assumptions["warm-up"]
    assert graphs.assumptions["warm-up"].startswith("none after the clock starts")
    for row in paced.candidates:
        steps = -(-1e9 // (8 * 4096))
        assert row.time_s == pytest.approx(shipped.warmup_s_ + steps * row.step_time_s)
    for row in graphs.candidates:
        assert row.time_s == pytest.approx(-(-1e9 // (8 * 4096)) * row.step_time_s)


def test_fp8_needs_fp8_tensor_cores() -> None:
    # an A100 has none: predict refuses it, naming the GPUs that do; a plan over both kinds
    # skips the A100s (as plan train does) and says how many
    with pytest.raises(InvalidSpecError, match=r"fp8 tensor cores.*A100-80GB") as info:
        gpucast.predict_llm_train(
            model="llama-3-8b", gpu="A100-80GB", gpus=8, global_batch=64, precision="fp8"
        )
    assert "H100-SXM" in (info.value.fix or "")
    plan = gpucast.plan_llm_train(
        model="llama-3-8b", tokens=2e10, global_batch=512, max_gpus=16, precision="fp8",
        gpus=("A100-80GB", "H100-SXM"),
    )  # fmt: skip
    assert plan.candidates and {c.gpu for c in plan.candidates} == {"H100-SXM"}
    assert all(c.layout.endswith(" fp8") for c in plan.candidates)
    assert plan.assumptions["fp8 GPUs"].startswith(
        "1 GPU type without fp8 units skipped: A100-80GB"
    )
    plain = gpucast.plan_llm_train(
        model="llama-3-8b", tokens=2e10, global_batch=512, max_gpus=16, gpus=("H100-SXM",)
    )
    assert "precision" not in plain.assumptions


def test_a_sequence_beyond_the_context_is_a_stated_extension() -> None:
    # MLPerf's Llama-2-70B LoRA trains at 8,192 tokens on a 4,096-token model
    result = gpucast.predict_llm_train(
        model="llama-2-70b", gpu="H100", gpus=8, seq_len=8192, global_batch=8, lora_rank=16,
        precision="fp8",
    )  # fmt: skip
    assert result.best.seq_len == 8192 and result.best.fits
    assert "context extension" in result.assumptions["sequence length"]
    assert "1 B in fp8" in result.assumptions["LoRA"]  # the frozen base as it is held


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"gpus": 12, "gpus_per_node": 8}, "gpus"),
        ({"seq_len": 0}, "seq-len"),
        ({"zero": 4}, "zero"),
        ({"precision": "int4"}, "precision"),
        ({"recompute": "most"}, "recompute"),
        ({"vpp": 0}, "vpp"),
        ({"tp_overlap": 1.5}, "tp-overlap"),
        ({"tp_overlap": float("nan")}, "tp-overlap"),
        ({"host_ms_per_layer": -1.0}, "host-ms-per-layer"),
        ({"host_ms_per_layer": float("inf")}, "host-ms-per-layer"),
        ({"top": -1}, "top"),
    ],
)
def test_bad_requests_name_the_field(options: dict[str, object], field: str) -> None:
    base = {"model": "llama-2-7b", "gpu": "H100", "gpus": 8, "global_batch": 8}
    with pytest.raises(InvalidSpecError, match=field):
        gpucast.predict_llm_train(**(base | options))


def test_plan_llm_train_picks_the_cheapest_row_in_time() -> None:
    plan = gpucast.plan_llm_train(
        model="llama-2-7b", tokens=1e10, seq_len=2048, global_batch=256, gpu=["H100"],
        max_gpus=32, deadline="30d",
    )  # fmt: skip
    assert plan.best is not None and plan.best.meets_deadline
    assert plan.best.cost_usd == min(c.cost_usd for c in plan.candidates if c.meets_deadline)
    assert plan.recommended in plan.pareto or plan.best.meets_deadline
    frame = plan.to_frame()
    assert len(frame) == len(plan.candidates) and "layout" in frame.columns
    # every row carries the tuned stack's 80% band of its time
    from gpucast.catalog.llm import load_llm_train_intervals
    from gpucast.inputs.mlperf_llm import TUNED

    low, high = load_llm_train_intervals()[0].ratios(TUNED)
    for c in plan.candidates:
        assert c.time_low_s == pytest.approx(c.time_s * min(low, 1.0))
        assert c.time_high_s == pytest.approx(c.time_s * high)
    assert "MLPerf LLM systems" in plan.assumptions["time interval"]
    # the safe row: the cheapest that meets the deadline even at its slow edge
    deadline = 30 * 86400
    held = [c for c in plan.candidates if c.time_high_s <= deadline]
    assert all(c.holds_at_slow_edge == (c in held) for c in plan.candidates)
    assert plan.safe is not None and plan.candidates[plan.safe] in held
    assert plan.candidates[plan.safe].cost_usd == min(c.cost_usd for c in held)
    assert plan.to_dict()["safe"] == plan.safe


def test_a_tight_deadline_is_judged_by_p_meet_as_plan_train_judges_it() -> None:
    """QA2 #4: a deadline between a row's point and its slow edge: plan train refuses such
    on-demand plans below --min-p-meet (0.9), and so does plan llm-train now, naming the
    deadline the fastest row meets; with --min-p-meet 0.5 (the central value alone) it is
    picked, but not safe."""
    job = dict(model="llama-2-7b", tokens=1e10, seq_len=2048, global_batch=256, gpu=["H100"],
               max_gpus=32)  # fmt: skip
    loose = gpucast.plan_llm_train(**job)
    fastest = min(loose.candidates, key=lambda c: c.time_s)
    deadline = 1.01 * fastest.time_s  # only the fastest rows meet it, none at the slow edge
    with pytest.raises(NoFeasiblePlanError, match=r"P\(meet\) 5\d%: relax --deadline to at") as e:
        gpucast.plan_llm_train(**job, deadline=f"{deadline:.0f}s")
    assert "(P(meet) >= 0.9 from its interval), lower --min-p-meet" in str(e.value)
    tight = gpucast.plan_llm_train(**job, deadline=f"{deadline:.0f}s", min_p_meet=0.5)
    assert tight.best is not None and tight.best.meets_deadline
    assert tight.best.p_meet_deadline is not None and 0.5 <= tight.best.p_meet_deadline < 0.6
    assert not tight.best.holds_at_slow_edge and tight.safe is None
    # at the slow edge of its interval (its 90th percentile) the row meets the deadline
    # with P 0.9: picked at the default --min-p-meet, as plan train's P(meet) reads it
    edge = gpucast.plan_llm_train(**job, deadline=f"{fastest.time_high_s * 1.001:.0f}s")
    assert edge.best is not None and edge.best.p_meet_deadline >= 0.9
    for c in edge.candidates:  # one rule: central time on time and P(meet) >= 0.9
        assert c.meets_deadline == (c.time_s <= fastest.time_high_s * 1.001
                                    and c.p_meet_deadline >= 0.9)  # fmt: skip
    with pytest.raises(InvalidSpecError, match="tokens"):
        gpucast.plan_llm_train(model="llama-2-7b", tokens=-1, global_batch=8)


def test_the_result_states_its_band_and_the_validated_error_of_its_regime() -> None:
    """H100 at 64 GPUs is where MLPerf's LLM systems were measured (validation.csv's
    llm-train row); an A100-40GB is not, and says so. The step carries its 80% band."""
    common = {"model": "llama-2-7b", "seq_len": 2048, "global_batch": 64, "gpus": 8}
    h100 = gpucast.predict_llm_train(**common, gpu="H100")
    a100 = gpucast.predict_llm_train(**common, gpu="A100-40GB")
    assert h100.validation.validated and "llama2_70b_lora" in (h100.validation.error or "")
    assert not a100.validation.validated and "validated only for" in a100.validation.regime
    step = h100.best.step_time
    assert step.lower <= step.value < step.upper  # the band may start at the point
    assert h100.to_dict()["validation"]["validated"] is True


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"pp": 16, "vpp": 6}, "vpp=6"),  # 16 stages x 6 chunks: more than the 80 layers
        ({"pp": 1, "vpp": 2}, "drop --pp/--vpp"),  # interleaving needs stages
        # the choice that breaks a rule on its own is named with that rule
        ({"cp": 3}, "tp x pp x cp = 3 does not divide the 16 GPUs"),
        ({"tp": 16}, "tp=16 is more than the 8 GPUs of a node"),
        ({"tp": 16, "pp": 1}, "tp=16 is more than the 8 GPUs of a node"),
        ({"micro_batch": 3}, "micro-batch 3 divides no data-parallel replica's share"),
    ],
)
def test_a_fixed_choice_no_layout_can_take_is_named_with_its_rule(
    options: dict[str, int], named: str
) -> None:
    with pytest.raises(NoFeasiblePlanError, match="no layout of 16 GPUs") as err:
        gpucast.predict_llm_train(
            model="llama-2-70b", gpu="H100", gpus=16, seq_len=4096, global_batch=64, **options
        )
    assert named in str(err.value)


def test_a_gpu_count_no_layout_takes_starts_with_its_field() -> None:
    """--gpus 1000000000 read "no layout of 1000000000 GPUs ...; try another --gpus" with no
    field first (session 37 QA); every input error starts with its field (QA 34 #15)."""
    with pytest.raises(NoFeasiblePlanError, match=r"^gpus: no layout of 1,000,000,000 GPUs"):
        gpucast.predict_llm_train(
            model="llama-2-70b", gpu="H100", gpus=10**9, seq_len=4096, global_batch=512
        )


def test_the_step_states_the_band_mlperf_runs_of_its_stack_earned() -> None:
    from gpucast.catalog.llm import load_llm_train_intervals
    from gpucast.inputs.mlperf_llm import ANY_STACK, TUNED

    table, _ = load_llm_train_intervals()
    common = {"model": "llama-2-7b", "gpu": "H100", "gpus": 8, "seq_len": 2048, "top": 2}
    for software, regime in (("tuned", TUNED), ("pytorch", ANY_STACK)):
        result = gpucast.predict_llm_train(**common, global_batch=64, software=software)
        low, high = table.ratios(regime)
        for p in (result.best, *result.alternatives):
            assert p.step_time.lower == pytest.approx(p.step_time_s * min(low, 1.0))
            assert p.step_time.upper == pytest.approx(p.step_time_s * high)
        assert result.interval_note is not None and "MLPerf LLM systems" in result.interval_note
        assert ("tuned-stack" in result.interval_note) == (software == "tuned")
        assert result.to_dict()["best"]["step_time_s"]["upper"] == pytest.approx(
            result.best.step_time_s * high
        )


def test_a_gpu_without_step_time_data_states_a_wider_band() -> None:
    # B200 is priced from its datasheet alone: its band spans the leave-one-GPU-out one
    common = {"model": "llama-2-7b", "gpus": 8, "seq_len": 2048, "global_batch": 64}
    h100 = gpucast.predict_llm_train(**common, gpu="H100")
    b200 = gpucast.predict_llm_train(**common, gpu="B200")
    ratio = {
        name: (
            r.best.step_time.lower / r.best.step_time_s,
            r.best.step_time.upper / r.best.step_time_s,
        )
        for name, r in (("h100", h100), ("b200", b200))
    }
    assert ratio["b200"][0] <= ratio["h100"][0] and ratio["b200"][1] >= ratio["h100"][1]
    assert ratio["b200"][1] - ratio["b200"][0] > ratio["h100"][1] - ratio["h100"][0]
    assert "B200 has no run in the step-time data" in (b200.interval_note or "")
    assert "no run in the step-time data" not in (h100.interval_note or "")
    plan = gpucast.plan_llm_train(
        model="llama-2-7b", tokens=1e10, seq_len=2048, global_batch=256,
        gpu=["H100", "B200"], max_gpus=16,
    )  # fmt: skip
    rows = {c.gpu: c for c in plan.candidates}
    spans = {g: (r.time_high_s - r.time_low_s) / r.time_s for g, r in rows.items()}
    assert rows["B200"].time_low_s < rows["B200"].time_s
    assert spans["B200"] > spans["H100-SXM"]
    assert "B200 x" in plan.assumptions["time interval"]


def test_a_cluster_gives_the_gpu_the_nodes_and_the_links() -> None:
    """D54U-3U (catalog systems.csv): 4 H100-PCIe in NVLink-bridged pairs, 25 Gbit/s
    Ethernet. TP over the four crosses PCIe at the all-reduce figure catalog
    pcie_allreduce.csv gives four Gen5 GPUs (below the x16 link's nominal 64 GB/s), not the
    bridge (600 GB/s) -- as the bare cards now do by default (the catalog's H100 PCIe servers
    bridge them in pairs)."""
    from gpucast.catalog.pcie_allreduce import pcie_allreduce_gb_per_s

    figure = pcie_allreduce_gb_per_s(5, 4)
    assert figure is not None and figure.value < 64.0
    common = {"model": "llama-2-7b", "gpus": 4, "seq_len": 2048, "global_batch": 16, "tp": 4}
    server = gpucast.predict_llm_train(**common, cluster="D54U-3U")
    assert server.best.gpu == "H100-PCIe"
    assert "D54U-3U" in server.assumptions["cluster"]
    assert f"inside a node {figure.value:g} GB/s per GPU" in server.assumptions["node network"]
    cards = gpucast.predict_llm_train(**common, gpu="H100-PCIe", gpus_per_node=4)
    assert server.best.breakdown["tp_comm"] == pytest.approx(cards.best.breakdown["tp_comm"])
    assert f"crosses PCIe at {figure.value:g} GB/s" in cards.assumptions["intra-node bridges"]
    assert server.to_dict()["assumptions"]["cluster"] == server.assumptions["cluster"]


def test_a_meshed_gpu_type_says_so_and_fewer_of_its_gpus_get_fewer_links() -> None:
    # Gaudi 2: the catalog's server joins 8 devices pairwise (HLS-Gaudi2); 4 of them reach
    # 3 of each device's 7 peer links, as the same 4 of the named server do
    common = {"model": "llama-2-7b", "gpu": "Gaudi2", "seq_len": 2048, "global_batch": 16}
    eight = gpucast.predict_llm_train(**common, gpus=8, top=0)
    assert eight.alternatives == ()
    assert "525 GB/s per Gaudi2 to its 7 peers" in eight.assumptions["intra-node mesh"]
    four = gpucast.predict_llm_train(**common, gpus=4, tp=4)
    assert "225 GB/s per Gaudi2 to its 3 peers" in four.assumptions["intra-node mesh"]
    server = gpucast.predict_llm_train(
        **(common | {"gpu": None}), gpus=4, tp=4, cluster="HLS-Gaudi2"
    )
    assert server.best.breakdown["tp_comm"] == pytest.approx(four.best.breakdown["tp_comm"])
    h100 = gpucast.predict_llm_train(**(common | {"gpu": "H100"}), gpus=8)
    assert "intra-node mesh" not in h100.assumptions


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({}, "gpu: is required"),
        ({"cluster": "D54U-3U", "gpu": "A100-80GB"}, "has H100-PCIe GPUs"),
        ({"cluster": "D54U-3U", "gpus": 8}, "exceeds the 4 GPUs"),
        ({"cluster": "D54U-3U", "gpus_per_node": 2}, "gpus-per-node: is the --cluster's"),
        ({"cluster": "DGX-H100", "node_network_gbps": 100.0}, "node-network-gbps"),
    ],
)
def test_cluster_options_are_checked(options: dict[str, object], named: str) -> None:
    base = {"model": "llama-2-7b", "seq_len": 2048, "global_batch": 16, "gpus": 4}
    with pytest.raises(InvalidSpecError, match=named):
        gpucast.predict_llm_train(**(base | options))


def test_an_nvl72_rack_is_one_nvlink_domain() -> None:
    """GB200 NVL72 (catalog systems.csv): 72 GPUs behind one NVLink switch system, so tensor
    parallelism of 16 stays on NVLink, where 8-GPU B200 servers refuse it; on the same GPU
    count and layout space the rack is faster (GB200 runs above B200 and its NVLink spans
    18 of the servers)."""
    common = {"model": "llama-3-70b", "gpus": 144, "global_batch": 576}
    rack = gpucast.predict_llm_train(**common, cluster="GB200-NVL72", cluster_nodes=2, tp=16)
    assert rack.best.gpu == "GB200" and rack.best.layout.tp == 16
    assert "GB200-NVL72" in rack.assumptions["cluster"]
    with pytest.raises(NoFeasiblePlanError, match="tp=16"):
        gpucast.predict_llm_train(**common, cluster="DGX-B200", cluster_nodes=18, tp=16)
    best_rack = gpucast.predict_llm_train(**common, cluster="GB200-NVL72", cluster_nodes=2)
    servers = gpucast.predict_llm_train(**common, cluster="DGX-B200", cluster_nodes=18)
    assert best_rack.best.step_time_s < servers.best.step_time_s
    # 128 GPUs of two racks: 64 of each, as plan llm-train plans a power-of-two batch
    part = gpucast.predict_llm_train(**{**common, "gpus": 128, "global_batch": 512},
                                     cluster="GB200-NVL72", cluster_nodes=2)  # fmt: skip
    assert (
        part.best.layout.gpus == 128
        and "64 GPUs of each 72-GPU node" in (part.assumptions["partial nodes"])
    )
    with pytest.raises(InvalidSpecError, match=r"of 72 \(whole nodes\) or of 64"):
        gpucast.predict_llm_train(**{**common, "gpus": 100}, cluster="GB200-NVL72", cluster_nodes=2)


def test_a_rack_of_72_runs_a_power_of_two_batch_on_64_of_its_gpus() -> None:
    """72 = 8 x 9: no data-parallel size of a whole rack divides a power-of-two global batch,
    so such a batch runs on 64 GPUs of each rack (8 idle, paid for); a batch that 72 divides
    runs on whole racks, which then cost less for the same time."""
    common = {"model": "llama-3-8b", "tokens": 1e10, "cluster": "GB200-NVL72", "cluster_nodes": 2,
              "cluster_price_usd_per_gpu_hour": 5.0}  # fmt: skip
    two = gpucast.plan_llm_train(**common, global_batch=1024)
    assert {(64, 8), (128, 16)} <= {(row.gpus, row.idle_gpus) for row in two.candidates}
    assert "partial nodes" in two.assumptions
    # whole racks take it only as 9 uneven pipeline stages (9 divides neither the batch nor
    # the 32 layers), slower than the 64 GPUs of data parallelism the plan picks
    assert all("pp=9" in row.layout for row in two.candidates if row.idle_gpus == 0)
    assert two.best.idle_gpus == 8
    for row in two.candidates:  # every rack is paid whole
        assert row.usd_per_hour == pytest.approx(row.nodes * 72 * 5.0)
    whole = gpucast.plan_llm_train(**common, global_batch=1152)
    assert {(72, 0), (144, 0)} <= {(row.gpus, row.idle_gpus) for row in whole.candidates}
    assert whole.best.idle_gpus == 0
    on_8 = gpucast.plan_llm_train(**{**common, "cluster": "DGX-B200"}, global_batch=1024)
    assert all(row.idle_gpus == 0 for row in on_8.candidates)
    assert "partial nodes" not in on_8.assumptions


def test_predict_llm_train_counts_a_partial_nodes_idle_gpus_in_its_energy() -> None:
    """64 GPUs of each 72-GPU rack: the 8 idle ones are paid for (``cost``) and draw their
    idle power, in predict llm-train's step energy as in plan llm-train's row of the same
    layout (QA 41 L F1: predict left them out)."""
    common = {"model": "llama-3-8b", "cluster": "GB200-NVL72", "cluster_nodes": 2,
              "global_batch": 1024, "cluster_price_usd_per_gpu_hour": 5.0}  # fmt: skip
    predicted = gpucast.predict_llm_train(**common, gpus=128)
    assert predicted.cost["paid_gpus"] == 144
    assert "unused GPUs at idle" in predicted.assumptions["energy"]
    plan = gpucast.plan_llm_train(**common, tokens=1e10)
    (row,) = [r for r in plan.candidates if (r.gpus, r.idle_gpus) == (128, 16)]
    assert row.layout == predicted.best.layout.label()
    row_w = row.energy_kwh * 3.6e6 / row.time_s  # all 144 GPUs' draw, as the plan prices it
    step_w = predicted.energy["step_energy_j"] / predicted.best.step_time_s
    assert step_w == pytest.approx(row_w, rel=1e-9)
    assert step_w > predicted.energy["avg_power_w"] * 128


def test_predict_llm_train_says_when_fewer_gpus_run_the_step_faster() -> None:
    """Two DGX H100 over 10 Gbit/s TCP: all 16 GPUs (the default) send the pipeline between
    the nodes and take ~8x one node's step; the GPUs assumption names the faster count, its
    step and layout as predicted on it, and why (QA 41 L F3: nothing said so). A step bound
    by compute is not second-guessed."""
    common = {"model": "llama-3-8b", "cluster": "DGX-H100", "cluster_nodes": 2,
              "global_batch": 64,
              "cluster_set": (("inter_node_gbps", "10"), ("network", "ethernet"))}  # fmt: skip
    all_16 = gpucast.predict_llm_train(**common)
    one_node = gpucast.predict_llm_train(**common, gpus=8)
    assert all_16.best.layout.gpus == 16 and all_16.best.bottleneck in GROWING_TERMS
    assert one_node.best.step_time_s < all_16.best.step_time_s / 2
    said = all_16.assumptions["GPUs"]
    assert f"; 8 of them run this step faster: {one_node.best.step_time_s:.3g} s (" in said
    assert one_node.best.layout.label() in said and f"bound by {all_16.best.bottleneck}" in said
    assert "faster" not in one_node.assumptions["GPUs"]  # compute-bound: no second search
    assert one_node.best.bottleneck not in GROWING_TERMS


def test_plan_llm_train_on_a_cluster_you_have() -> None:
    """A priced file cluster: its GPU, up to its nodes, its price; an unpriced catalog shape
    ranks by GPU-hours. Catalog filters with a cluster are refused."""
    common = {"model": "llama-2-7b", "tokens": 1e10, "seq_len": 2048, "global_batch": 256}
    plan = gpucast.plan_llm_train(
        **common, cluster="DGX-H100", cluster_set=(("nodes", 2), ("price_usd_per_gpu_hour", 2.5))
    )
    rows = plan.candidates
    assert {r.gpu for r in rows} == {"H100-SXM"} and {r.nodes for r in rows} <= {1, 2}
    assert all(r.usd_per_hour == pytest.approx(r.gpus * 2.5) for r in rows)
    assert "DGX-H100" in plan.assumptions["cluster"]
    unpriced = gpucast.plan_llm_train(**common, cluster="D54U-3U")
    assert {r.gpus for r in unpriced.candidates} <= {4} and unpriced.best is not None
    assert unpriced.best.cost_usd == 0 and "fewest GPU-hours" in unpriced.assumptions["cluster"]
    with pytest.raises(InvalidSpecError, match="gpu: filters the cloud catalog"):
        gpucast.plan_llm_train(**common, cluster="DGX-H100", gpu=["H100"])


def test_nodes_and_price_are_shorthands_of_the_cluster_settings() -> None:
    """--nodes / --price-per-gpu-hour (as on plan train and simulate train) give the plan that
    --cluster-set nodes=... price_usd_per_gpu_hour=... gives, and say they were set."""
    common = {"model": "llama-2-7b", "tokens": 1e10, "seq_len": 2048, "global_batch": 256}
    long = gpucast.plan_llm_train(
        **common, cluster="DGX-H100", cluster_set=(("nodes", 2), ("price_usd_per_gpu_hour", 2.5))
    )
    short = gpucast.plan_llm_train(
        **common, cluster="DGX-H100", cluster_nodes=2, cluster_price_usd_per_gpu_hour=2.5
    )
    assert [r.to_dict() for r in short.candidates] == [r.to_dict() for r in long.candidates]
    assert "--nodes 2" in short.assumptions["cluster"]
    step = {"model": "llama-2-7b", "seq_len": 2048, "global_batch": 16}
    two = gpucast.predict_llm_train(**step, gpus=8, cluster="D54U-3U", cluster_nodes=2)
    assert two.best.layout.gpus == 8 and "2 nodes x 4 H100-PCIe" in two.assumptions["cluster"]
    with pytest.raises(InvalidSpecError, match=r"exceeds the 4 GPUs.*--nodes N"):
        gpucast.predict_llm_train(**step, gpus=8, cluster="D54U-3U")
    with pytest.raises(InvalidSpecError, match="nodes: describes a --cluster"):
        gpucast.plan_llm_train(**common, cluster_nodes=2)


def test_a_128k_context_is_searched_at_wide_context_parallelism() -> None:
    # Llama 3.1 8B at 131,072 tokens on 64 H100: the search reaches cp 16 (8K tokens a rank),
    # faster than the widest of the short-context search (cp 2)
    common = {"model": "llama-3.1-8b", "gpu": "H100", "gpus": 64, "seq_len": 131072,
              "global_batch": 64, "top": 0}  # fmt: skip
    wide = gpucast.predict_llm_train(**common)
    narrow = gpucast.predict_llm_train(**common, cp=2)
    assert wide.best.layout.cp > 2 and wide.best.step_time_s < narrow.best.step_time_s


def test_plan_llm_train_searches_wide_context_parallelism_for_long_sequences() -> None:
    common = {"model": "llama-3.1-8b", "tokens": 1e9, "gpu": ("B200",), "max_gpus": 8}
    long = gpucast.plan_llm_train(**common, seq_len=131072, global_batch=64)
    assert long.best.layout.count("cp=") == 1 and "cp=1 " not in long.best.layout
    assert "cp 1/2/4/8/16" in long.assumptions["layout search"]
    short = gpucast.plan_llm_train(**common, seq_len=8192, global_batch=64)
    assert "cp 1/2," in short.assumptions["layout search"]


def test_plan_llm_train_searches_the_layouts_predict_llm_train_does() -> None:
    """The plan searched cp 1 alone (and fewer micro-batches, ZeRO stages, recomputation,
    vpp), so 4 DGX-H100 missed a 7-day deadline that cp 2 meets, for less; now each row is the
    layout predict llm-train picks on its GPUs."""
    job = {"model": "llama-3-8b", "global_batch": 512, "cluster": "DGX-H100", "cluster_nodes": 4}
    plan = gpucast.plan_llm_train(  # the central value alone (its P(meet) is 52%)
        **job,
        tokens=2e11,
        deadline_s=7 * 86400,
        cluster_price_usd_per_gpu_hour=2.5,
        min_p_meet=0.5,
    )
    assert plan.best is not None and plan.best.nodes == 4 and plan.best.time_s <= 7 * 86400
    step = gpucast.predict_llm_train(**job, top=0)
    assert plan.best.layout == step.best.layout.label() and "cp=2" in plan.best.layout
    search = plan.assumptions["layout search"]
    for searched in ("micro-batch 1/2/4/8", "ZeRO-0/1/2/3", "no, selective or full", "cp 1/2,",
                     "vpp 1/2/4/8"):  # fmt: skip
        assert searched in search


def test_predict_llm_train_on_a_cluster_runs_on_all_its_gpus_unless_told() -> None:
    """As predict train --cluster: all of the cluster's GPUs by default, --gpus N fewer, and
    the result says which (it ran 8 of a 72-GPU rack, and refused 8 of 8 DGX-H100 nodes)."""
    common = {"model": "llama-3-70b", "global_batch": 512, "top": 0}
    nodes = gpucast.predict_llm_train(**common, cluster="DGX-H100", cluster_nodes=8)
    assert nodes.best.layout.gpus == 64
    assert nodes.assumptions["GPUs"] == (
        "64 of the cluster's 64 GPUs (8 nodes x 8; default: all of them; --gpus N for fewer)"
    )
    rack = gpucast.predict_llm_train(**common, cluster="GB200-NVL72")
    assert rack.best.layout.gpus == 72 and "72 of the cluster's 72" in rack.assumptions["GPUs"]
    fewer = gpucast.predict_llm_train(**common, cluster="GB200-NVL72", gpus=8)
    assert fewer.best.layout.gpus == 8
    assert fewer.assumptions["GPUs"].endswith("(1 node x 8; --gpus 8)")
    bare = gpucast.predict_llm_train(**{**common, "model": "llama-2-7b"}, gpu="H100")
    assert bare.best.layout.gpus == 8 and "default with --gpu: 8" in bare.assumptions["GPUs"]


def test_predict_llm_train_prices_the_step_at_the_clusters_price() -> None:
    """--price-per-gpu-hour: the US$ an hour of the GPUs paid for and per million tokens, as
    predict train --cluster prices its step per sample; none without a price."""
    common = {"model": "llama-2-7b", "seq_len": 2048, "global_batch": 64, "top": 0}
    priced = gpucast.predict_llm_train(
        **common, cluster="DGX-H100", cluster_nodes=2, cluster_price_usd_per_gpu_hour=2.5
    )
    cost = priced.cost
    assert cost["usd_per_hour"] == pytest.approx(16 * 2.5) and cost["paid_gpus"] == 16
    per_token = cost["usd_per_hour"] / 3600 / priced.best.tokens_per_s
    assert cost["usd_per_million_tokens"] == pytest.approx(per_token * 1e6)
    assert priced.to_dict()["cost"] == cost
    # 64 GPUs of each 72-GPU rack: the idle 8 are paid for too
    rack = gpucast.predict_llm_train(
        **{**common, "model": "llama-3-8b", "global_batch": 512}, gpus=128,
        cluster="GB200-NVL72", cluster_nodes=2, cluster_price_usd_per_gpu_hour=5.0,
    )  # fmt: skip
    assert rack.cost["paid_gpus"] == 144 and rack.cost["usd_per_hour"] == pytest.approx(720.0)
    unpriced = gpucast.predict_llm_train(**common, cluster="DGX-H100", cluster_nodes=2)
    assert unpriced.cost == {} and unpriced.to_dict()["cost"] == {}


def test_lora_adapters_are_unfused_unless_said_and_the_result_says_which() -> None:
    """The default prices LoRA's adapters as Megatron/NeMo and PEFT run them (kernels of their
    own); --lora-fused drops their traffic, so the step is no slower, and the LoRA assumption
    names the choice."""
    common = {"model": "llama-2-7b", "gpu": "H100", "gpus": 8, "seq_len": 4096,
              "global_batch": 8, "lora_rank": 16, "top": 0, "tp": 1, "pp": 1, "cp": 1}  # fmt: skip
    unfused = gpucast.predict_llm_train(**common)
    fused = gpucast.predict_llm_train(**common, lora_fused=True)
    assert fused.best.step_time_s < unfused.best.step_time_s
    assert "adapters unfused" in unfused.to_dict()["assumptions"]["LoRA"]
    assert "(--lora-fused)" in fused.to_dict()["assumptions"]["LoRA"]


def test_bridged_cards_state_their_pairs() -> None:
    """predict llm-train on H100 NVL cards (no cluster given) prices the catalog's bridged
    pairs and says so; an NVSwitch GPU type says nothing of bridges."""
    common = {"model": "llama-3-8b", "gpus": 8, "seq_len": 4096, "global_batch": 64, "top": 0}
    nvl = gpucast.predict_llm_train(**common, gpu="H100-NVL").to_dict()["assumptions"]
    sxm = gpucast.predict_llm_train(**common, gpu="H100").to_dict()["assumptions"]
    from gpucast.catalog.pcie_allreduce import pcie_allreduce_gb_per_s

    eight = pcie_allreduce_gb_per_s(5, 8)  # the node's 8 Gen5 cards: the sourced figure
    assert eight is not None and eight.value < 64.0
    said = nvl["intra-node bridges"]
    assert f"crosses PCIe at {eight.value:g} GB/s" in said and "pcie_allreduce.csv" in said
    assert "intra-node bridges" not in sxm


def test_a_meshed_gpu_type_fills_its_catalogs_node_by_default() -> None:
    # GH200 ships in nodes of 4 superchips meshed by NVLink (Alps, JUPITER): 16 GH200 are 4
    # such nodes by default, not 2 of 8; --gpus-per-node still says otherwise
    common = {"model": "llama-2-7b", "gpu": "GH200", "gpus": 16, "global_batch": 64}
    default = gpucast.predict_llm_train(**common)
    assert "per 4-GPU node" in default.assumptions["node network"]
    assert "intra-node mesh" in default.assumptions
    eight = gpucast.predict_llm_train(**common, gpus_per_node=8)
    assert "per 8-GPU node" in eight.assumptions["node network"]


SPOT_JOB = {"model": "llama-3-8b", "tokens": 2e9, "seq_len": 4096, "global_batch": 256,
            "max_gpus": 16, "gpus": ("H100",), "providers": ("aws",)}  # fmt: skip


def test_plan_llm_train_plans_spot_servers_when_asked_and_says_what_it_rests_on() -> None:
    """Without --spot the market assumption says so and every row is on demand; with it,
    spot rows join at AWS's spot price, simulated with revocations (here a constant hazard),
    and the assumption names the checkpoint storage, the restart and the lifetimes."""
    plain = gpucast.plan_llm_train(**SPOT_JOB)
    assert {c.market for c in plain.candidates} == {"on-demand"}
    assert plain.assumptions["market"] == "on demand only (--spot also plans spot servers)"
    plan = gpucast.plan_llm_train(
        **SPOT_JOB, allow_spot=True, hazard_per_hour=0.05, runs=200, deadline="2d"
    )
    spot = [c for c in plan.candidates if c.market == "spot"]
    assert spot and all(c.p_meet_deadline is not None and c.checkpoint_s > 3.0 for c in spot)
    od = {c.gpus: c for c in plan.candidates if c.market == "on-demand"}
    for c in spot:  # cheaper by the hour, longer by the revocations and the start-up
        assert c.usd_per_hour < od[c.gpus].usd_per_hour and c.time_s > od[c.gpus].time_s
    market = plan.assumptions["market"]
    for needle in ("on demand and spot", "ebs-gp3-max", "--checkpoint-storage", "user-given"):
        assert needle in market, needle
    out = plan.to_dict()["candidates"]
    assert {"market", "p_meet_deadline", "revocations_mean"} <= set(out[0])


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"min_p_meet": 1.5}, "min-p-meet"),
        ({"runs": 0}, "runs"),
        ({"max_simulated": 0}, "max-simulated"),
        ({"spot_scenario": "rosy"}, "spot-scenario"),
        ({"checkpoint_storage": "floppy"}, "checkpoint-storage"),
        ({"objective": "greenest"}, "objective"),
        ({"move_region": "atlantis", "allow_spot": True}, "move-region"),
        ({"pue": 0.5}, "pue"),
        ({"checkpoint_storage": "local-nvme", "allow_spot": True}, "checkpoint-storage"),
    ],
)
def test_plan_llm_train_refuses_bad_spot_settings(options: dict, field: str) -> None:
    with pytest.raises(InvalidSpecError) as err:
        gpucast.plan_llm_train(**SPOT_JOB, **options)
    assert err.value.field == field


def test_plan_llm_train_states_energy_and_emissions_and_picks_the_least_carbon() -> None:
    """Every catalog row carries kWh and (where its region has a grid figure) kgCO2e; the
    carbon objective picks the least among the rows that meet the deadline."""
    job = {**SPOT_JOB, "providers": ("aws", "gcp"), "deadline": "3d"}
    plan = gpucast.plan_llm_train(**job, pue=1.1)
    assert all(c.energy_kwh and c.energy_kwh > 0 for c in plan.candidates)
    assert "PUE 1.1" in plan.assumptions["energy"]
    assert plan.assumptions["objective"].startswith("cheapest")
    green = gpucast.plan_llm_train(**job, objective="carbon")
    ok = [c for c in green.candidates if c.meets_deadline and c.co2e_kg is not None]
    least = min(c.co2e_kg for c in ok)
    tied = [c for c in ok if c.co2e_kg <= 1.02 * least]
    assert green.best.co2e_kg <= 1.02 * least
    assert green.best.cost_usd == min(c.cost_usd for c in tied)
    assert "tied" in green.assumptions["objective"]


def test_predict_llm_train_states_the_best_layouts_energy() -> None:
    result = gpucast.predict_llm_train(
        model="llama-3-8b", gpu="H100", gpus=8, seq_len=4096, global_batch=64, top=0
    )
    e, best = result.energy, result.best
    h100 = 700.0  # the H100-SXM's default power limit (catalog)
    assert 0.1 * h100 < e["avg_power_w"] < h100
    assert e["step_energy_j"] == pytest.approx(e["avg_power_w"] * 8 * best.step_time_s)
    assert e["energy_j_per_token"] == pytest.approx(e["step_energy_j"] / (64 * 4096))
    assert result.to_dict()["energy"] == e and "power model" in result.assumptions["energy"]


def test_plan_llm_train_with_gpu_variability_runs_each_row_at_its_slowest_gpus_pace() -> None:
    from gpucast.catalog.variability import variability_profiles

    job = {**SPOT_JOB, "providers": ("gcp",)}
    plain = gpucast.plan_llm_train(**job)
    spread = gpucast.plan_llm_train(**job, gpu_variability="typical")
    typical = variability_profiles()["typical"]
    before = {(c.instance_type, c.gpus): c for c in plain.candidates}
    for c in spread.candidates:
        slow = float(typical.expected_max(c.gpus)[0])
        assert slow > 1.0
        b = before[(c.instance_type, c.gpus)]
        assert c.step_time_s == pytest.approx(b.step_time_s * slow, rel=1e-9)
    assert "none" in plain.assumptions["GPU variability"]
    assert "slowest" in spread.assumptions["GPU variability"]
    with pytest.raises(InvalidSpecError, match="gpu-variability"):
        gpucast.plan_llm_train(**job, gpu_variability="lumpy")


def test_plan_llm_train_gpus_waiting_on_the_slowest_draw_idle_power() -> None:
    """QA 40 E #14: every GPU drew its busy power for the slowest GPU's whole step, so the
    energy grew as the step (8 H100s of the worst fleet +8%, 64 +21%); the others wait on it
    at their idle draw."""
    job = {**SPOT_JOB, "providers": ("gcp",)}
    before = {
        (c.instance_type, c.gpus, c.market): c for c in gpucast.plan_llm_train(**job).candidates
    }
    checked = 0
    for c in gpucast.plan_llm_train(**job, gpu_variability="worst").candidates:
        b = before.get((c.instance_type, c.gpus, c.market))
        if b is None or c.avg_power_w is None or b.avg_power_w is None:
            continue
        assert c.avg_power_w < b.avg_power_w
        if c.market != "spot":
            assert c.energy_kwh / b.energy_kwh < c.step_time_s / b.step_time_s
        checked += 1
    assert checked


@pytest.mark.parametrize(
    ("flag", "example"), [("seq_len", "4096"), ("global_batch", "512"), ("gpus", "8")]
)
def test_a_count_of_zero_suggests_a_typical_value(flag: str, example: str) -> None:
    """QA 34 #15: "e.g. --seq-len 8" read oddly; each count suggests a typical value."""
    common = {"model": "llama-2-7b", "gpu": "H100", "gpus": 8, "seq_len": 2048, "global_batch": 64}
    dash = flag.replace("_", "-")
    with pytest.raises(InvalidSpecError, match=f"^{dash}: .*; e.g. --{dash} {example}$"):
        gpucast.predict_llm_train(**{**common, flag: 0})


def test_a_fixed_layout_that_cannot_run_names_its_flag_first() -> None:
    """QA 34 #15: "--tp 3" was refused without the "tp:" every input error starts with."""
    with pytest.raises(NoFeasiblePlanError, match=r"^tp: no layout of 8 GPUs with tp=3"):
        gpucast.predict_llm_train(
            model="llama-2-7b", gpu="H100", gpus=8, seq_len=2048, global_batch=64, tp=3
        )


def test_predict_llm_train_reaches_a_clusters_network_as_plan_llm_train_does() -> None:
    """a3-highgpu-8g (catalog systems.csv): 8 H100-SXM, 1,000 Gbit/s of TCP NICs. plan
    llm-train priced it at the fitted TCP share with a flat ring, predict llm-train --cluster at
    the nominal NICs, hierarchically: 7.64 against 6.51 s for the same layout. One rule now."""
    common = {"model": "llama-3-8b", "seq_len": 8192, "global_batch": 512, "tp": 2, "pp": 1,
              "cluster": "a3-highgpu-8g", "cluster_nodes": 8}  # fmt: skip
    predicted = gpucast.predict_llm_train(**common, gpus=64, zero=1, top=0)
    assert "(TCP: 0.143 of its 1000 Gbit/s NICs" in predicted.assumptions["node network"]
    plan = gpucast.plan_llm_train(**common, tokens=2e11, deadline="30d")
    layout = predicted.best.layout.label()
    (row,) = [r for r in plan.candidates if r.gpus == 64 and r.layout == layout]
    assert row.network == "tcp"
    assert predicted.best.step_time_s == pytest.approx(row.step_time_s, rel=1e-9)
    rdma = gpucast.predict_llm_train(**{**common, "cluster": "p5.48xlarge"}, gpus=64, zero=1)
    assert "TCP" not in rdma.assumptions["node network"]
    assert rdma.best.step_time_s < predicted.best.step_time_s
    bare = gpucast.predict_llm_train(**{**common, "cluster": None, "cluster_nodes": None},
                                     gpu="H100", gpus=64, zero=1)  # fmt: skip
    assert bare.assumptions["node network"] == (
        "3200 Gbit/s per 8-GPU node (default per GPU type), RDMA-class at its links "
        "(a TCP network: --cluster with network: ethernet)"
    )
    assert bare.best.step_time_s == pytest.approx(rdma.best.step_time_s, rel=1e-9)


def test_a_lora_rank_beyond_the_hidden_size_is_refused_by_both_verbs() -> None:
    """QA session 37: --lora-rank 100000 on Llama-3-8B (hidden 4,096) was searched and ended
    in 'does not fit'; a rank past the hidden size adds nothing a full-rank update lacks."""
    said = r"^lora-rank: must be at most llama-3-8b's hidden size of 4096 \(got 100000\); e\.g\."
    with pytest.raises(InvalidSpecError, match=said):
        gpucast.predict_llm_train(
            model="llama-3-8b", gpu="H100", gpus=8, global_batch=8, lora_rank=100_000
        )
    with pytest.raises(InvalidSpecError, match=said):
        gpucast.plan_llm_train(
            model="llama-3-8b", tokens=1e9, global_batch=8, gpu=["H100"], lora_rank=100_000
        )
    ok = gpucast.predict_llm_train(
        model="llama-3-8b", gpu="H100", gpus=8, global_batch=8, lora_rank=4096, top=0
    )
    assert ok.best.layout.lora_rank == 4096


def test_mfu_says_which_peak_it_divides_by() -> None:
    """QA 37 FO#7: an fp8 step's MFU is against the fp8 peak, published MFU (NVIDIA, MLPerf)
    usually against the bf16 one: the JSON and the text say which; the number is unchanged."""
    from typer.testing import CliRunner

    from gpucast.app.llm import mfu_text
    from gpucast.catalog import load_catalog
    from gpucast.cli.app import app as cli

    fp8 = gpucast.predict_llm_train(
        model="llama-2-7b", gpu="H100", gpus=8, global_batch=64, precision="fp8", top=0
    )
    best = fp8.best
    assert best.to_dict()["mfu_basis"] == "fp8 dense peak"
    peak = load_catalog().gpu("H100").peak_tflops("fp8") * 1e12
    assert best.mfu == pytest.approx(best.model_flops_per_step / (best.step_time_s * 8 * peak))
    assert "x2 on H100-SXM" in fp8.assumptions["MFU"] and "bf16 peak" in fp8.assumptions["MFU"]
    catalog = load_catalog()
    both = mfu_text("fp8", [catalog.gpu("H100"), catalog.gpu("Gaudi3")])
    assert "x1 on Gaudi3" in both and "x2 on H100-SXM" in both  # Gaudi 3: fp8 = bf16 peak
    assert mfu_text("bf16", [catalog.gpu("H100")]).endswith("each GPU's bf16 dense peak)")
    text = CliRunner().invoke(
        cli, ["predict", "llm-train", "--model", "llama-2-7b", "--gpu", "H100", "--gpus", "8",
              "--global-batch", "64", "--precision", "fp8", "--top", "0"],
    ).stdout  # fmt: skip
    assert f"MFU {best.mfu:.0%} of the fp8 peak," in text


def test_a_plan_costing_under_a_dollar_shows_its_cents() -> None:
    # QA 39 L #11: 100 tokens on 8 H100s (23.8 s) printed "$0" beside the $1 rows
    plan = gpucast.plan_llm_train(
        model="llama-2-7b", tokens=100, global_batch=64, gpus=("H100-SXM",), max_gpus=8
    )
    cheap = [c for c in plan.candidates if 0 < c.cost_usd < 0.995]
    assert cheap
    for c in cheap:
        assert f", ${c.cost_usd:.2f}; " in c.text() and ", $0; " not in c.text()


def test_llama_3_1_trains_at_its_pre_training_length_by_default() -> None:
    """QL 39: Llama 3.1 defaulted to its 131,072-token context -- a long-context stage, not the
    8,192 tokens Meta pre-trained it at (catalog llm_models.csv pretrain_seq_len, with source);
    models without the column keep their context; a given length is the user's."""
    common = {"gpu": "H100", "gpus": 64, "global_batch": 512}
    result = gpucast.predict_llm_train(model="llama-3.1-8b", **common)
    assert result.best.seq_len == 8192
    said = result.assumptions["sequence length"]
    assert said.startswith("8192 tokens (the length llama-3.1-8b was pre-trained at")
    assert "131,072" in said and "--seq-len 131072" in said
    assert gpucast.predict_llm_train(model="llama-3-8b", **common).best.seq_len == 8192
    two = gpucast.predict_llm_train(model="llama-2-7b", **common)
    assert two.best.seq_len == 4096
    assert two.assumptions["sequence length"] == "4096 tokens (the model's context)"
    given = gpucast.predict_llm_train(model="llama-3.1-8b", seq_len=16384, **common)
    assert given.assumptions["sequence length"] == "16384 tokens"
    plan = gpucast.plan_llm_train(
        model="llama-3.1-8b", tokens=1e9, global_batch=64, gpu=("B200",), max_gpus=8
    )
    assert plan.assumptions["sequence length"].startswith("8192 tokens (the length")
