"""`simulate serverless` / `plan serverless` with a stored cold start (--coldstart-run) and
the bill they name (--billing), through the Python API."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_app_serverless import _trace as trace_folder

import gpucast
from gpucast.domain.errors import InvalidInputError, InvalidSpecError
from gpucast.domain.serverless import ColdStartMeasurement
from gpucast.inputs.coldstart import catalog_gpu_of
from gpucast.store import Store
from gpucast.store.coldstart import coldstart_runs, load_coldstart_run, save_coldstart


def _trace(folder: Path) -> Path:
    """Three functions over 2 h, called every 5, 30 and 60 minutes: 30 calls, 7 of them cold
    under a 10-minute keep-alive; each runs 1 ms."""
    return trace_folder(folder, durations="o,a,f0,1,24\no,a,f1,1,4\no,a,f2,1,2\n")


def _store(**kw: object) -> int:
    """A measured cold start in the test's store (``$GPUCAST_DB``), with known phases."""
    fields: dict[str, object] = {
        "workload": "mlp", "options": {}, "device": "cuda:0", "batch_size": 1,
        "weight_bytes": 10**8, "parameter_tensors": 4, "cuda_context_s": 0.25,
        "weight_read_s": 3.0, "to_device_s": 0.5, "first_inference_s": 0.125,
        "steady_inference_s": 0.001, "cache_dropped": True, "host": "lab",
        "created_at": "2026-01-01T00:00:00", "gpu_name": "Tesla T4", **kw,
    }  # fmt: skip
    with Store(os.environ["GPUCAST_DB"]) as store:
        return save_coldstart(store, ColdStartMeasurement(**fields))  # type: ignore[arg-type]


#: per function (--unit function): the cold starts these tests count are each function's
KW: dict[str, object] = {"models": ["mlp"], "gpu": "T4", "price": 1.0, "unit": "function"}


def test_a_stored_run_changes_the_cold_start_by_exactly_its_phases(tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    run = _store()
    predicted = gpucast.simulate_serverless(trace=trace, **KW)
    measured = gpucast.simulate_serverless(trace=trace, coldstart_run=str(run), **KW)
    p = predicted.functions[0].cold_start
    assert p is not None
    cold = measured.functions[0].cold_start
    assert cold is not None
    assert cold.measured_phases == ("cuda_context", "weight_load", "first_inference")
    assert cold.predicted_phases == ("container",)
    assert cold.container_s == p.container_s
    assert cold.total_s == pytest.approx(p.container_s + 0.25 + 3.0 + 0.5 + 0.125)
    # the slowest call is a cold one: it changes by the measured phases minus predicted ones
    delta = 0.25 + 3.5 + 0.125 - (p.cuda_context_s + p.weight_load_s + p.first_inference_s)
    slow = measured.result.latency_s["max"] - predicted.result.latency_s["max"]
    assert slow == pytest.approx(delta)
    assert list(measured.result.cold_starts) == list(predicted.result.cold_starts)
    d = measured.to_dict()
    model = d["models"][0]["cold_start"]
    assert model["run_id"] == run and model["predicted_phases"] == ["container"]
    assert f"run {run} measured: CUDA context 0.250 s" in d["models"][0]["source"]
    assert "predicted: container" in d["models"][0]["source"]
    assert "cold start" in d["assumptions"] and not d["warnings"]  # measured on a T4
    # plan serverless: 7 of 30 calls are cold, so its p99 is a cold call's
    plan_kw = {**KW, "trace": trace, "policies": ["fixed:10m"], "slo": "p99<100s"}
    plans = [
        gpucast.plan_serverless(**plan_kw).to_dict(),
        gpucast.plan_serverless(coldstart_run="latest", **plan_kw).to_dict(),
    ]
    p99 = [next(o for o in x["options"] if o["kind"] == "serverless")["slo_latency_s"]
           for x in plans]  # fmt: skip
    assert p99[1] - p99[0] == pytest.approx(delta)
    assert plans[1]["models"][0]["cold_start"]["run_id"] == run
    source = next(v for k, v in plans[1]["sources"].items() if k.startswith("model mlp ("))
    assert f"run {run} measured" in source


def test_latest_prefers_a_run_on_the_gpu_and_flags_win(tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    on_t4 = _store()
    _store(gpu_name="NVIDIA A100-SXM4-80GB", weight_read_s=0.1)  # newer, another GPU
    r = gpucast.simulate_serverless(trace=trace, coldstart_run="latest", **KW)
    assert r.functions[0].coldstart_run == on_t4 and not r.warnings
    a100 = gpucast.simulate_serverless(trace=trace, coldstart_run="latest", gpu="A100-80GB",
                                       models=["mlp"], price=1.0)  # fmt: skip
    assert a100.functions[0].coldstart_run == on_t4 + 1
    # --cuda-context-s and --container-s win over the run and the catalog
    given = gpucast.simulate_serverless(
        trace=trace, coldstart_run=str(on_t4), cuda_context_s=0.0, container_s=2.0, **KW
    )
    cold = given.functions[0].cold_start
    assert cold is not None
    assert (cold.container_s, cold.cuda_context_s, cold.weight_load_s) == (2.0, 0.0, 3.5)
    assert "given: container 2.000 s, CUDA context 0.000 s" in given.functions[0].source


def test_a_run_on_another_device_is_used_with_a_warning(tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    cpu = _store(device="cpu", gpu_name=None, cuda_context_s=None, to_device_s=0.0)
    r = gpucast.simulate_serverless(trace=trace, coldstart_run=str(cpu), **KW)
    cold = r.functions[0].cold_start
    assert cold is not None and cold.weight_load_s == 3.0
    assert cold.predicted_phases == ("container", "cuda_context")
    assert any("measured on the CPU of lab, not on a T4" in w for w in r.warnings)
    other = _store(gpu_name="Some Future GPU")
    r = gpucast.simulate_serverless(trace=trace, coldstart_run=str(other), **KW)
    assert any("a GPU the catalog does not know" in w for w in r.warnings)
    h100 = _store(gpu_name="NVIDIA H100 80GB HBM3", batch_size=8)
    r = gpucast.simulate_serverless(trace=trace, coldstart_run=str(h100), **KW)
    assert any("(a H100-SXM), not on a T4" in w for w in r.warnings)
    assert any("first inference was measured at batch 8" in w for w in r.warnings)


def test_a_run_of_another_model_is_refused(tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    bert = _store(workload="bert-base")
    with pytest.raises(InvalidInputError, match="measured bert-base, which is not one of"):
        gpucast.simulate_serverless(trace=trace, coldstart_run=str(bert), **KW)
    wide = _store(options={"hidden": 4096})
    with pytest.raises(InvalidInputError, match="with -o hidden=4096"):
        gpucast.plan_serverless(trace=trace, coldstart_run=str(wide), **KW)
    twice = [str(_store()), str(_store())]
    with pytest.raises(InvalidInputError, match="both measured mlp"):
        gpucast.simulate_serverless(trace=trace, coldstart_run=twice, **KW)
    # QA 37 V #9: an unknown run id did not name the flag
    with pytest.raises(InvalidInputError, match=r"^--coldstart-run 99: no run with id 99"):
        gpucast.simulate_serverless(trace=trace, coldstart_run="99", **KW)
    with pytest.raises(InvalidInputError, match="no stored coldstart run of resnet18"):
        gpucast.simulate_serverless(trace=trace, coldstart_run="latest", models=["resnet18"])


def test_latest_without_a_run_of_one_model_predicts_it(tmp_path: Path) -> None:
    _store()
    r = gpucast.simulate_serverless(
        trace=_trace(tmp_path), coldstart_run="latest", models=["mlp", "resnet18"], price=1.0
    )
    assert [f.coldstart_run for f in r.functions] == [1, None]
    assert any("no stored coldstart run of resnet18; its cold start is predicted" in w
               for w in r.warnings)  # fmt: skip


def test_no_store_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="no store at"):
        gpucast.simulate_serverless(synthetic=5, minutes=10, coldstart_run="1", db=tmp_path / "x")


@pytest.mark.parametrize(
    ("value", "match"),
    [("0", "run ids >= 1"), ("abc", "run ids >= 1"), ("latest,3", "not both"),
     ("3,3", "twice")],
)  # fmt: skip
def test_bad_coldstart_runs(value: str, match: str) -> None:
    with pytest.raises(InvalidSpecError, match=match):
        gpucast.simulate_serverless(synthetic=5, coldstart_run=value)
    with pytest.raises(InvalidSpecError, match="cuda-context-s"):
        gpucast.plan_serverless(synthetic=5, cuda_context_s=-1)


def test_an_llm_trace_takes_no_coldstart_run(tmp_path: Path) -> None:
    trace = tmp_path / "AzureLLMInferenceTrace_conv.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,374,44\n")
    with pytest.raises(InvalidSpecError, match="coldstart-run"):
        gpucast.simulate_serverless(trace=trace, models=["llama-2-7b"], gpu="A100",
                                    coldstart_run="latest")  # fmt: skip
    given = gpucast.simulate_serverless(trace=trace, models=["llama-2-7b"], gpu="A100",
                                        container_s=0.0, cuda_context_s=0.0)  # fmt: skip
    cold = given.functions[0].cold_start
    assert cold is not None and cold.container_s == 0.0 and cold.cuda_context_s == 0.0


def test_the_stored_runs_and_device_names() -> None:
    first, second = _store(), _store(weight_read_s=1.0)
    with Store(os.environ["GPUCAST_DB"]) as store:
        assert [i for i, _ in coldstart_runs(store, "mlp")] == [second, first]
        assert load_coldstart_run(store, first).weight_read_s == 3.0
    names = {
        "Tesla T4": "T4", "NVIDIA A100-SXM4-80GB": "A100-80GB", "NVIDIA L4": "L4",
        "NVIDIA H100 80GB HBM3": "H100-SXM", "NVIDIA L40S": "L40S", "NVIDIA H100 PCIe": "H100-PCIe",
    }  # fmt: skip
    for name, catalog in names.items():
        spec = catalog_gpu_of(name)
        assert spec is not None and spec.name == catalog, name
    assert catalog_gpu_of("Some Future GPU") is None


def test_both_verbs_bill_alike_and_say_how() -> None:
    kw: dict[str, object] = {"synthetic": 40, "minutes": 240, "models": ["mlp"], "price": 1.0}
    for billing in ("instance", "execution"):
        sim = gpucast.simulate_serverless(policy="fixed:10m", billing=billing, **kw)
        plan = gpucast.plan_serverless(policies=["fixed:10m"], billing=billing, **kw)
        d, p = sim.to_dict(), plan.to_dict()
        serverless = next(o for o in p["options"] if o["kind"] == "serverless")
        assert d["billed_gpu_hours"] == pytest.approx(serverless["gpu_hours"])
        assert d["billing"] == p["billing"] == billing
        assert d["assumptions"]["billing"] == p["assumptions"]["billing"]
        assert d["assumptions"]["billing"].startswith(f"{billing}:")
        assert d["cost_usd"] == pytest.approx(d["billed_gpu_hours"])
    # the default is plan serverless's: the instance, keep-alive included
    default = gpucast.simulate_serverless(**kw).to_dict()
    assert default["billing"] == "instance"
    assert default["billed_gpu_hours"] == pytest.approx(default["instance_gpu_hours"])
    assert default["instance_gpu_hours"] > default["execution_gpu_hours"]
    with pytest.raises(InvalidSpecError, match="billing"):
        gpucast.simulate_serverless(synthetic=5, billing="monthly")


def test_a_measured_cold_start_names_its_run_not_the_prediction_validation(
    tmp_path: Path,
) -> None:
    # QA 39 S open: with --coldstart-run the result still named the predicted cold start's
    # validated error; a measured one names its run, and a mixed load says both
    trace = _trace(tmp_path)
    run = _store()
    for verb in (gpucast.simulate_serverless, gpucast.plan_serverless):
        d = verb(trace=trace, coldstart_run=str(run), **KW).to_dict()
        assert d["cold_start_validation"] is None
        assert d["cold_start_measured"] == {"mlp": f"measured: run {run}, mlp on cuda:0 "
                                            "(Tesla T4) of lab, 2026-01-01T00:00:00"}  # fmt: skip
        mixed = verb(trace=trace, coldstart_run="latest", **{**KW, "models": ["mlp", "resnet18"]})
        m = mixed.to_dict()
        assert m["cold_start_validation"]["model"] == "coldstart"
        assert list(m["cold_start_measured"]) == ["mlp"]
        plain = verb(trace=trace, **KW).to_dict()
        assert plain["cold_start_measured"] == {} and plain["cold_start_validation"] is not None
