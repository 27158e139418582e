"""The LLM inference model on tiny synthetic models, GPUs and engines (no data needed)."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from llm_infer_factories import GPUS, SPECS, TRUE, UNFITTED, gpu, model, synthetic_rows

from gpucast.domain.errors import InvalidInputError, InvalidSpecError, NoFeasiblePlanError
from gpucast.domain.llm_infer import BYTES_PER_VALUE, EngineProfile
from gpucast.domain.parallel import NodeLinks
from gpucast.domain.units import GIB
from gpucast.predict.llm_infer import (
    TERMS,
    LlmInferenceModel,
    kv_bytes_per_token,
    predict_inference,
    request_latency_s,
    smallest_fitting_tp,
    tp_problem,
)

G = GPUS["G"]
#: An engine with no overheads and full efficiency: the roofline itself.
IDEAL = dataclasses.replace(
    TRUE, weight_bandwidth_efficiency=1.0, kv_bandwidth_efficiency=1.0, compute_efficiency=1.0,
    step_overhead_s=0.0, sequence_overhead_s=0.0, collective_latency_s=0.0,
    memory_reserve_gib=0.0, memory_fraction=1.0,
)  # fmt: skip


def run(spec=SPECS["small"], engine=TRUE, **kw):  # type: ignore[no-untyped-def]
    options = {"batch_size": 1, "input_len": 512, "output_len": 128, **kw}
    return predict_inference(spec, kw.pop("gpu", G), engine, **options)


# -- KV cache and weights ------------------------------------------------------------------
def test_kv_bytes_per_token_is_two_layers_kv_heads_head_dim_bytes() -> None:
    spec = SPECS["gqa"]  # 24 layers, 4 KV heads of 128
    assert kv_bytes_per_token(spec) == 2 * 24 * 4 * 128 * 2
    assert kv_bytes_per_token(spec, "int8") == 2 * 24 * 4 * 128 * 1
    assert kv_bytes_per_token(spec, tp=2) == kv_bytes_per_token(spec) / 2
    # more GPUs than KV heads: each keeps one head
    assert kv_bytes_per_token(spec, tp=8) == 2 * 24 * 1 * 128 * 2


def test_grouped_query_attention_shrinks_the_kv_cache_by_heads_over_kv_heads() -> None:
    mha = model("mha", heads=32, kv_heads=32, hidden=4096)
    gqa = dataclasses.replace(mha, name="gqa", kv_heads=8)
    assert kv_bytes_per_token(mha) == 4 * kv_bytes_per_token(gqa)


def test_weights_per_gpu_split_with_tensor_parallelism() -> None:
    one, two = run(tp=1), run(tp=2)
    assert two.memory.weights_bytes == pytest.approx(one.memory.weights_bytes / 2, rel=0.01)
    assert one.weight_bytes == SPECS["small"].total_params * 2


def test_moe_holds_every_expert_but_computes_with_the_active_ones() -> None:
    moe = model("moe", experts=8, top_k=2)
    dense = model("dense")
    p = run(moe, batch_size=1)
    assert p.memory.weights_bytes == pytest.approx(moe.total_params * 2, rel=1e-9)
    assert moe.total_params > 5 * dense.total_params
    # batch 1 reads two experts per layer, not eight: far from 8x the dense step
    assert run(moe, engine=IDEAL).tpot_s < 3.5 * run(dense, engine=IDEAL).tpot_s
    # many different sequences touch every expert; identical ones only two
    many = run(moe, engine=IDEAL, batch_size=64)
    same = run(moe, engine=IDEAL, batch_size=64, identical_sequences=True)
    assert many.breakdown["decode_weights"] > 2.5 * same.breakdown["decode_weights"]
    assert many.tpot_s > same.tpot_s


# -- prefill and decode --------------------------------------------------------------------
def test_decode_at_batch_one_is_reading_the_weights() -> None:
    spec = SPECS["big"]
    p = run(spec, engine=IDEAL, input_len=16, output_len=16)
    streamed = (spec.total_params - spec.vocab * spec.hidden) * 2  # no input embedding table
    assert p.tpot_s == pytest.approx(streamed / (G.memory_bandwidth_gbps * 1e9), rel=0.03)
    assert p.bottleneck == "decode_weights"


def test_prefill_is_compute_bound_with_a_quadratic_attention_term() -> None:
    spec = SPECS["small"]
    short = run(spec, engine=IDEAL, batch_size=32, input_len=512, output_len=1)
    flops = 32 * 512 * 2 * spec.matmul_params_per_token
    attention = 32 * 0.5 * 4 * spec.q_dim * spec.layers * 512**2
    assert short.ttft_s == pytest.approx((flops + attention) / 300e12, rel=0.05)
    long = run(spec, engine=IDEAL, batch_size=2, input_len=8000, output_len=1)
    # the same prompt tokens in longer sequences cost more: the quadratic term
    flops = 2 * 8000 * 2 * spec.matmul_params_per_token
    attention = 2 * 0.5 * 4 * spec.q_dim * spec.layers * 8000**2
    assert long.ttft_s == pytest.approx((flops + attention) / 300e12, rel=0.05)
    assert long.ttft_s > short.ttft_s * 1.15


def test_kv_cache_reads_grow_with_batch_and_context() -> None:
    a = run(batch_size=8, input_len=256, output_len=256)
    b = run(batch_size=8, input_len=2048, output_len=256)
    assert b.breakdown["decode_kv_cache"] > 5 * a.breakdown["decode_kv_cache"]
    assert b.tpot_s > a.tpot_s


def test_throughput_grows_with_batch_then_saturates_at_the_kv_capacity() -> None:
    spec = model("mha", layers=32, hidden=4096, heads=32, kv_heads=32)  # 0.5 MiB/token
    rates = [run(spec, batch_size=b, input_len=2048, output_len=2048).tokens_per_s
             for b in (1, 8, 64, 128)]  # fmt: skip
    assert rates[0] < rates[1] < rates[2]
    assert rates[3] == pytest.approx(rates[2], rel=0.05)
    p = run(spec, batch_size=64, input_len=2048, output_len=2048)
    assert p.waves > 1 and p.concurrent_sequences < 64
    assert any("turns" in n for n in p.notes)
    assert p.memory.total_bytes <= p.memory.capacity_bytes * (1 + 1e-9)


def test_breakdown_adds_up_to_the_batch_latency() -> None:
    for kw in ({"batch_size": 64, "input_len": 2048, "output_len": 512, "tp": 2}, {}):
        p = run(**kw)
        assert set(p.breakdown) == set(TERMS)
        assert sum(p.breakdown.values()) == pytest.approx(p.latency_s, rel=1e-9)
        assert p.tokens_per_s == pytest.approx(p.batch_size * p.output_len / p.latency_s)
        assert p.total_tokens_per_s == pytest.approx(2 * p.tokens_per_s * (
            p.input_len + p.output_len) / (2 * p.output_len))  # fmt: skip


def test_tensor_parallelism_speeds_up_decode_but_adds_all_reduces() -> None:
    one, two = run(SPECS["big"], tp=1), run(SPECS["big"], tp=2)
    assert two.tpot_s < one.tpot_s
    assert two.breakdown["communication"] > 0 == one.breakdown["communication"]


def test_layer_split_does_not_speed_up_decode_but_pipelines_prompt_chunks() -> None:
    layer = dataclasses.replace(TRUE, multi_gpu="layer", prompt_chunk_tokens=64)
    one = run(SPECS["big"], engine=layer, tp=1, input_len=1024)
    four = run(SPECS["big"], engine=layer, tp=4, input_len=1024)
    assert four.tpot_s >= one.tpot_s  # the same weights, read one GPU after the other
    assert four.ttft_s < 0.5 * one.ttft_s  # 16 chunks through 4 stages
    assert four.memory.weights_bytes == pytest.approx(one.memory.weights_bytes / 4)


def test_quantised_weights_decode_faster_and_take_less_memory() -> None:
    fp16 = run(SPECS["big"], batch_size=1)
    int4 = run(SPECS["big"], batch_size=1, precision="int4")
    assert int4.memory.weights_bytes == pytest.approx(
        fp16.memory.weights_bytes * BYTES_PER_VALUE["int4"] / 2
    )
    assert int4.tpot_s < 0.5 * fp16.tpot_s
    assert int4.kv_precision == "fp16"  # weight-only quantisation keeps a 16-bit cache
    fp8 = run(SPECS["big"], precision="fp8")
    assert fp8.kv_precision == "fp8"
    assert any("no fp8 tensor cores" in n for n in fp8.notes)


@settings(max_examples=40, deadline=None)
@given(
    batch=st.integers(1, 128),
    length=st.integers(1, 3000),
    extra=st.integers(1, 1000),
    tp=st.sampled_from([1, 2, 4]),
)
def test_more_output_never_costs_less_and_everything_is_finite(
    batch: int, length: int, extra: int, tp: int
) -> None:
    base = run(SPECS["gqa"], batch_size=batch, input_len=length, output_len=64, tp=tp)
    more = run(SPECS["gqa"], batch_size=batch, input_len=length, output_len=64 + extra, tp=tp)
    assert more.latency_s >= base.latency_s
    assert base.waves >= 1.0 and 1.0 <= base.concurrent_sequences <= batch
    for value in (base.ttft_s, base.tpot_s, base.tokens_per_s, base.memory.total_bytes):
        assert math.isfinite(value) and value > 0


# -- refusals ------------------------------------------------------------------------------
def test_lengths_beyond_the_context_window_name_the_field() -> None:
    spec = model(context=4096)
    with pytest.raises(InvalidSpecError, match="input-len: is beyond tiny's context window"):
        run(spec, input_len=5000)
    with pytest.raises(InvalidSpecError, match="output-len: prompt \\+ output"):
        run(spec, input_len=4000, output_len=200)
    with pytest.raises(InvalidSpecError, match="batch-size"):
        run(batch_size=0)


def test_tp_must_split_the_heads() -> None:
    assert tp_problem(SPECS["gqa"], 3) is not None and tp_problem(SPECS["gqa"], 8) is None
    with pytest.raises(InvalidSpecError, match="tp: cannot split small: 3 does not divide"):
        run(tp=3)


def test_smallest_fitting_tp_and_the_refusal_when_none_fits() -> None:
    big = model("huge", layers=80, hidden=8192, heads=64, kv_heads=8)  # 77B: 143 GiB in fp16
    assert not run(big, tp=1).fits
    # two 80 GB GPUs give 0.9 x 80 - 2 = 70 GiB each: not enough; four do
    assert smallest_fitting_tp(big, gpu(memory_gib=80), TRUE, input_len=512, output_len=128) == 4
    with pytest.raises(NoFeasiblePlanError, match="at any tensor-parallel degree offered"):
        smallest_fitting_tp(big, gpu(memory_gib=8), TRUE, input_len=512, output_len=128)


def test_engine_profile_checks_its_fields() -> None:
    with pytest.raises(InvalidSpecError, match="compute_efficiency: must be in"):
        dataclasses.replace(TRUE, compute_efficiency=1.5)
    with pytest.raises(InvalidSpecError, match="multi_gpu"):
        dataclasses.replace(TRUE, multi_gpu="pipeline")  # type: ignore[arg-type]
    assert EngineProfile.from_dict(TRUE.to_dict()) == TRUE
    assert "priors only" in UNFITTED.provenance()


# -- the fit -------------------------------------------------------------------------------
def test_fit_recovers_the_engine_that_timed_the_rows() -> None:
    rows, ttft = synthetic_rows(noise=0.01)
    fitted = LlmInferenceModel().fit(rows, specs=SPECS, gpus=GPUS, engines=[UNFITTED], ttft=ttft)
    profile = fitted.profile("eng")
    for name in ("weight_bandwidth_efficiency", "compute_efficiency", "step_overhead_s"):
        assert getattr(profile, name) == pytest.approx(getattr(TRUE, name), rel=0.08), name
    assert profile.fitted_params and "72 throughput + 3 TTFT rows" in profile.fitted_on
    predicted = fitted.predict_frame(rows, specs=SPECS, gpus=GPUS)
    assert (abs(predicted / rows["latency_s"] - 1) < 0.05).mean() > 0.9


def test_an_engine_without_rows_gets_the_pooled_fit_and_one_sequence_pins_no_capacity() -> None:
    rows, _ = synthetic_rows()
    single = rows[rows["batch_size"] == 1].assign(gpus=1)
    other = dataclasses.replace(UNFITTED, name="other", bench_framework="Other")
    fitted = LlmInferenceModel().fit(single, specs=SPECS, gpus=GPUS, engines=[UNFITTED, other])
    own = fitted.profile("eng")
    assert "sequence_overhead_s" not in own.fitted_params
    assert own.memory_reserve_gib == UNFITTED.memory_reserve_gib  # left at its prior
    pooled = fitted.profile("other")
    assert pooled.multi_gpu == other.multi_gpu and "pooled fit" in pooled.fitted_on
    with pytest.raises(InvalidInputError, match="was not given to fit"):
        fitted.profile("nobody")


def test_fit_refuses_rows_of_an_unknown_framework() -> None:
    rows, _ = synthetic_rows()
    with pytest.raises(InvalidInputError, match="match no engine"):
        LlmInferenceModel().fit(
            rows.assign(framework="Mystery"), specs=SPECS, gpus=GPUS, engines=[UNFITTED]
        )


def test_memory_reserve_is_in_gib() -> None:
    p = run(engine=dataclasses.replace(TRUE, memory_reserve_gib=4.0, memory_fraction=0.5))
    assert p.memory.capacity_bytes == pytest.approx(0.5 * 40 * GIB - 4 * GIB)


# -- many requests at once ---------------------------------------------------------------------
@pytest.mark.parametrize("tp", [1, 2])
def test_request_latency_is_predict_inference_of_each_request_alone(tp: int) -> None:
    import numpy as np

    prompts, outputs = np.array([1, 37, 512, 3000]), np.array([1, 200, 128, 17])
    chunked = dataclasses.replace(TRUE, prompt_chunk_tokens=256)
    for engine in (TRUE, chunked):
        got = request_latency_s(
            SPECS["small"], G, engine, input_len=prompts, output_len=outputs, tp=tp
        )
        want = [
            run(engine=engine, input_len=int(i), output_len=int(o), tp=tp).latency_s
            for i, o in zip(prompts, outputs, strict=True)
        ]
        assert got == pytest.approx(want, rel=1e-12)
    assert request_latency_s(SPECS["small"], G, TRUE, input_len=[], output_len=[]).size == 0


def test_request_latency_bad_token_counts() -> None:
    with pytest.raises(InvalidSpecError, match="token count"):
        request_latency_s(SPECS["small"], G, TRUE, input_len=[0], output_len=[5])
    with pytest.raises(InvalidSpecError, match="equal length"):
        request_latency_s(SPECS["small"], G, TRUE, input_len=[1, 2], output_len=[5])


def test_a_meshed_node_gives_a_small_tensor_parallel_group_fewer_links() -> None:
    # MI300X's baseboard joins 8 GPUs pairwise: tp=2 reaches one peer (1/7 of the links), so
    # its all-reduces take longer than through a switch; tp=8 spans every link either way
    from gpucast.catalog import llm_model, load_catalog
    from gpucast.catalog.engines import inference_engine

    mi300x, spec = load_catalog().gpu("MI300X"), llm_model("llama-3-70b")
    vllm = inference_engine("vllm")
    shape = {"batch_size": 64, "input_len": 1024, "output_len": 256}

    def comm(tp: int, mesh: int) -> float:
        out = predict_inference(spec, mi300x, vllm, tp=tp, node=NodeLinks(mesh_gpus=mesh), **shape)
        return out.breakdown["communication"]

    assert comm(2, 8) > 1.5 * comm(2, 0)
    assert comm(8, 8) == pytest.approx(comm(8, 0))
    assert comm(4, 8) < comm(2, 8)  # a wider group reaches more of its links


def test_predict_infer_prices_a_meshed_gpu_type_on_its_mesh() -> None:
    # the catalog's MI300X baseboard is a mesh: predict infer at tp=2 pays one peer's link
    import gpucast
    from gpucast.catalog import llm_model, load_catalog
    from gpucast.catalog.engines import inference_engine

    shape = {"batch_size": 64, "input_len": 1024, "output_len": 256}
    app = gpucast.predict_infer(model="llama-3-70b", gpu="MI300X", tp=2, **shape)
    spec, mi300x = llm_model("llama-3-70b"), load_catalog().gpu("MI300X")
    meshed = predict_inference(
        spec, mi300x, inference_engine("vllm"), tp=2, node=NodeLinks(mesh_gpus=8), **shape
    )
    assert app.prediction.latency_s == pytest.approx(meshed.latency_s)
