"""gpucast.predict_infer: a published LLM, a GPU, an engine -> TTFT, latency, tokens/s, memory."""

from __future__ import annotations

import json

import pytest

import gpucast
from gpucast.domain.errors import InvalidInputError, InvalidSpecError

ISSUE = {"model": "llama-2-7b", "gpu": "A100-80GB", "batch_size": 16, "input_len": 1024,
         "output_len": 1024}  # fmt: skip


def test_the_issue_example_gives_the_fields_it_asks_for() -> None:
    result = gpucast.predict_infer(**ISSUE, framework="vllm", tp=1, precision="fp16")
    out = json.loads(json.dumps(result.to_dict()))
    for key in ("ttft_s", "latency_s", "tokens_per_s", "memory_gib", "fits", "validation", "data"):
        assert key in out
    assert out["fits"] and out["tp"] == 1 and out["engine"] == "vllm"
    assert 0 < out["ttft_s"] < out["latency_s"]
    assert out["tokens_per_s"] == pytest.approx(16 * 1024 / out["latency_s"])
    assert "LLM-Inference-Bench" in out["data"]
    # validated on A100-40GB, not on the 80 GB card: the result says so
    assert not out["validation"]["validated"] and "A100-40GB" in out["validation"]["regime"]
    # and its band is the model-left-out one widened to the unvalidated prior
    band = out["interval_80"]
    assert band["regimes"] == ["model_unseen", "prior"]
    assert "fitted on no rows" in band["note"]
    for key in ("latency_s", "ttft_s", "tokens_per_s", "total_tokens_per_s"):
        assert band[key][0] < out[key] < band[key][1], key
    # the latency's parts name their unit, as predict llm-train's breakdown_s (QA session 37)
    assert "breakdown" not in out
    assert sum(out["breakdown_s"].values()) == pytest.approx(out["latency_s"])


def test_the_band_follows_what_the_prediction_does_not_know() -> None:
    """The fitted GPU states the model-left-out band; another vendor's GPU without rows the
    envelope with what the MI250's rows showed (slower than predicted); the MI250, priced
    with vLLM's own factor there, that regime's band; an engine on priors the
    engine-left-out one."""
    common = {"model": "llama-3-8b", "batch_size": 16, "input_len": 1024, "output_len": 256}
    a100 = gpucast.predict_infer(**common, gpu="A100-40GB")
    mi250 = gpucast.predict_infer(**common, gpu="MI250")
    mi300x = gpucast.predict_infer(**common, gpu="MI300X")
    eager = gpucast.predict_infer(**common, gpu="A100-40GB", framework="eager-pytorch")
    assert a100.band.regimes == ("model_unseen",)
    assert mi250.band.regimes == ("gpu_calibrated",)
    assert mi300x.band.regimes == ("model_unseen", "gpu_unseen")
    assert eager.band.regimes == ("engine_unseen",)
    lo, hi = a100.interval("latency_s")
    assert lo < a100.prediction.latency_s < hi
    assert mi300x.band.latency[1] > 2 * a100.band.latency[1]  # ROCm ran 1.3-5x slower
    m_lo, m_hi = mi250.interval("latency_s")
    assert m_lo < mi250.prediction.latency_s < m_hi and m_hi / m_lo < 2
    assert any("vLLM on MI250: every term x1.89" in n for n in mi250.prediction.notes)
    r_lo, r_hi = a100.interval("tokens_per_s")
    assert r_lo == pytest.approx(a100.prediction.tokens_per_s * a100.prediction.latency_s / hi)
    assert r_hi > a100.prediction.tokens_per_s > r_lo


def test_a_validated_regime_carries_its_error() -> None:
    result = gpucast.predict_infer(
        model="meta-llama/Meta-Llama-3-8B", gpu="A100-40GB", batch_size=32, input_len=512,
        output_len=512, framework="TensorRT-LLM", tp=2,
    )  # fmt: skip
    assert result.prediction.model == "llama-3-8b"
    assert result.validation.validated and "leave-one-model-out" in (result.validation.error or "")


def test_default_tp_is_the_fewest_gpus_that_hold_the_model() -> None:
    result = gpucast.predict_infer(
        model="llama-2-70b", gpu="A100-80GB", input_len=1024, output_len=256
    )
    assert result.prediction.tp == 2 and result.prediction.fits
    assert "fewest GPUs" in result.assumptions["gpus"]


def test_a_cache_bound_batch_hints_at_the_degree_that_pays_for_its_gpus() -> None:
    """llama-3-70b fp16 fits on 2 H100s with room for 9 of 64 sequences; 4 GPUs hold all of
    them and give more generated tokens/s per GPU: the result says so, with that degree's
    own prediction. A batch the cache holds gets no hint."""
    common = {"model": "llama-3-70b", "gpu": "H100", "input_len": 2048, "output_len": 256}
    starved = gpucast.predict_infer(**common, batch_size=64)
    assert starved.prediction.tp == 2 and starved.prediction.waves > 1
    at4 = gpucast.predict_infer(**common, batch_size=64, tp=4)
    assert at4.prediction.tokens_per_s / 4 > 1.1 * starved.prediction.tokens_per_s / 2
    assert "--tp 4 holds all 64 sequences at once" in starved.hint
    assert f"{at4.prediction.tokens_per_s:,.0f} generated tokens/s" in starved.hint
    assert starved.to_dict()["hint"] == starved.hint
    assert at4.hint == "" and at4.prediction.waves <= 1
    assert gpucast.predict_infer(**common, batch_size=4).hint == ""


def test_priors_only_engine_says_so() -> None:
    result = gpucast.predict_infer(
        model="llama-2-7b", gpu="H100", input_len=256, output_len=256, framework="pytorch"
    )
    assert "priors only" in result.engine.provenance()
    assert not result.validation.validated


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"model": "llama-2-70b", "gpu": "A100-80GB", "tp": 1},
            "tp: llama-2-70b in fp16 does not fit",
        ),
        ({"model": "gpt-3-175b", "gpu": "L4"}, "does not fit on L4 at any tensor-parallel degree"),
        ({"input_len": 5000}, "input-len: is beyond llama-2-7b's context window of 4096"),
        ({"output_len": 4000}, "output-len: prompt + output"),
        ({"framework": "sglang"}, "unknown framework 'sglang'"),
        ({"tp": 3}, "tp: cannot split llama-2-7b"),
        ({"model": "resnet50"}, "for a CNN's serving latency use gpucast simulate serve"),
        ({"precision": "fp4"}, "precision: must be one of fp16, bf16, fp8, int8, int4"),
        ({"batch_size": 0}, "batch-size: must be an integer >= 1"),
        ({"max_num_seqs": 0}, "max-num-seqs: must be an integer >= 1"),
    ],
)
def test_bad_input_is_one_line_naming_the_field(options: dict, message: str) -> None:
    base = {"model": "llama-2-7b", "gpu": "A100-40GB", "input_len": 1024, "output_len": 512}
    with pytest.raises(InvalidInputError) as caught:
        gpucast.predict_infer(**{**base, **options})
    text = str(caught.value)
    assert message in text and "\n" not in text


def test_a_cnn_is_sent_to_simulate_serve_before_the_llm_fields_are_asked() -> None:
    # QA 40 V #4: `predict infer --model resnet50 --gpu T4` asked for --input-len first; given
    # it, the user learnt that the verb does not cover the model
    with pytest.raises(InvalidInputError) as caught:
        gpucast.predict_infer(model="resnet50", gpu="T4", batch_size=8)
    assert "for a CNN's serving latency use gpucast simulate serve" in str(caught.value)


def test_an_engine_is_refused_on_a_gpu_it_does_not_run_on() -> None:
    """TensorRT-LLM and DeepSpeed-MII run on NVIDIA GPUs only; vLLM also on AMD and Intel;
    llama.cpp and eager PyTorch anywhere. The refusal is one line naming the engine, the GPU
    and engines that run there, in predict infer and simulate serve alike."""
    from gpucast.catalog.engines import inference_engine

    assert not inference_engine("tensorrt-llm").runs_on("amd")
    assert inference_engine("vllm").runs_on("intel") and inference_engine("llama.cpp").runs_on(
        "amd"
    )
    common = {"model": "llama-3-8b", "batch_size": 8, "input_len": 512, "output_len": 64}
    with pytest.raises(InvalidSpecError, match="TensorRT-LLM runs on nvidia GPUs only") as err:
        gpucast.predict_infer(**common, gpu="MI250", framework="tensorrt-llm")
    assert err.value.field == "framework" and "--framework vllm" in str(err.value)
    with pytest.raises(InvalidSpecError, match="DeepSpeed-MII runs on nvidia GPUs only"):
        gpucast.simulate_llm_serve(
            model="llama-3-8b", gpu="Gaudi2", rate=1, duration_s=5, framework="deepspeed-mii"
        )
    assert gpucast.predict_infer(**common, gpu="Gaudi2", framework="vllm").prediction.fits


@pytest.mark.parametrize("name", ["H100-NVL", "H100-PCIe"])
def test_tensor_parallel_inference_on_bridged_cards_crosses_pcie_beyond_a_pair(
    name: str,
) -> None:
    """H100 NVL / PCIe cards are bridged in pairs (catalog systems.csv): tp=2 all-reduces over
    the bridge, tp=4 and 8 over PCIe at the figure catalog pcie_allreduce.csv gives a Gen5 group
    of that size (as for GPUs without NVLink; below the x16 link's nominal 64 GB/s) -- slower
    than the same GPUs behind a switch would be -- and the result says so; predict infer and
    the pure model agree."""
    from gpucast.catalog import load_catalog
    from gpucast.catalog.engines import inference_engine
    from gpucast.catalog.llm import llm_model
    from gpucast.catalog.pcie_allreduce import pcie_allreduce_gb_per_s
    from gpucast.domain.parallel import NodeLinks
    from gpucast.inputs.llm_serving import node_links
    from gpucast.predict.llm_infer import predict_inference

    spec, gpu, vllm = (
        llm_model("llama-3-70b"),
        load_catalog().gpu(name),
        inference_engine("vllm"),
    )
    common = {"model": "llama-3-70b", "batch_size": 16, "input_len": 1024, "output_len": 64}
    two = gpucast.predict_infer(**common, gpu=name, tp=2)
    assert not any("cross PCIe" in n for n in two.prediction.notes)
    assert two.assumptions["intra-node links"].endswith("the bridge to its partner")
    for tp in (4, 8):
        figure = pcie_allreduce_gb_per_s(gpu.pcie_generation, tp)
        assert figure is not None and figure.value < 64.0
        group = gpucast.predict_infer(**common, gpu=name, tp=tp)
        said = f"tp={tp}'s all-reduces cross PCIe at {figure.value:g} GB/s"
        assert any(said in n for n in group.prediction.notes)
        assert "pcie_allreduce.csv" in group.assumptions["intra-node links"]
        shape = {"batch_size": 16, "input_len": 1024, "output_len": 64, "tp": tp}
        switched = predict_inference(spec, gpu, vllm, **shape)
        bridged = predict_inference(spec, gpu, vllm, **shape, node=node_links(gpu)[1])
        nominal = predict_inference(spec, gpu, vllm, **shape, node=NodeLinks(bridged=True))
        assert bridged.breakdown["communication"] > 3 * switched.breakdown["communication"]
        assert bridged.breakdown["communication"] > nominal.breakdown["communication"]
        assert group.prediction.latency_s == pytest.approx(bridged.latency_s)


def test_tensor_parallel_inference_on_pcie_cards_takes_the_published_all_reduce_rate() -> None:
    """L40S has no NVLink: predict infer prices tp=4's all-reduces at the bus bandwidth
    catalog pcie_allreduce.csv gives a PCIe Gen4 group (24 GB/s), not the x16 link's 32,
    and says where the figure comes from; the pure model with the link's rate is faster."""
    from gpucast.catalog import load_catalog
    from gpucast.catalog.engines import inference_engine
    from gpucast.catalog.llm import llm_model
    from gpucast.predict.llm_infer import predict_inference

    common = {"model": "llama-3-70b", "batch_size": 16, "input_len": 1024, "output_len": 64}
    four = gpucast.predict_infer(**common, gpu="L40S", tp=4, precision="fp8")
    links = four.assumptions["intra-node links"]
    assert links.startswith("24 GB/s per GPU: NCCL all-reduce over PCIe")
    assert "pcie_allreduce.csv" in links
    spec, gpu = llm_model("llama-3-70b"), load_catalog().gpu("L40S")
    nominal = predict_inference(
        spec, gpu, inference_engine("vllm"), tp=4, precision="fp8",
        batch_size=16, input_len=1024, output_len=64,
    )  # fmt: skip
    assert four.prediction.breakdown["communication"] == pytest.approx(
        nominal.breakdown["communication"] * 32 / 24, rel=0.05
    )


def test_the_batch_states_its_gpu_power_and_energy_per_generated_token() -> None:
    """Busy for its prefill and decode work at the power model's draw, idle for the rest: a
    compute-bound prefill-heavy batch draws more per GPU than one sequence decoding alone."""
    heavy = gpucast.predict_infer(
        model="llama-3-8b", gpu="A100-40GB", batch_size=64, input_len=2048, output_len=16, tp=1
    )
    alone = gpucast.predict_infer(
        model="llama-3-8b", gpu="A100-40GB", batch_size=1, input_len=128, output_len=512, tp=1
    )
    for r in (heavy, alone):
        e, p = r.energy, r.prediction
        assert 0.1 * 400.0 < e["avg_power_w"] < 400.0  # the A100-40GB's default limit
        assert e["batch_energy_j"] == pytest.approx(e["avg_power_w"] * p.tp * p.latency_s)
        assert e["energy_j_per_token"] == pytest.approx(
            e["batch_energy_j"] / (p.batch_size * p.output_len)
        )
        assert "power model" in r.assumptions["energy"] and r.to_dict()["energy"] == e
    assert heavy.energy["avg_power_w"] > alone.energy["avg_power_w"]


def test_the_note_names_the_limit_that_splits_the_batch_into_turns() -> None:
    base = {"model": "gpt-j-6b", "gpu": "H100-SXM", "framework": "tensorrt-llm",
            "precision": "fp8", "batch_size": 1024, "input_len": 128,
            "output_len": 128}  # fmt: skip
    capped = gpucast.predict_infer(**base).prediction  # the engine's default: 256 at once
    assert capped.waves == pytest.approx(4.0)
    note = next(n for n in capped.notes if "turns" in n)
    assert "TensorRT-LLM runs at most 256 sequences at once" in note
    assert "--max-num-seqs" in note and "KV cache holds" not in note
    # built for the whole batch, the KV cache (room for ~1,100 such sequences) holds it
    whole = gpucast.predict_infer(**base, max_num_seqs=1024).prediction
    assert whole.waves == pytest.approx(1.0) and whole.concurrent_sequences == 1024
    assert whole.tokens_per_s > capped.tokens_per_s
    # where memory is the limit, the note says so, whatever the cap
    long = {**base, "model": "llama-2-70b", "precision": "fp16", "tp": 4, "gpu": "A100-40GB",
            "batch_size": 64, "input_len": 1024, "output_len": 1024,
            "max_num_seqs": 1000}  # fmt: skip
    kv = gpucast.predict_infer(**long).prediction
    assert kv.waves > 1 and any(n.startswith("the KV cache holds") for n in kv.notes)


def test_a_batch_in_turns_says_its_ttft_is_the_first_turns() -> None:
    """QA 40 I #3: 1,024 sequences in 4 turns read "TTFT 5.43 s", batch 256's figure, unsaid:
    the last turn's sequences get their first token some 58 s in."""
    ask = {"model": "llama-3-8b", "gpu": "H100-SXM", "input_len": 1024, "output_len": 256}
    one_turn = gpucast.predict_infer(**ask, batch_size=256).prediction
    turns = gpucast.predict_infer(**ask, batch_size=1024).prediction
    assert turns.waves == pytest.approx(4.0) and turns.ttft_s == one_turn.ttft_s
    assert not any("first turn's" in n for n in one_turn.notes)
    note = next(n for n in turns.notes if "turns" in n)
    last = turns.latency_s * 3 / 4 + turns.ttft_s  # three turns' time, then its own prefill
    assert f"the TTFT ({turns.ttft_s:.3g} s) is the first turn's" in note
    assert f"the last turn's first token comes about {last:.3g} s in" in note


def test_fp8_matmuls_reach_the_share_of_their_peak_the_training_fit_found() -> None:
    import dataclasses

    from gpucast.catalog import load_catalog
    from gpucast.catalog.engines import inference_engine
    from gpucast.catalog.llm import llm_model
    from gpucast.catalog.steptime import shipped_step_time_model
    from gpucast.predict.llm_infer import predict_inference

    engine = inference_engine("tensorrt-llm")
    model = shipped_step_time_model()
    assert model is not None and model.eta_compute_ is not None
    ratio = model.eta_compute_["fp8"] / model.eta_compute_["tensor16"]
    assert engine.fp8_compute_ratio == pytest.approx(ratio) and 0.5 < ratio < 1.0
    assert "MLPerf Training" in engine.fp8_source
    spec, catalog = llm_model("llama-2-7b"), load_catalog()
    ask = {"batch_size": 32, "input_len": 2048, "output_len": 1, "precision": "fp8"}
    at_peak = dataclasses.replace(engine, fp8_compute_ratio=1.0)
    h100 = catalog.gpu("H100-SXM")
    slow = predict_inference(spec, h100, engine, **ask).breakdown["prefill_compute"]
    fast = predict_inference(spec, h100, at_peak, **ask).breakdown["prefill_compute"]
    assert slow == pytest.approx(fast / ratio)
    # a GPU without fp8 tensor cores runs fp8 weights' matmuls at its 16-bit peak, unscaled
    a100 = catalog.gpu("A100-80GB")
    assert predict_inference(spec, a100, engine, **ask).ttft_s == pytest.approx(
        predict_inference(spec, a100, at_peak, **ask).ttft_s
    )
    result = gpucast.predict_infer(model="llama-2-7b", gpu="H100-SXM", precision="fp8",
                                   input_len=512, output_len=64)  # fmt: skip
    assert any(f"fp8 matmuls at {ratio:.2f}x" in n for n in result.prediction.notes)


@pytest.mark.parametrize(
    ("options", "fits_with"),
    [
        ({"tp": 2}, "int4"),  # fp16: int8 needs 8 T4s, which no node holds
        ({"tp": 2, "precision": "int8"}, "int4"),  # said "use --tp 8 (or --precision int8 ..."
        ({}, "int4"),  # the default degree: said "(1, 2, 4, 8): at tp=8", then int8
    ],
)
def test_a_model_no_node_holds_names_the_node_and_a_precision_that_fits(
    options: dict, fits_with: str
) -> None:
    """QA 38 N #1-2: Llama-2-70B on T4s (the largest T4 node holds 4) named tp=8 and suggested
    int8, which the next run refused in turn; now the refusal names the field, the degrees one
    node holds, the figures at 4 GPUs and the lighter weights that fit there -- in predict
    infer and simulate serve alike."""
    ask = {"model": "llama-2-70b", "gpu": "T4", **options}
    with pytest.raises(InvalidInputError) as infer:
        gpucast.predict_infer(**ask, batch_size=1, input_len=128, output_len=16)
    with pytest.raises(InvalidInputError) as serve:
        gpucast.simulate_llm_serve(**ask, rate=1, duration_s=5, input_len=128, output_len=16)
    for caught in (infer, serve):
        text = str(caught.value)
        assert text.startswith("gpu: llama-2-70b in ") and "\n" not in text
        assert "(1, 2, 4: the largest T4 node holds 4): at tp=4 " in text
        assert f"use --precision {fits_with} (it fits on 4 x T4)" in text
        assert "--tp 8" not in text and "tp=8" not in text
    four = gpucast.predict_infer(
        **{**ask, "tp": 4, "precision": fits_with}, batch_size=1, input_len=128, output_len=16
    )
    assert four.prediction.fits


def test_the_fix_names_no_precision_already_given_or_one_that_does_not_fit() -> None:
    """int4 weights that need more GPUs than a node holds are not told to use int4, and a
    model that no lighter precision fits on is told to use a larger GPU."""
    with pytest.raises(InvalidInputError) as caught:
        gpucast.predict_infer(
            model="gpt-3-175b", gpu="T4", precision="int4", input_len=16, output_len=16
        )
    assert "--precision int4" not in str(caught.value)
    with pytest.raises(InvalidInputError) as caught:
        gpucast.predict_infer(model="llama-3.1-405b", gpu="L4", input_len=16, output_len=16)
    assert "use a GPU with more memory (int8 or int4 weights do not fit either)" in str(
        caught.value
    )


def test_a_kv_cache_precision_the_engine_cannot_keep_is_refused() -> None:
    # QA 38 N #7: --kv-precision int4 was accepted (and priced) for vLLM, whose KV cache is
    # fp16 / bf16 / fp8 only
    job = {"model": "llama-3-8b", "gpu": "H100-SXM", "batch_size": 8, "input_len": 512,
           "output_len": 128}  # fmt: skip
    for call in (
        lambda: gpucast.predict_infer(**job, kv_precision="int4"),
        lambda: gpucast.plan_serve(
            model="llama-3-8b:5", gpu=["H100-SXM"], kv_precision="int4", slo_tpot_ms=50
        ),
    ):
        with pytest.raises(InvalidSpecError) as info:
            call()
        line = str(info.value)
        assert line.startswith("kv-precision: vLLM keeps its KV cache in fp16, bf16 or fp8 only")
        assert "docs.vllm.ai" in line and "\n" not in line
    trt = gpucast.predict_infer(**job, kv_precision="int8", framework="tensorrt-llm")
    assert trt.prediction.kv_precision == "int8"
    with pytest.raises(InvalidSpecError, match="TensorRT-LLM keeps its KV cache in fp16, bf16"):
        gpucast.predict_infer(**job, kv_precision="int4", framework="tensorrt-llm")
