"""gpucast.simulate_serverless and the cold-start verbs through the Python API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import gpucast
from gpucast.domain.errors import InvalidInputError, InvalidSpecError, NoFeasiblePlanError
from gpucast.domain.serverless import HostRates
from gpucast.store import Store
from gpucast.store.coldstart import load_coldstarts

RATES = HostRates(read_gbs=1.0, memory_gbs=10.0, flops=1e10, per_tensor_s=1e-4, first_call_s=1e-3)


#: Average run time (ms) and count of the trace's functions (f0 every 5 min, f1 every 30)
DURATIONS = "o,a,f0,2000,24\no,a,f1,10,4\n"


def _trace(folder: Path, *, durations: str | None = DURATIONS) -> Path:
    """Three functions over 2 h, called every 5, 30 and 60 minutes (``durations``: the
    percentiles file's rows, None: no such file)."""
    minutes = 120
    header = "HashOwner,HashApp,HashFunction,Trigger," + ",".join(
        str(i) for i in range(1, minutes + 1)
    )
    rows = []
    for f, period in enumerate((5, 30, 60)):
        counts = ["1" if m % period == 0 else "0" for m in range(minutes)]
        rows.append(f"o,a,f{f},http," + ",".join(counts))
    (folder / "invocations_per_function_md.anon.d01.csv").write_text(
        header + "\n" + "\n".join(rows) + "\n"
    )
    if durations is not None:
        (folder / "function_durations_percentiles.anon.d01.csv").write_text(
            "HashOwner,HashApp,HashFunction,Average,Count\n" + durations
        )
    return folder


def test_replays_a_trace_folder(tmp_path: Path) -> None:
    r = gpucast.simulate_serverless(
        trace=_trace(tmp_path), models=["mlp"], gpu="T4", unit="function"
    )
    d = r.to_dict()
    assert d["functions"] == 3
    assert d["invocations"] == 24 + 4 + 2
    # every 5 minutes stays warm under a 10-minute keep-alive; every 30 and 60 do not
    assert list(r.result.cold_starts) == [1, 4, 2]
    assert d["cost_usd"] == pytest.approx(d["billed_gpu_hours"] * d["price_usd_per_hour"])
    assert "Azure Functions 2019 trace day 1" in d["sources"]["trace"]
    assert any("no duration row" in w for w in d["warnings"])
    # --durations trace: f0 runs 2 s per call (the trace's average)
    t = gpucast.simulate_serverless(
        trace=tmp_path, models=["mlp"], durations="trace", unit="function"
    )
    assert t.result.busy_s[0] == pytest.approx(24 * 2.0)


def test_a_trace_folder_missing_a_file_names_it(tmp_path: Path) -> None:
    _trace(tmp_path, durations=None)
    with pytest.raises(InvalidInputError, match=r"function_durations_percentiles\.anon\.d01"):
        gpucast.simulate_serverless(trace=tmp_path)


def test_histogram_against_fixed_on_a_synthetic_day() -> None:
    kw = {"synthetic": 300, "minutes": 1440, "models": ["mlp"], "seed": 3}
    fixed = gpucast.simulate_serverless(policy="fixed:10m", **kw).result
    hist = gpucast.simulate_serverless(policy="histogram", **kw).result
    assert int(fixed.invocations.sum()) == int(hist.invocations.sum())
    assert hist.cold_starts.sum() < fixed.cold_starts.sum()


def test_a_model_larger_than_the_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "huge_model.py").write_text(
        "import torch\n"
        "def factory(**kw):\n"
        "    return (torch.nn.Linear(100000, 60000, device='meta'),\n"
        "            torch.zeros(1, 100000, device='meta'))\n"
    )
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidSpecError, match=r"more than a T4's 14\.2 GiB usable of 16 GiB"):
        gpucast.simulate_serverless(synthetic=5, minutes=10, models=["huge_model:factory"])
    # QA 37 V #5: KaaS ran it on a T4 under 'every GPU holds every function's weights'
    with pytest.raises(InvalidSpecError, match=r"^models: huge_model:factory needs 44\.7 GiB"):
        gpucast.simulate_kaas(models=["resnet50", "huge_model:factory"], gpu="T4")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"synthetic": 5, "policy": "fixed:0s"}, "policy"),
        ({"synthetic": 5, "policy": "fixed:-1m"}, "policy"),
        ({}, "exactly one"),
        ({"synthetic": 5, "trace": "x"}, "exactly one"),
        ({"synthetic": 0}, "synthetic"),
        ({"synthetic": 5, "seed": -1}, "seed"),
        ({"synthetic": 5, "models": [""]}, "models"),
        ({"synthetic": 5, "storage": "floppy"}, "floppy"),
        ({"synthetic": 5, "durations": "cpu"}, "durations"),
    ],
)
def test_bad_requests(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        gpucast.simulate_serverless(**kwargs)


def test_a_synthetic_workload_too_large_for_memory_is_refused_before_it_is_drawn() -> None:
    from gpucast.app.serverless import PlanServerlessRequest, SimulateServerlessRequest

    big = {"synthetic": 10_000, "minutes": 20_160}  # took 6 GB before the bound
    says = r"synthetic: asks for 201,600,000 function-minutes .* --allow-large"
    with pytest.raises(InvalidSpecError, match=says):
        gpucast.simulate_serverless(**big, policy="histogram")
    with pytest.raises(InvalidSpecError, match=says):
        gpucast.plan_serverless(**big)
    # within the ceiling, or past it on purpose: accepted (the request only, nothing drawn)
    SimulateServerlessRequest(synthetic=10_000, minutes=4_000)
    PlanServerlessRequest(**big, allow_large=True)


def test_a_synthetic_workload_is_counted_in_compact_dtypes() -> None:
    from gpucast.inputs.serverless import synthetic_trace
    from gpucast.simulate.serverless import busy_bins

    counts = synthetic_trace(50, minutes=120, seed=0).counts
    assert counts.dtype == np.int32  # 4 bytes a function-minute
    b = busy_bins(counts)
    assert {a.dtype for a in (b.func, b.time, b.gap, b.rank)} == {np.dtype(np.int32)}
    assert b.func.size == np.count_nonzero(counts)


def test_predict_coldstart_on_a_gpu_names_the_bound() -> None:
    r = gpucast.predict_coldstart("resnet18", gpu="T4", storage="s3", network_gbps=10)
    p = r.prediction
    assert p.bound_by == "s3"
    assert p.weight_load_s == pytest.approx(p.weight_bytes / 0.09e9)
    assert p.container_s == 1.0 and p.cuda_context_s == 0.5
    assert "container-start" in r.assumptions
    slow_net = gpucast.predict_coldstart(
        "resnet18", gpu="T4", storage="ebs-gp3-max", network_gbps=1
    ).prediction
    assert slow_net.bound_by == "network" and slow_net.load_gb_per_s == pytest.approx(0.125)
    # QA session 35: weights on the host's own NVMe were bound by --network-gbps 1
    with pytest.raises(InvalidSpecError, match=r"^network-gbps: .*local-nvme is read on the host"):
        gpucast.predict_coldstart("resnet18", gpu="T4", network_gbps=1)
    with pytest.raises(InvalidSpecError, match=r"^network-gbps: "):
        gpucast.simulate_serverless(synthetic=2, minutes=10, models=["mlp"], network_gbps=1)
    given = gpucast.predict_coldstart("resnet18", gpu="T4", container_s=0, cuda_context_s=0)
    assert given.prediction.total_s < p.total_s
    assert not r.validation.validated


def test_predict_coldstart_refuses_a_language_model_its_gpus_cannot_hold() -> None:
    # 141 GB of llama-3-70b on one 24 GB L4 was priced as a 22.3 s cold start; without --tp
    # it now loads on the fewest L4s that hold it (8), said as an assumption
    fewest = gpucast.predict_coldstart("llama-3-70b", gpu="L4")
    assert fewest.device == "8 x L4" and fewest.assumptions["tp"].startswith("8 x L4: the fewest")
    with pytest.raises(InvalidSpecError) as error:
        gpucast.predict_coldstart("llama-3-70b", gpu="L4", tp=1)
    text = str(error.value)
    assert text.startswith("gpu: llama-3-70b needs 131.4 GiB of weights (fp16")
    assert "of one L4's 24 GiB" in text and "use --tp 8" in text
    with pytest.raises(InvalidSpecError, match=r"tp: llama-3-70b needs 65\.7 GiB of weights "
                       r"per GPU on 2 GPUs"):  # fmt: skip
        gpucast.predict_coldstart("llama-3-70b", gpu="L4", tp=2)
    with pytest.raises(InvalidSpecError, match="3 does not divide the 64 attention heads"):
        gpucast.predict_coldstart("llama-3-70b", gpu="L4", tp=3)
    with pytest.raises(InvalidSpecError, match="no 8 T4 GPUs hold it"):
        gpucast.predict_coldstart("llama-3-70b", gpu="T4", tp=8)
    with pytest.raises(InvalidSpecError, match="tp: splits a language model"):
        gpucast.predict_coldstart("resnet18", gpu="T4", tp=2)
    with pytest.raises(InvalidSpecError, match=r"resnet50 needs [\d.]+ GiB at batch 4096, more "
                       r"than a P4's 6\.6 GiB usable of 8 GiB"):  # fmt: skip
        gpucast.predict_coldstart("resnet50", gpu="P4", batch_size=4096)
    eight = gpucast.predict_coldstart("llama-3-70b", gpu="L4", tp=8)
    assert eight.device == "8 x L4" and "8 GPUs' links at once" in eight.prediction.sources["pcie"]


def test_a_language_model_s_first_inference_runs_at_its_precision() -> None:
    from gpucast.catalog import load_catalog
    from gpucast.catalog.llm import llm_model

    # the forward pass was priced at the fp32 peak for an fp16 model
    spec, l4 = llm_model("llama-3-70b"), load_catalog().gpu("L4")
    p = gpucast.predict_coldstart("llama-3-70b", gpu="L4", tp=8).prediction
    assert p.sources["forward"] == "roofline on 8 x L4 (fp16 peak, memory bandwidth)"
    flops = 2.0 * spec.matmul_params_per_token
    forward = max(
        flops / (8 * l4.matrix_tflops("fp16") * 1e12),
        p.weight_bytes / (8 * l4.memory_bandwidth_gbps * 1e9),
    )
    assert p.first_inference_s == pytest.approx(forward + 0.2)
    small = gpucast.predict_coldstart("llama-3-8b", gpu="A10G").prediction
    assert "(fp16 peak" in small.sources["forward"]


def test_predict_coldstart_on_this_cpu_from_given_rates() -> None:
    r = gpucast.predict_coldstart("mlp", storage="local", host_rates=RATES)
    p = r.prediction
    assert r.device == "cpu" and p.bound_by == "local disk"
    assert p.container_s == 0 and p.cuda_context_s == 0
    assert p.weight_load_s == pytest.approx(p.weight_bytes / 1e9 + 6 * 1e-4)
    assert r.host_rates == RATES


def test_without_a_gpu_the_default_storage_is_the_one_the_validation_measured() -> None:
    # QA: the CPU default read at local-nvme's 7 GB/s (6x the measured load) beside a
    # validation figure measured with --storage local
    default = gpucast.predict_coldstart("mlp", host_rates=RATES)
    assert default.prediction.bound_by == "local disk"
    assert (
        default.prediction
        == gpucast.predict_coldstart("mlp", storage="local", host_rates=RATES).prediction
    )
    assert default.validation.validated
    assert default.validation.regime == "cpu, fp32"  # a CPU prediction counts no GPUs
    nvme = gpucast.predict_coldstart("mlp", storage="local-nvme", host_rates=RATES)
    assert nvme.prediction.bound_by == "local-nvme" and not nvme.validation.validated
    assert "validated for --storage local, this machine's disk, only" in nvme.validation.text()
    unvalidated = nvme.validation.to_dict()
    assert unvalidated["data"] is None and unvalidated["command"] is None  # null, not ""
    # on a catalog GPU the default is still local-nvme
    assert gpucast.predict_coldstart("resnet18", gpu="T4").prediction.bound_by == "local-nvme"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"gpu": "T4", "storage": "local"}, "local"),
        ({"gpu": "T4", "network_gbps": -1}, "network"),
        ({"gpu": "T4", "container_s": float("nan")}, "container"),
        ({"gpu": "T5"}, "T5"),
        ({"gpu": "T4", "batch_size": 10**9}, "batch"),
    ],
)
def test_predict_coldstart_bad_input(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        gpucast.predict_coldstart("mlp", **kwargs)


def test_measure_coldstart_is_stored(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    r = gpucast.measure_coldstart("mlp", steady_runs=2, db=db)
    assert r.run_id is not None
    with Store(db) as store:
        stored = load_coldstarts(store, "mlp")
        assert stored == [r.measurement]
        assert store.list_runs(kind="coldstart")[0].median_s == pytest.approx(r.measurement.total_s)
    unsaved = gpucast.measure_coldstart("mlp", steady_runs=2, save=False)
    assert unsaved.run_id is None and unsaved.db is None
    assert np.isfinite(unsaved.measurement.first_inference_s)


def test_a_multiplexed_pool_beside_the_keep_alive() -> None:
    r = gpucast.simulate_serverless(synthetic=100, minutes=600, models=["mlp"], pool_gpus=1)
    pool = r.to_dict()["pool"]
    assert pool["gpus"] == 1 and pool["gpu_hours"] == pytest.approx(10.0)
    assert pool["cost_usd"] == pytest.approx(10.0 * r.price_usd_per_hour)
    assert pool["cold_starts"] == int((r.result.invocations > 0).sum())
    assert gpucast.simulate_serverless(synthetic=5, minutes=10).to_dict()["pool"] is None


def test_plan_serverless_on_a_trace_names_its_sources_and_validation(tmp_path: Path) -> None:
    result = gpucast.plan_serverless(
        trace=_trace(tmp_path), models=["mlp"], gpu="T4", price=1.0, slo="p99<10s",
        policies=["fixed:10m", "histogram"], billing="execution",
    )  # fmt: skip
    d = result.to_dict()
    assert d["functions"] == 3 and d["price_usd_per_hour"] == 1.0
    assert {o["kind"] for o in d["options"]} == {"serverless", "always-on"}
    # three functions of ~0 GiB: one T4 always on for 2 h = US$ 2, serverless bills seconds
    always = next(o for o in d["options"] if o["kind"] == "always-on")
    assert always["gpus"] == 1 and always["cost_usd"] == pytest.approx(2.0)
    assert d["choice"]["kind"] == "serverless"
    assert "Azure Functions 2019 trace" in d["sources"]["trace"]
    assert "billing" in d["assumptions"] and "serverless-keepalive" in str(d["validation"])


def test_plan_serverless_bad_options() -> None:
    with pytest.raises(InvalidSpecError, match="billing"):
        gpucast.plan_serverless(synthetic=5, billing="monthly")
    with pytest.raises(InvalidSpecError, match=r"^policies: "):  # the option's name (QA #15)
        gpucast.plan_serverless(synthetic=5, policies=["weekly"])
    with pytest.raises(InvalidSpecError, match="slo-scope"):
        gpucast.plan_serverless(synthetic=5, slo_scope="x")
    for share in (1.5, 0.0, float("nan")):
        with pytest.raises(InvalidSpecError, match="slo-functions"):
            gpucast.plan_serverless(synthetic=5, slo_functions=share)


def _busy_and_rare_trace(folder: Path) -> Path:
    """Two functions over 2 h: f0 called 100 times every minute, f1 once an hour (each call
    cold under a 10-minute keep-alive)."""
    minutes = 120
    header = "HashOwner,HashApp,HashFunction,Trigger," + ",".join(
        str(i) for i in range(1, minutes + 1)
    )
    busy = ",".join("100" for _ in range(minutes))
    rare = ",".join("1" if m % 60 == 0 else "0" for m in range(minutes))
    (folder / "invocations_per_function_md.anon.d01.csv").write_text(
        f"{header}\no,a,f0,http,{busy}\no,a,f1,timer,{rare}\n"
    )
    (folder / "function_durations_percentiles.anon.d01.csv").write_text(
        "HashOwner,HashApp,HashFunction,Average,Count\no,a,f0,10,12000\no,a,f1,10,2\n"
    )
    return folder


def test_plan_serverless_slo_scope_sees_the_rare_functions_cold_starts(tmp_path: Path) -> None:
    args = dict(
        trace=_busy_and_rare_trace(tmp_path), models=["mlp"], gpu="T4", price=1.0,
        slo="p99<1s", policies=["fixed:10m"], billing="execution", unit="function",
    )  # fmt: skip
    calls = gpucast.plan_serverless(**args).to_dict()  # type: ignore[arg-type]
    functions = gpucast.plan_serverless(slo_scope="functions", **args).to_dict()  # type: ignore[arg-type]
    # 3 cold starts of 12,002 calls: the pooled p99 is warm, serverless is the choice
    assert calls["slo_scope"] == "invocations" and calls["choice"]["kind"] == "serverless"
    assert "over every call of every function" in calls["assumptions"]["slo"]
    # f1's own p99 is a cold start (mlp's > 1 s): half the functions, 95% needed
    assert functions["slo_scope"] == "functions" and functions["slo_function_share"] == 0.95
    assert functions["functions_invoked"] == 2
    serverless = next(o for o in functions["options"] if o["kind"] == "serverless")
    assert serverless["function_share_meeting_slo"] == pytest.approx(0.5)
    assert serverless["function_share_p99_over_slo"] == pytest.approx(0.5)
    assert not serverless["meets_slo"] and functions["choice"]["kind"] == "always-on"
    assert "each invoked function's own p99" in functions["assumptions"]["slo"]
    # both scopes report the shares for every candidate
    for d in (calls, functions):
        assert all("function_share_meeting_slo" in o for o in d["options"])


# -- the Azure LLM inference trace (one function per file) -----------------------------------
LLM_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


def _llm_trace(folder: Path) -> Path:
    """Two deployments: ``code`` every minute from 12:00:30, ``conv`` at 12:00:10, 12:03:10
    and a request beyond llama-2-7b's 4,096-token window."""
    code = "".join(f"2023-11-16 12:{m:02d}:30.5,{100 + m},{10 + m}\n" for m in range(6))
    conv = (
        "2023-11-16 12:00:10.0000000,800,0\n"
        "2023-11-16 12:03:10.1234567,200,50\n"
        "2023-11-16 12:04:00.0,4000,200\n"
    )
    (folder / "AzureLLMInferenceTrace_code.csv").write_text(LLM_HEADER + code)
    (folder / "AzureLLMInferenceTrace_conv.csv").write_text(LLM_HEADER + conv)
    return folder


def test_replays_the_azure_llm_trace_with_token_priced_requests(tmp_path: Path) -> None:
    from gpucast.catalog import load_catalog
    from gpucast.catalog.engines import inference_engine
    from gpucast.catalog.llm import llm_model
    from gpucast.predict.llm_infer import request_latency_s

    r = gpucast.simulate_serverless(
        trace=_llm_trace(tmp_path), models=["llama-2-7b"], gpu="A100", policy="fixed:3m"
    )
    d = r.to_dict()
    assert d["functions"] == 2 and r.result.functions == ("code", "conv")
    assert d["arrival_process"].startswith("replayed: the Azure LLM trace's request timestamps")
    # aligned on conv's first request (12:00:10): code's lie in minutes 0..5, conv's in 0 and 3;
    # conv's 4,200-token request exceeds the context window and is dropped
    assert list(r.result.invocations) == [6, 2]
    assert any("1 of 3 requests need more than" in w for w in d["warnings"])
    assert any("0 prompt or output tokens" in w for w in d["warnings"])
    # conv idles 2 minutes (1, 2) between its calls: a 3-minute keep-alive keeps it warm
    assert list(r.result.cold_starts) == [1, 1]
    spec, engine = llm_model("llama-2-7b"), inference_engine("vllm")
    gpu = load_catalog().gpu("A100")
    code = request_latency_s(
        spec, gpu, engine, input_len=100 + np.arange(6), output_len=10 + np.arange(6)
    )
    conv = request_latency_s(spec, gpu, engine, input_len=[800, 200], output_len=[1, 50])
    assert r.result.busy_s == pytest.approx([code.sum(), conv.sum()])
    # latency percentiles from the requests' own service times (not one mean per function)
    assert d["latency_s"]["max"] == pytest.approx(
        max(code.max() + r.functions[0].cold_start_s, conv.max() + r.functions[1].cold_start_s),
        rel=0.05,
    )
    assert r.functions[0].memory_gib > 13.0  # the weights (13.5 GB) and the engine's KV cache
    # one file is one function; a folder of them is the whole trace
    one = gpucast.simulate_serverless(
        trace=tmp_path / "AzureLLMInferenceTrace_code.csv", models=["llama-2-7b"], gpu="A100"
    )
    assert one.result.functions == ("code",) and list(one.result.invocations) == [6]


def test_plan_serverless_on_the_azure_llm_trace(tmp_path: Path) -> None:
    kw: dict[str, Any] = dict(
        trace=_llm_trace(tmp_path), models=["llama-2-7b"], gpu="A100", price=2.0,
        policies=["fixed:10m"],
    )  # fmt: skip
    r = gpucast.plan_serverless(slo="p85<60s", **kw)
    d = r.to_dict()
    assert d["invocations"] == 8 and d["arrival_process"].startswith("replayed")
    assert d["rejected_beyond_context"] == 1  # conv's 4,200 tokens: a miss, not an invocation
    assert d["choice"] is not None
    # 1 of 9 beyond the window: 88.9% at most meet any SLO, so no p99 is met (plan serve's rule)
    with pytest.raises(NoFeasiblePlanError, match=r"1 of 9 requests \(11.1%\) need more"):
        gpucast.plan_serverless(slo="p99<60s", **kw)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"models": ["resnet50"]}, "resnet50 is not a language model"),
        ({"models": ["llama-2-7b"], "durations": "trace"}, "durations"),
        ({"models": ["llama-2-70b"], "gpu": "T4"}, "models: llama-2-70b"),
    ],
)
def test_llm_trace_bad_input(tmp_path: Path, kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(InvalidSpecError, match=match):
        gpucast.simulate_serverless(trace=_llm_trace(tmp_path), **kwargs)


def test_a_language_model_needs_a_token_trace() -> None:
    with pytest.raises(InvalidSpecError, match="llama-2-7b is a language model"):
        gpucast.simulate_serverless(synthetic=5, models=["llama-2-7b"])


def test_an_arrival_csv_has_no_tokens_for_a_language_model(tmp_path: Path) -> None:
    path = tmp_path / "arrivals.csv"
    path.write_text("arrival_s\n0.5\n70\n")
    with pytest.raises(InvalidSpecError, match="llama-2-7b is a language model: its requests "
                       "need token counts, which this trace has not"):  # fmt: skip
        gpucast.simulate_serverless(trace=path, models=["llama-2-7b"])


def test_a_token_csv_of_one_s_own_is_not_called_the_azure_trace(tmp_path: Path) -> None:
    """QA 41 QF F11: an arrival_s CSV with prompt_tokens,output_tokens replays as a language
    model's requests, and its provenance names that file's format, not the Azure LLM trace."""
    path = tmp_path / "mine.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n0.5,100,10\n61,200,20\n")
    d = gpucast.simulate_serverless(trace=path, models=["llama-2-7b"], gpu="A100").to_dict()
    assert d["invocations"] == 2
    assert "Azure" not in d["arrival_process"] and "Azure" not in d["sources"]["trace"]
    assert d["arrival_process"].startswith("replayed: mine.csv's arrival_s timestamps")
    assert d["sources"]["trace"].startswith("arrival_s CSV with token columns (mine 2 requests")
    azure = gpucast.simulate_serverless(trace=_llm_trace(tmp_path), models=["llama-2-7b"])
    assert azure.to_dict()["sources"]["trace"].startswith("Azure LLM inference trace (")


def test_the_published_azure_llm_trace(shared_data: Path) -> None:
    folder = shared_data / "azure_llm_2023"
    if not (folder / "AzureLLMInferenceTrace_conv.csv").is_file():
        pytest.skip("../shared/data/azure_llm_2023 is absent")
    r = gpucast.simulate_serverless(trace=folder, models=["mistral-7b"], gpu="A100")
    d = r.to_dict()
    assert r.result.functions == ("code", "conv")
    assert d["invocations"] == 8819 + 19366  # every request within mistral-7b's 32k window
    assert d["horizon_s"] == pytest.approx(59 * 60.0)
    assert d["cold_starts"] == 2  # both deployments are called every minute of the hour


def test_a_warmup_on_a_trace_folder(tmp_path: Path) -> None:
    """f0, f1, f2 called every 5, 30 and 60 minutes over 2 h, kept 1 h: without a warm-up
    each one's first call is cold; after a 1 h one none is, and only its hour is counted."""
    trace = _trace(tmp_path)
    kw: dict[str, object] = {
        "trace": trace, "models": ["mlp"], "policy": "fixed:1h", "unit": "function"
    }  # fmt: skip
    cold = gpucast.simulate_serverless(**kw)
    warm = gpucast.simulate_serverless(**kw, warmup="1h")
    assert cold.result.cold_starts.tolist() == [1, 1, 1]
    assert warm.result.cold_starts.tolist() == [0, 0, 0]
    assert warm.result.invocations.tolist() == [12, 2, 1]
    d, before = warm.to_dict(), cold.to_dict()
    assert d["warmup_s"] == 3600.0 and d["measured_s"] == 3600.0 and before["warmup_s"] == 0
    # loaded all of the counted hour, each of the three: 3 GPU-hours billed by instance
    assert d["instance_gpu_hours"] == pytest.approx(3.0)
    assert before["instance_gpu_hours"] > d["instance_gpu_hours"]
    assert d["assumptions"]["warm-up"].startswith("the first 1 h simulated")
    assert before["assumptions"]["warm-up"].startswith("none: every function starts unloaded")
    plan = gpucast.plan_serverless(
        trace=trace, models=["mlp"], policies=["fixed:1h"], warmup="60m", slo="p99<1s",
        slo_scope="functions", unit="function",
    )  # fmt: skip
    p = plan.to_dict()
    assert p["warmup_s"] == 3600.0 and p["options"][0]["cold_starts"] == 0
    assert "warm-up" in p["assumptions"]


def test_a_warmup_below_an_hour_reads_in_minutes(tmp_path: Path) -> None:
    """QA 37 V #11: --warmup 1 (a bare number: 1 s, rounded up to the 1-minute bin) was '1 min'
    in the header and 'the first 0.01667 h' in the assumption."""
    d = gpucast.simulate_serverless(trace=_trace(tmp_path), models=["mlp"], warmup="1").to_dict()
    assert d["warmup_s"] == 60.0
    assert d["assumptions"]["warm-up"].startswith("the first 1 min simulated")
    assert "are those of the 1.983 h after it" in d["assumptions"]["warm-up"]


@pytest.mark.parametrize(
    ("warmup", "match"),
    [
        ("2h", r"warmup: 2 h is not shorter than the trace \(2 h\)"),
        ("25h", r"warmup: 25 h is not shorter than the trace \(2 h\)"),
        ("3d", "not shorter than the trace"),
        ("soon", "warmup: must be a duration like 90s"),
        ("-1h", "warmup"),
        (-60.0, "warmup: must be >= 0"),
    ],
)
def test_a_bad_warmup(tmp_path: Path, warmup: object, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        gpucast.simulate_serverless(trace=_trace(tmp_path), models=["mlp"], warmup=warmup)
    with pytest.raises(InvalidInputError, match=match):
        gpucast.plan_serverless(trace=_trace(tmp_path), models=["mlp"], warmup=warmup)


@pytest.mark.parametrize(
    ("args", "text"),
    [
        ((0, 2, ["f0", "f1"], 2), "function f0"),  # one model a function
        ((0, 1, ["f0", "f1", "f2"], 3), "all 3 functions"),
        ((0, 1, ["f0"], 1), "function f0"),
        ((1, 2, [f"f{i}" for i in range(20)], 20), "functions f1, f3, f5, ... (10 of 20)"),
        ((2, 3, ["a", "b", "c", "d", "e"], 5), "function c (1 of 5)"),
        ((1, 2, None, 7), "3 of 7 functions (i mod 2 = 1)"),  # --unit app: no names
    ],
)
def test_served_by_names_the_functions_a_model_serves(args: tuple, text: str) -> None:
    from gpucast.app.serverless import served_by

    assert served_by(*args) == text


def test_a_function_running_longer_than_the_trace_is_named_in_a_warning(tmp_path: Path) -> None:
    """QA 35 S #9: an Average of 1e9 ms (11.6 days) in a 2-hour trace is run, and named."""
    folder = _trace(tmp_path, durations="o,a,f0,1e9,24\no,a,f1,10,4\n")
    sim = gpucast.simulate_serverless(trace=folder, models=["mlp"], durations="trace")
    plan = gpucast.plan_serverless(
        trace=folder, models=["mlp"], gpu="T4", price=1.0, durations="trace"
    )
    for warnings in (sim.to_dict()["warnings"], plan.to_dict()["warnings"]):
        (long_run,) = [w for w in warnings if "longer" in w]
        assert "1 function of function_durations_percentiles" in long_run
        assert "o/a/f0 (11.6 days)" in long_run and "f1" not in long_run
        assert "(2 h)" in long_run
    assert not any("longer" in w for w in gpucast.simulate_serverless(
        trace=_trace(tmp_path), models=["mlp"]).to_dict()["warnings"])  # fmt: skip


def test_a_folder_of_another_day_names_the_days_it_has(tmp_path: Path) -> None:
    """QA 37 V #7: a folder with day 3's files, read as day 1 (the default), said only that
    day 1's file was missing; it now names the days there and the --day to give."""
    _trace(tmp_path)
    for path in tmp_path.glob("*.d01.csv"):
        path.rename(path.with_name(path.name.replace(".d01.", ".d03.")))
    with pytest.raises(
        InvalidInputError, match=r"missing invocations_per_function_md\.anon\.d01"
    ) as e:
        gpucast.simulate_serverless(trace=tmp_path)
    assert "the folder has day 3: give --day 3" in str(e.value)
    gpucast.simulate_serverless(trace=tmp_path, day=3, models=["mlp"])


def test_plan_serverless_lists_a_policy_given_twice_once() -> None:
    """QA 37 V #8: --policies fixed:5m,fixed:5m listed the same candidate twice; fixed:10m
    and fixed:600s are one policy too."""
    d = gpucast.plan_serverless(
        synthetic=5, minutes=30, models=["mlp"], policies=["fixed:5m", "fixed:5m", "fixed:10m",
        "fixed:600s", "histogram"],
    ).to_dict()  # fmt: skip
    names = sorted(o["name"] for o in d["options"] if o["kind"] == "serverless")
    assert names == ["serverless fixed:10m", "serverless fixed:5m", "serverless histogram"]


def test_a_generated_load_without_invocations_says_what_to_raise() -> None:
    """QA 37 V #18: --synthetic 1 --minutes 1 printed 'nothing to simulate' and no way on."""
    from gpucast.app.serverless_text import simulate_lines

    d = gpucast.simulate_serverless(synthetic=1, minutes=1, models=["mlp"]).to_dict()
    assert d["invocations"] == 0
    assert simulate_lines(d)[-1] == (
        "  no invocations in the trace: nothing to simulate; 45% of generated functions are "
        "invoked at most hourly: raise --synthetic or --minutes"
    )


def test_plan_serverless_without_invocations_is_one_error(tmp_path: Path) -> None:
    """QA 37 V #19: every candidate 'missed' at p99 nan and the choice line advised cutting
    the execution ('the lowest is serverless fixed:10m at nan ms')."""
    with pytest.raises(InvalidInputError, match=r"^synthetic: the load has no invocations") as e:
        gpucast.plan_serverless(synthetic=1, minutes=1, models=["mlp"])
    assert str(e.value).endswith("raise --synthetic or --minutes (45% of generated functions "
                                 "are invoked at most hourly)")  # fmt: skip
    trace = _trace(tmp_path)
    path = tmp_path / "invocations_per_function_md.anon.d01.csv"
    header, *rows = path.read_text().splitlines()
    ids = [row.split(",")[:4] for row in rows]  # every count 0
    minutes = len(header.split(",")) - 4
    path.write_text("\n".join([header, *(",".join([*i, *["0"] * minutes]) for i in ids)]) + "\n")
    with pytest.raises(InvalidInputError, match=r"^trace: the load has no invocations"):
        gpucast.plan_serverless(trace=trace, models=["mlp"])


def test_a_function_on_two_rows_of_the_counts_file_is_said(tmp_path: Path) -> None:
    """QA 37 V #16: the same HashOwner/HashApp/HashFunction on two rows replayed as two
    functions without a word."""
    trace = _trace(tmp_path)
    path = tmp_path / "invocations_per_function_md.anon.d01.csv"
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines, lines[1]]) + "\n")
    r = gpucast.simulate_serverless(trace=trace, models=["mlp"], unit="function")
    assert len(r.result.functions) == len(lines)  # each row its own function, as before
    assert any(w.startswith("1 row of invocations_per_function_md.anon.d01.csv repeats a "
                            "function of an earlier row") for w in r.warnings)  # fmt: skip


def test_a_latency_of_minutes_reads_as_a_duration() -> None:
    """QA 37 V #12: a 600 s average duration printed `latency p50 600,000.0 ms`."""
    from gpucast.app.serverless_text import latency_text

    assert latency_text(600.0) == "10 min" and latency_text(12.5) == "12.5 s"
    assert latency_text(1.27) == "1,270.0 ms" and latency_text(2e-5) == "0.020 ms"
    assert latency_text(float("nan")) == "- ms" and latency_text(float("inf")) == "inf ms"


def test_simulate_serverless_names_the_validation_plan_serverless_names(tmp_path: Path) -> None:
    # QA 39 S #1: simulate printed the keep-alive simulator's figures without their validated
    # error, which plan serverless on the same load names
    kw = {"trace": _trace(tmp_path), "models": ["mlp"], "gpu": "T4"}
    simulated = gpucast.simulate_serverless(**kw).to_dict()["validation"]
    planned = gpucast.plan_serverless(**kw).to_dict()["validation"]
    assert simulated == planned and simulated["model"] == "serverless-keepalive"


def test_simulate_and_plan_serverless_say_what_their_cold_start_assumes() -> None:
    # QA 39 S #6: the cold start's defaults (container 1 s, CUDA context 0.5 s, first call) and
    # the loader note, which predict coldstart prints, were dropped by simulate/plan serverless
    kw = {"synthetic": 5, "minutes": 60, "models": ["mlp", "bert-base"], "gpu": "T4"}
    for verb in (gpucast.simulate_serverless, gpucast.plan_serverless):
        said = verb(**kw, storage="ebs-io2").to_dict()["assumptions"]
        assert "set --container-s" in said["cold start container-start"]
        assert "set --cuda-context-s" in said["cold start cuda-context"]
        assert "first-call" in " ".join(said) and "parallel loaders" in said["cold start loader"]
        # the EBS volume's rate is not bounded by an instance's EBS link: said, not silent
        assert "not bounded" in said["cold start instance-ebs"]
    assert (
        "cold start instance-ebs" not in gpucast.simulate_serverless(**kw).to_dict()["assumptions"]
    )


def test_predict_coldstart_from_ebs_without_an_instance_says_its_link_is_unbounded() -> None:
    # QA 39 S #6: 4.19 GB/s from io2 on a T4, faster than any g4dn's EBS link, said nowhere
    r = gpucast.predict_coldstart(workload="bert-large", gpu="T4", storage="ebs-io2")
    said = r.to_dict()["assumptions"]["instance-ebs"]
    assert "not bounded" in said and "--instance" in said and "ebs_bandwidth.csv" in said
    given = gpucast.predict_coldstart(
        workload="bert-large", gpu="T4", storage="ebs-io2", ebs_gbps=4
    ).to_dict()["assumptions"]
    assert "instance-ebs" not in given


def test_a_function_without_a_duration_row_is_named_with_its_file(tmp_path: Path) -> None:
    # QA 39 S #4: "1 of 3 functions have no duration row" named neither the file nor the function
    r = gpucast.simulate_serverless(trace=_trace(tmp_path), models=["mlp"], unit="function")
    (said,) = [w for w in r.warnings if "no duration row" in w]
    assert "function_durations_percentiles.anon.d01.csv" in said and "o/a/f2" in said


def test_simulate_and_plan_serverless_name_the_cold_start_validation() -> None:
    # QA 39 S #2: predict coldstart names its cold start's validated error; the same predicted
    # cold start in simulate/plan serverless named none
    kw = {"synthetic": 5, "minutes": 60, "models": ["mlp"], "gpu": "T4"}
    predicted = gpucast.predict_coldstart(workload="mlp", gpu="T4").to_dict()["validation"]
    for verb in (gpucast.simulate_serverless, gpucast.plan_serverless):
        said = verb(**kw).to_dict()["cold_start_validation"]
        assert said == predicted and said["model"] == "coldstart" and not said["validated"]


def test_simulate_and_plan_serverless_take_instance_and_ebs_gbps() -> None:
    # QA 39 S open: the unbounded-EBS assumption of simulate/plan serverless pointed at predict
    # coldstart's --instance/--ebs-gbps, which these verbs lacked
    kw = {"synthetic": 5, "minutes": 60, "models": ["mlp"], "gpu": "T4", "storage": "ebs-io2"}
    predicted = gpucast.predict_coldstart(
        workload="mlp", gpu="T4", storage="ebs-io2", instance="g4dn.xlarge"
    ).to_dict()
    for verb in (gpucast.simulate_serverless, gpucast.plan_serverless):
        said = verb(**kw).to_dict()["assumptions"]["cold start instance-ebs"]
        assert "--instance TYPE or --ebs-gbps N" in said and "predict coldstart" not in said
        d = verb(**kw, instance="g4dn.xlarge").to_dict()
        cold = d["models"][0]["cold_start"]
        assert cold["bound_by"] == "instance-ebs"
        assert cold["load_gb_per_s"] == pytest.approx(predicted["load_gb_per_s"])
        assert "g4dn.xlarge's dedicated EBS" in d["assumptions"]["cold start instance-ebs"]
        own = verb(**kw, ebs_gbps=1.0).to_dict()
        assert own["models"][0]["cold_start"]["load_gb_per_s"] == pytest.approx(0.125)
        assert "cold start instance-ebs" not in own["assumptions"]
        for bad, field_name in (
            ({"instance": "g5.xlarge"}, "instance"),  # an A10G instance, not a T4
            ({"instance": "g9.huge"}, "instance"),
            ({"instance": "g4dn.xlarge", "ebs_gbps": 3.0}, "ebs-gbps"),
            ({"ebs_gbps": float("nan")}, "ebs-gbps"),
            ({"ebs_gbps": 3.0, "storage": "s3"}, "ebs-gbps"),
        ):
            with pytest.raises(InvalidSpecError) as err:
                verb(**{**kw, **bad})
            assert err.value.field == field_name, err.value


def test_a_small_model_s_weight_load_is_not_printed_as_no_time() -> None:
    """QA 41 QF F4: mlp's 7.5 MB at local NVMe's 7 GB/s (about 1 ms) read ``weights 0.00 s``;
    its model line keeps three significant digits, as ``format_seconds`` writes a time."""
    from gpucast.domain.units import format_seconds

    d = gpucast.simulate_serverless(synthetic=2, minutes=60, models=["mlp"], gpu="T4").to_dict()
    (model,) = d["models"]
    weights_s = model["cold_start"]["weight_load_s"]
    assert 0 < weights_s < 5e-3
    assert f"(weights {format_seconds(weights_s)} bound by local-nvme)" in model["source"]
    assert "0.00 s" not in model["source"]


def test_the_keep_alive_validation_names_the_deployment_s_precision(tmp_path: Path) -> None:
    """QA 41 QF F6: a language model runs fp16 (vLLM); the keep-alive ``validated:`` regime
    read fp32 beside the cold start's fp16. Both name the precision the models run at."""
    llm = gpucast.simulate_serverless(
        trace=_llm_trace(tmp_path), models=["llama-2-7b"], gpu="A100"
    ).to_dict()
    assert llm["validation"]["regime"].startswith("A100-40GB, fp16")
    assert llm["cold_start_validation"]["regime"].startswith("A100-40GB, fp16")
    dnn = gpucast.simulate_serverless(synthetic=2, minutes=60, models=["mlp"], gpu="T4")
    assert dnn.to_dict()["validation"]["regime"].startswith("T4, fp32")


def test_a_trace_path_that_does_not_exist_says_so(tmp_path: Path) -> None:
    """QA 41 QF: ``--trace /nonexistent`` read ``not a folder; give the folder holding the Azure
    Functions 2019 trace files``, though a file (an LLM trace, an arrival_s CSV) is read too."""
    with pytest.raises(InvalidInputError, match="no such file or folder") as info:
        gpucast.simulate_serverless(trace=tmp_path / "nope.csv", models=["mlp"])
    assert "an arrival_s CSV" in str(info.value) and "not a folder" not in str(info.value)
