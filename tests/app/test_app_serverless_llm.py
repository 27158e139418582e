"""The serverless verbs on an Azure LLM trace: instances of several GPUs, the always-on
deployment sized as ``plan serve`` sizes it, and the options a trace does not take."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import gpucast
from gpucast.app._serverless_llm import fewest
from gpucast.domain.errors import InvalidSpecError, NoFeasiblePlanError

HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


def _file(folder: Path, rows: list[tuple[float, int, int]], name: str = "code") -> Path:
    """An Azure LLM trace file: requests at ``rows`` seconds after 12:00:00 with their tokens."""
    lines = []
    for t, inp, out in rows:
        minute, second = divmod(t, 60.0)
        lines.append(f"2023-11-16 12:{int(minute):02d}:{second:09.6f},{inp},{out}\n")
    path = folder / f"AzureLLMInferenceTrace_{name}.csv"
    path.write_text(HEADER + "".join(lines))
    return path


def test_an_instance_of_a_model_split_over_two_gpus_bills_both(tmp_path: Path) -> None:
    trace = _file(tmp_path, [(m * 60.0 + 5, 300, 40) for m in range(4)])
    r = gpucast.simulate_serverless(
        trace=trace, models=["llama-3-70b"], gpu="H100-SXM", policy="fixed:10m"
    )
    assert r.functions[0].gpus == 2  # 141 GB of fp16 weights on 80 GiB GPUs
    res = r.result
    instance_h = float((np.maximum(res.loaded_s, res.busy_s) + res.cold_start_s).sum()) / 3600
    d = r.to_dict()
    assert d["billed_gpu_hours"] == pytest.approx(2 * instance_h)
    assert d["execution_gpu_hours"] == pytest.approx(
        2 * float((res.busy_s + res.cold_start_s).sum()) / 3600
    )
    assert d["cost_usd"] == pytest.approx(2 * instance_h * d["price_usd_per_hour"])
    assert d["models"][0]["gpus"] == 2
    assert "2 x H100-SXM" in d["assumptions"]["gpus per instance"]
    assert "prefill then decode of its tokens" in d["assumptions"]["execution"]
    # the memory held warm is already both GPUs' share, counted once
    assert r.functions[0].memory_gib > 80.0


def test_an_llm_function_says_what_its_cold_start_assumes(tmp_path: Path) -> None:
    # QA 39 F8 #2: the LLM path dropped llm_cold_start's assumptions, which the DNN path carries
    trace = _file(tmp_path, [(m * 60.0 + 5, 300, 40) for m in range(4)])
    kw = {"trace": trace, "models": ["mistral-7b"], "gpu": "H100-SXM", "storage": "ebs-io2"}
    for verb in (gpucast.simulate_serverless, gpucast.plan_serverless):
        said = verb(**kw).to_dict()["assumptions"]
        assert "set --container-s" in said["cold start container-start"]
        assert "set --cuda-context-s" in said["cold start cuda-context"]
        assert "parallel loaders" in said["cold start loader"]
        assert "not bounded" in said["cold start instance-ebs"]


def test_a_pool_too_small_for_an_instance_names_the_flag_and_the_need(tmp_path: Path) -> None:
    trace = _file(tmp_path, [(5.0, 300, 40)])
    kw = dict(trace=trace, models=["llama-3-70b"], gpu="H100-SXM")
    with pytest.raises(InvalidSpecError) as err:
        gpucast.simulate_serverless(pool_gpus=1, **kw)  # type: ignore[arg-type]
    text = str(err.value)
    assert text.startswith(
        "pool-gpus: a pool of 1 x H100-SXM holds 75.0 GiB usable (of 80 GiB each)"
    )  # the one usable-memory rule (session 33): was "holds 80 GiB"
    assert "function code (llama-3-70b) needs" in text and "on 2 x H100-SXM per instance" in text
    assert "--pool-gpus 2 or more" in text and "--gpu" in text
    pool = gpucast.simulate_serverless(pool_gpus=2, **kw).pool  # type: ignore[arg-type]
    assert pool is not None and pool.busy_gpu_s == pytest.approx(
        2 * gpucast.simulate_serverless(**kw).result.busy_s.sum()  # type: ignore[arg-type]
    )


def test_a_trace_takes_neither_minutes_nor_a_day_it_has_not(tmp_path: Path) -> None:
    trace = _file(tmp_path, [(5.0, 300, 40)])
    with pytest.raises(InvalidSpecError, match=r"^day: .*one recording .*drop --day"):
        gpucast.simulate_serverless(trace=trace, models=["llama-2-7b"], gpu="A100", day=2)
    with pytest.raises(InvalidSpecError, match=r"^minutes: .*a --trace is replayed whole"):
        gpucast.simulate_serverless(trace=trace, models=["llama-2-7b"], gpu="A100", minutes=30)
    with pytest.raises(InvalidSpecError, match=r"^day: .*--synthetic N generates its own"):
        gpucast.simulate_serverless(synthetic=5, models=["mlp"], day=2)
    # a generated workload is a day long unless --minutes says otherwise
    assert gpucast.simulate_serverless(synthetic=5, models=["mlp"]).result.horizon_s == 86400.0


def test_fewest_grows_then_bisects() -> None:
    asked: list[int] = []

    def meets(r: int) -> bool:
        asked.append(r)
        return r >= 5

    assert fewest(meets, 1, 32) == 5
    assert asked == [1, 2, 3, 6, 4, 5]  # x1.3 (at least +1) twice, then doubling
    assert fewest(lambda r: r >= 5, 7, 32) == 7
    assert fewest(lambda r: False, 3, 10) == 10


def test_plan_serverless_sizes_an_llm_always_on_as_plan_serve_does(tmp_path: Path) -> None:
    """Two requests a second for five minutes: one continuously batching GPU serves them;
    sized a request at a time (the peak minute's seconds of batch-1 service), it took more."""
    rows = [(i * 0.5, 200 + 7 * (i % 50), 60 + (i % 40)) for i in range(600)]
    trace = _file(tmp_path, rows)
    slo_s = 30.0
    r = gpucast.plan_serverless(
        trace=trace, models=["llama-2-7b"], gpu="A100", price=2.0, slo=f"p99<{slo_s:g}s",
        policies=["fixed:10m"],
    )  # fmt: skip
    plan = gpucast.plan_llm_serve(
        model="llama-2-7b", trace=trace, gpus=("A100",), no_disaggregation=True,
        slo_ttft_ms=slo_s * 1e3, slo_percentile=99.0,
    )  # fmt: skip
    best = plan.best
    assert best is not None
    always = next(o for o in r.plan.options if o.kind == "always-on")
    # a loose SLO: plan serve's pick already meets it end to end
    assert always.gpus == best.tp * best.replicas
    assert always.meets_slo and always.slo_latency_s <= slo_s
    assert always.cost_usd == pytest.approx(always.gpus * 2.0 * r.plan.horizon_s / 3600)
    d = r.to_dict()
    assert d["always_on_sizing"] == "plan serve"
    assert "plan serve" in d["assumptions"]["always-on"] and "plan serve:" in always.detail
    # the batch-1 peak-minute sizing it replaces
    fn = r.models[0]
    peak = math.ceil(120 * fn.forward_s / (60 * 0.7))
    assert always.gpus < peak
    assert not [o for o in r.plan.options if o.kind == "pool"]


def test_an_end_to_end_slo_adds_replicas_to_plan_serves_pick(tmp_path: Path) -> None:
    """Plan serve sizes first tokens; the SLO here is each request's whole latency, which a
    batch of long outputs stretches: more replicas than plan serve's TTFT pick."""
    rows = [(i * 0.25, 100, 400) for i in range(480)]
    trace = _file(tmp_path, rows)
    r = gpucast.plan_serverless(
        trace=trace, models=["llama-2-7b"], gpu="A100", price=2.0, slo="p99<8s",
        policies=["fixed:10m"],
    )  # fmt: skip
    plan = gpucast.plan_llm_serve(
        model="llama-2-7b", trace=trace, gpus=("A100",), no_disaggregation=True,
        slo_ttft_ms=8e3, slo_percentile=99.0,
    )  # fmt: skip
    assert plan.best is not None
    always = next(o for o in r.plan.options if o.kind == "always-on")
    assert always.gpus > plan.best.tp * plan.best.replicas
    assert always.meets_slo and always.slo_latency_s <= 8.0
    assert "for end-to-end p99" in always.detail


def test_no_always_on_candidate_when_plan_serve_finds_none(tmp_path: Path) -> None:
    """An SLO below a request's own prefill: plan serve has no deployment, so there is no
    always-on candidate (not one sized a request at a time), and a warning says why."""
    trace = _file(tmp_path, [(i * 10.0, 2000, 50) for i in range(12)])
    r = gpucast.plan_serverless(
        trace=trace, models=["llama-2-7b"], gpu="A100", price=2.0, slo="p99<10ms",
        policies=["fixed:10m"],
    )  # fmt: skip
    assert {o.kind for o in r.plan.options} == {"serverless"}
    assert r.plan.choice is None and r.plan.always_on_sizing == "none"
    assert any(w.startswith("no always-on candidate: code (llama-2-7b)") for w in r.warnings)
    assert r.assumptions["always-on"].startswith("none:")


def test_each_function_s_model_line_names_its_function(tmp_path: Path) -> None:
    """The QA pass: two functions of one language model printed two identical "model
    llama-2-7b ..." lines; and a 59-minute trace printed "0.983333 h"."""
    from gpucast.app.serverless_text import simulate_lines

    _file(tmp_path, [(m * 60.0 + 5, 300, 40) for m in range(59)], "code")
    _file(tmp_path, [(m * 60.0 + 7, 900, 200) for m in range(59)], "conv")
    kw = dict(trace=tmp_path, models=["llama-2-7b"], gpu="A100-80GB")
    d = gpucast.simulate_serverless(**kw).to_dict()  # type: ignore[arg-type]
    assert [m["served_by"] for m in d["models"]] == ["function code", "function conv"]
    lines = simulate_lines(d)
    assert lines[0].startswith("2 functions on A100-80GB, 59 min, ")
    assert [line.split(": model ")[0] for line in lines if ": model " in line] == [
        "  function code", "  function conv"
    ]  # fmt: skip
    plan = gpucast.plan_serverless(**kw).to_dict()  # type: ignore[arg-type]
    keys = [k for k in plan["sources"] if k.startswith("model ")]
    assert keys == ["model llama-2-7b (function code)", "model llama-2-7b (function conv)"]


def test_requests_beyond_the_context_are_misses_in_every_verb(tmp_path: Path) -> None:
    """One rule (session 39): a request beyond the context window is rejected at arrival by
    every deployment and counts as a miss in every percentile and SLO share. Before, simulate
    serverless and plan serverless dropped it silently (QA 37 V #17: plan serve said no
    deployment meets p99 while every serverless policy met it); 25% beyond: no verb meets p99,
    and plan serverless says so in plan serve's one line."""
    from gpucast.app.serverless_text import simulate_lines

    rows = [(i * 10.0, 2000, 50) for i in range(9)] + [(95.0 + i, 5000, 50) for i in range(3)]
    trace = _file(tmp_path, rows)
    kw: dict[str, Any] = dict(trace=trace, models=["llama-2-7b"], gpu="A100")
    d = gpucast.simulate_serverless(slo="p99<10s", **kw).to_dict()
    assert d["invocations"] == 9 and d["rejected_beyond_context"] == 3
    assert d["slo"]["share_within"] <= 0.75 and d["slo"]["met"] is False
    assert math.isinf(d["latency_s"]["p99"]) and math.isfinite(d["latency_s"]["mean"])
    assert "  rejected: 3 beyond the context window" in "\n".join(simulate_lines(d))
    with pytest.raises(NoFeasiblePlanError) as planned:
        gpucast.plan_serverless(price=2.0, slo="p99<10s", policies=["fixed:10m"], **kw)
    assert planned.value.message.startswith(
        "3 of 12 requests (25.0%) need more than llama-2-7b's context window of 4,096 tokens"
    )
    assert "every deployment of it rejects them, so none serves 99% of the requests" in (
        planned.value.message
    )
    assert "an SLO at the 75th percentile or lower (--slo pNN<LATENCY)" in str(planned.value)
    with pytest.raises(NoFeasiblePlanError, match=r"3 of 12 requests \(25.0%\) need more"):
        gpucast.plan_llm_serve(
            model="llama-2-7b", trace=trace, gpus=("A100",), slo_ttft_ms=10_000.0,
            slo_percentile=99.0,
        )  # fmt: skip


@pytest.mark.parametrize(("served", "beyond", "meets"), [(197, 3, False), (199, 1, True)])
def test_serverless_and_plan_serve_agree_on_a_p99_beside_requests_beyond_the_context(
    tmp_path: Path, served: int, beyond: int, meets: bool
) -> None:
    """Above 1% of the requests beyond the context window no verb meets a p99, below it the
    served ones decide (the serverless side counts them as plan serve does)."""
    from gpucast.app.serverless_text import plan_header_lines

    rows = [(i * 0.25, 300, 40) for i in range(served)]
    rows += [(30.0 + i, 5000, 50) for i in range(beyond)]
    trace = _file(tmp_path, rows)
    kw: dict[str, Any] = dict(trace=trace, models=["llama-2-7b"], gpu="A100")
    d = gpucast.simulate_serverless(slo="p99<30s", policy="fixed:10m", **kw).to_dict()
    assert d["rejected_beyond_context"] == beyond and d["invocations"] == served
    assert d["slo"]["share_within"] <= 1 - beyond / (served + beyond) + 1e-12
    assert d["slo"]["met"] is meets
    serve: dict[str, Any] = dict(
        model="llama-2-7b", trace=trace, gpus=("A100",), slo_ttft_ms=30_000.0, slo_percentile=99.0
    )
    plan = dict(price=2.0, slo="p99<30s", policies=["fixed:10m"], **kw)
    if meets:
        r = gpucast.plan_serverless(**plan)
        assert r.plan.choice is not None and r.to_dict()["rejected_beyond_context"] == beyond
        assert all(o.meets_slo for o in r.plan.options)
        header = "\n".join(plan_header_lines(r.to_dict()))
        assert f"  rejected: {beyond} beyond the context window" in header
        assert gpucast.plan_llm_serve(**serve).best is not None
        return
    for verb, kwargs in ((gpucast.plan_serverless, plan), (gpucast.plan_llm_serve, serve)):
        with pytest.raises(NoFeasiblePlanError, match=f"{beyond} of 200 requests"):
            verb(**kwargs)
