"""``--unit app|function`` on an Azure Functions 2019 trace folder and the apps' memory file
(issue #19 item 4), through the Python API, on small files written in the documented format."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import gpucast
from gpucast.domain.errors import InvalidSpecError
from gpucast.store.datasets.azure_functions import MEMORY_COLUMNS

MINUTES = 120
#: the minutes each function is called in: app o1/a1's two functions alternate every 7
#: minutes (each alone every 14); app o2/a2's g1 and g2 share every 30th minute, g3 at 15, 75
CALLS = {
    ("o1", "a1", "f1"): range(0, MINUTES, 14),
    ("o1", "a1", "f2"): range(7, MINUTES, 14),
    ("o2", "a2", "g1"): range(0, MINUTES, 30),
    ("o2", "a2", "g2"): range(0, MINUTES, 30),
    ("o2", "a2", "g3"): range(15, MINUTES, 60),
}
#: the apps' memory: AverageAllocatedMb 150 and 400 MB, then their percentiles 1 .. 100
MEMORY = (
    "o1,a1,1000,150,100,110,120,140,160,200,250,300\n"
    "o2,a2,500,400,300,310,320,390,410,500,550,600\n"
)


def app_trace(folder: Path, *, memory: str | None = MEMORY, durations: str = "") -> Path:
    """The two apps of :data:`CALLS` over 2 h (``memory``: the memory file's rows, None: no
    memory file; ``durations``: the duration file's rows)."""
    header = "HashOwner,HashApp,HashFunction,Trigger," + ",".join(
        str(m) for m in range(1, MINUTES + 1)
    )
    rows = [
        ",".join((*key, "http", *("1" if m in minutes else "0" for m in range(MINUTES))))
        for key, minutes in CALLS.items()
    ]
    (folder / "invocations_per_function_md.anon.d01.csv").write_text(
        header + "\n" + "\n".join(rows) + "\n"
    )
    (folder / "function_durations_percentiles.anon.d01.csv").write_text(
        "HashOwner,HashApp,HashFunction,Average,Count\n" + durations
    )
    if memory is not None:
        (folder / "app_memory_percentiles.anon.d01.csv").write_text(
            ",".join(MEMORY_COLUMNS) + "\n" + memory
        )
    return folder


KW: dict[str, object] = {"models": ["mlp"], "gpu": "T4", "price": 1.0, "policy": "fixed:10m"}


def test_an_apps_functions_keep_it_warm_for_each_other(tmp_path: Path) -> None:
    """fixed:10m. Per function every call is cold: f1 and f2 each idle 13 minutes between
    calls, g1/g2 29, g3 59. Per app (the default) a1 is called every 7 minutes: only its
    first call is cold; a2's busy minutes 0, 15, 30, 60, 75, 90 are 14+ minutes apart: 6."""
    trace = app_trace(tmp_path)
    app = gpucast.simulate_serverless(trace=trace, **KW)
    function = gpucast.simulate_serverless(trace=trace, unit="function", **KW)
    assert app.result.functions == ("o1/a1", "o2/a2")
    assert app.result.invocations.tolist() == [18, 10]
    assert app.result.cold_starts.tolist() == [1, 6]
    assert function.result.cold_starts.tolist() == [9, 9, 4, 4, 2]
    assert function.result.cold_starts.tolist() == function.result.invocations.tolist()
    d, f = app.to_dict(), function.to_dict()
    assert (d["unit"], d["units"], d["functions"]) == ("app", 2, 5)
    assert (f["unit"], f["units"], f["functions"]) == ("function", 5, 5)
    assert d["cold_starts"] == 7 and f["cold_starts"] == 28
    assert d["assumptions"]["unit"].startswith("app: the 5 functions' invocations merged")
    assert d["assumptions"]["one instance"].startswith("one instance per app")
    assert f["assumptions"]["unit"].startswith("function (--unit function)")


def test_unit_function_gives_the_per_function_replay(tmp_path: Path) -> None:
    """``--unit function`` is the replay as it was: the keep-alive simulator over the parsed
    per-function table, each function its model's figures."""
    from gpucast.domain.serverless import parse_policy
    from gpucast.simulate.serverless import simulate_keep_alive
    from gpucast.store.datasets.azure_functions import read_invocation_counts

    trace = app_trace(tmp_path)
    r = gpucast.simulate_serverless(trace=trace, unit="function", **KW)
    model = r.functions[0]
    counts = read_invocation_counts(trace / "invocations_per_function_md.anon.d01.csv")
    direct = simulate_keep_alive(
        counts.counts, policy=parse_policy("fixed:10m"), exec_s=model.forward_s,
        cold_s=model.cold_start_s, memory_gib=model.memory_gib,
    )  # fmt: skip
    assert r.result.cold_starts.tolist() == direct.cold_starts.tolist()
    assert r.result.latency_s == direct.latency_s
    assert r.result.wasted_memory_gib_s.tolist() == direct.wasted_memory_gib_s.tolist()
    assert r.result.instance_s == direct.instance_s
    d = r.to_dict()
    assert d["warm_idle_app_memory_mb_hours"] is None  # memory is per app
    assert not any("app_memory" in w for w in d["warnings"])


def test_the_apps_memory_is_summarised_and_counted_while_they_idle(tmp_path: Path) -> None:
    """a1 (150 MB) idles loaded 6 minutes in each of its 17 gaps: 102 minutes; a2 (400 MB)
    10 minutes after each of its 6 busy minutes (the last 29 before the end): 60 minutes.
    So 150 x 102 / 60 + 400 x 60 / 60 = 655 MB-hours."""
    r = gpucast.simulate_serverless(trace=app_trace(tmp_path), **KW)
    assert r.result.idle_s is not None
    assert r.result.idle_s.tolist() == [102 * 60.0, 60 * 60.0]
    d = r.to_dict()
    assert d["warm_idle_app_memory_mb_hours"] == pytest.approx(655.0)
    memory = d["apps"]["memory"]
    assert memory["file"] == "app_memory_percentiles.anon.d01.csv"
    assert (memory["apps_with_row"], memory["apps_without_row"]) == (2, 0)
    assert memory["average_allocated_mb"] == {
        "p50": 275.0, "p95": 387.5, "p99": 397.5, "max": 400.0, "total": 550.0,
    }  # fmt: skip
    assert memory["median_over_apps_mb"]["pct50"] == 265.0
    assert memory["median_over_apps_mb"]["pct100"] == 450.0
    apps = d["apps"]
    assert (apps["apps"], apps["functions"], apps["functions_per_app_max"]) == (2, 5, 3)
    assert apps["single_function_app_share"] == 0.0
    assert "app_memory_percentiles.anon.d01.csv" in d["assumptions"]["app memory"]
    assert not any("app_memory" in w or "apps have no row" in w for w in d["warnings"])


def test_without_a_memory_file_the_apps_replay_with_a_warning(tmp_path: Path) -> None:
    r = gpucast.simulate_serverless(trace=app_trace(tmp_path, memory=None), **KW)
    d = r.to_dict()
    assert d["cold_starts"] == 7 and d["apps"]["memory"] is None
    assert d["warm_idle_app_memory_mb_hours"] is None
    assert any(
        w.startswith("no app_memory_percentiles.anon.d01.csv in the trace folder")
        for w in d["warnings"]
    )
    assert d["assumptions"]["app memory"].startswith("none: no app memory file")
    # per function the apps' memory is not used: no warning about it
    f = gpucast.simulate_serverless(trace=tmp_path, unit="function", **KW).to_dict()
    assert not any("app_memory" in w for w in f["warnings"])


def test_malformed_memory_rows_are_skipped_counted_and_the_app_left_out(tmp_path: Path) -> None:
    memory = MEMORY.replace("o2,a2,500,400", "o2,a2,500,lots") + "o3,a3,1\n"
    d = gpucast.simulate_serverless(trace=app_trace(tmp_path, memory=memory), **KW).to_dict()
    skipped = next(w for w in d["warnings"] if w.startswith("skipped"))
    assert skipped.startswith(
        "skipped 2 malformed row(s) of app_memory_percentiles.anon.d01.csv; first: "
        "app_memory_percentiles.anon.d01.csv, line 3: SampleCount or an AverageAllocatedMb "
        "column is not a number"
    )
    assert any(w.startswith("1 of 2 apps have no row") for w in d["warnings"])
    assert d["apps"]["memory"]["apps_without_row"] == 1
    assert d["warm_idle_app_memory_mb_hours"] == pytest.approx(150 * 102 / 60)  # a1 only


def test_an_app_loads_each_distinct_model_once(tmp_path: Path) -> None:
    """models mlp, resnet50: function i serves model i mod 2, so f1 (mlp) and f2 (resnet50)
    of a1 load both: their weights and the larger working set; the cold start pays the
    container and CUDA context once, then each model's weights and first call."""
    trace = app_trace(tmp_path)
    kw = {**KW, "models": ["mlp", "resnet50"]}
    r = gpucast.simulate_serverless(trace=trace, **kw)
    mlp, resnet = r.functions
    assert mlp.cold_start is not None and resnet.cold_start is not None
    gib = 1024**3
    working = max(f.memory_gib - f.weight_bytes / gib for f in (mlp, resnet))
    held = (mlp.weight_bytes + resnet.weight_bytes) / gib + working
    res = r.result
    assert res.idle_s is not None
    assert res.wasted_memory_gib_s[0] / res.idle_s[0] == pytest.approx(held)
    shared = mlp.cold_start.container_s + mlp.cold_start.cuda_context_s
    own = sum(f.cold_start_s - f.cold_start.container_s - f.cold_start.cuda_context_s
              for f in (mlp, resnet))  # type: ignore[union-attr]  # fmt: skip
    assert res.cold_start_s[0] / res.cold_starts[0] == pytest.approx(shared + own)
    assert r.to_dict()["apps"]["apps_with_several_models"] == 2
    # per function each keeps its own model: the app holds one copy, functions one each
    one = gpucast.simulate_serverless(trace=trace, **{**KW, "models": ["resnet50"]})
    each = gpucast.simulate_serverless(
        trace=trace, unit="function", **{**KW, "models": ["resnet50"]}
    )
    assert one.result.idle_s is not None
    assert one.result.wasted_memory_gib_s[0] / one.result.idle_s[0] == pytest.approx(
        each.functions[0].memory_gib
    )


def test_an_apps_calls_run_its_functions_mix(tmp_path: Path) -> None:
    """--durations trace, fixed:1h (each app's first call cold only): f1 runs 1 s, f2 3 s,
    each called 9 times, so a1's calls take 1 s or 3 s, half each (36 s in all), not their
    2 s mean; a2's 10 calls 0.6 s. Of the 28 calls 9 take 0.6 s, 8.5 1 s, 1 + 0.5 are cold
    (0.6 or 1 s + the cold start), 8.5 3 s and 0.5 3 s + the cold start: p50 1 s, p95 3 s."""
    durations = "o1,a1,f1,1000,9\no1,a1,f2,3000,9\n" + "".join(
        f"o2,a2,{g},600,4\n" for g in ("g1", "g2", "g3")
    )
    r = gpucast.simulate_serverless(
        trace=app_trace(tmp_path, durations=durations), durations="trace",
        **{**KW, "policy": "fixed:1h"},
    )  # fmt: skip
    res = r.result
    assert res.cold_starts.tolist() == [1, 1]
    assert res.busy_s.tolist() == pytest.approx([9 * 1.0 + 9 * 3.0, 10 * 0.6])
    cold = res.cold_start_s[0]
    assert res.latency_s["p50"] == pytest.approx(1.0)
    assert res.latency_s["p95"] == pytest.approx(3.0)
    assert res.latency_s["max"] == pytest.approx(3.0 + cold)
    # QA session 35: the execution line was the LLM trace's ("vllm, batch 1: prefill then
    # decode of its tokens") wherever an app's calls mix its functions' durations
    execution = r.to_dict()["assumptions"]["execution"]
    assert execution.startswith("the trace's average duration") and "prefill" not in execution
    model = gpucast.simulate_serverless(
        trace=tmp_path, **{**KW, "models": ["mlp", "resnet50"]}
    ).to_dict()["assumptions"]["execution"]
    assert model.startswith("one forward pass") and "prefill" not in model


def test_plan_serverless_on_apps(tmp_path: Path) -> None:
    trace = app_trace(tmp_path)
    kw = {"models": ["mlp"], "gpu": "T4", "price": 1.0, "policies": ["fixed:10m"],
          "slo": "p99<1s", "slo_scope": "functions"}  # fmt: skip
    app = gpucast.plan_serverless(trace=trace, **kw).to_dict()  # type: ignore[arg-type]
    function = gpucast.plan_serverless(trace=trace, unit="function", **kw).to_dict()  # type: ignore[arg-type]
    assert (app["unit"], app["units"], app["functions"]) == ("app", 2, 5)
    assert (function["unit"], function["units"], function["functions"]) == ("function", 5, 5)
    assert app["functions_invoked"] == 2 and function["functions_invoked"] == 5
    cold = {d["unit"]: next(o for o in d["options"] if o["kind"] == "serverless")["cold_starts"]
            for d in (app, function)}  # fmt: skip
    assert cold == {"app": 7, "function": 28}
    assert "invoked apps" in app["assumptions"]["slo"]
    assert "of apps" in app["reason"] and "of functions" in function["reason"]


def test_pool_of_apps_swaps_what_the_app_loads(tmp_path: Path) -> None:
    r = gpucast.simulate_serverless(trace=app_trace(tmp_path), pool_gpus=1, **KW)
    assert r.pool is not None and r.pool.invocations.tolist() == [18, 10]
    assert r.pool.cold_starts.tolist() == [1, 1]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"synthetic": 5, "unit": "apps"}, r"unit: must be one of app, function \(got 'apps'\)"),
        ({"synthetic": 5, "unit": "app"}, "unit: app needs a trace's applications"),
        ({"synthetic": 5, "unit": ""}, "unit: must be one of app, function"),
    ],
)
def test_bad_units(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(InvalidSpecError, match=match):
        gpucast.simulate_serverless(**kwargs)
    with pytest.raises(InvalidSpecError, match=match):
        gpucast.plan_serverless(**kwargs)


def test_a_generated_workload_is_per_function(tmp_path: Path) -> None:
    d = gpucast.simulate_serverless(synthetic=5, minutes=60, models=["mlp"]).to_dict()
    assert (d["unit"], d["units"], d["functions"], d["apps"]) == ("function", 5, 5, None)
    assert "no applications" in d["assumptions"]["unit"]


def test_the_azure_llm_trace_has_no_apps(tmp_path: Path) -> None:
    (tmp_path / "AzureLLMInferenceTrace_code.csv").write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 12:00:30.5,100,10\n"
    )
    with pytest.raises(InvalidSpecError, match="unit: app needs a trace's applications"):
        gpucast.simulate_serverless(trace=tmp_path, models=["llama-2-7b"], unit="app")


def test_an_app_too_big_for_the_gpu_is_one_error(tmp_path: Path) -> None:
    from gpucast.catalog import load_catalog
    from gpucast.inputs.serverless import GpuFunction, trace_from_dir
    from gpucast.inputs.serverless_apps import group_by_app

    trace = trace_from_dir(app_trace(tmp_path))
    big = [
        GpuFunction(model=m, memory_gib=10.0, weight_bytes=9 * 1024**3, forward_s=0.01,
                    cold_start_s=5.0, source=m)
        for m in ("a", "b")
    ]  # fmt: skip
    with pytest.raises(InvalidSpecError, match=r"unit: app o1/a1 serves a, b: 19\.0 GiB"):
        group_by_app(
            trace, model_of=np.arange(5) % 2, functions=tuple(big), exec_s=np.full(5, 0.01),
            gpu=load_catalog().gpu("T4"), pcie_gbs=16.0,
        )  # fmt: skip
    # one model each fits: 10 GiB of a T4's 16
    units = group_by_app(
        trace, model_of=np.zeros(5, dtype=np.int64), functions=tuple(big), exec_s=np.full(5, 0.01),
        gpu=load_catalog().gpu("T4"), pcie_gbs=16.0,
    )  # fmt: skip
    assert units.memory_gib.tolist() == [10.0, 10.0] and units.models == (("a",), ("a",))
    assert units.cold_s.tolist() == [5.0, 5.0]
    assert units.swap_s.tolist() == pytest.approx([9 * 1024**3 / 16e9] * 2)
    assert units.host_memory_mb.tolist() == [150.0, 400.0]


def test_one_app_of_one_function_reads_in_the_singular(tmp_path: Path) -> None:
    """QA 37 V: 'apps 1 of 1 functions' and 'memory (app_memory_percentiles.anon.d01.csv,
    1 apps)'."""
    from gpucast.app.serverless_text import apps_line

    trace = app_trace(tmp_path, memory="o1,a1,1000,150,100,110,120,140,160,200,250,300\n")
    path = trace / "invocations_per_function_md.anon.d01.csv"
    path.write_text("\n".join(path.read_text().splitlines()[:2]) + "\n")  # f1 of a1 alone
    line = apps_line(gpucast.simulate_serverless(trace=trace, **KW).to_dict())
    assert line is not None and line.startswith("  apps 1 of 1 function (1.00 per app")
    assert "(app_memory_percentiles.anon.d01.csv, 1 app) AverageAllocatedMb" in line


def test_the_cold_start_rate_reads_as_a_percentage(tmp_path: Path) -> None:
    """QA 41 QF F7: 7 of 28 cold read ``25.000%``; the rate keeps one decimal, and two
    significant digits where that decimal would round a rate to nothing (``0.0027%``)."""
    from gpucast.app.serverless_text import simulate_lines

    d = gpucast.simulate_serverless(trace=app_trace(tmp_path), **KW).to_dict()
    assert (d["cold_starts"], d["invocations"]) == (7, 28)
    assert "cold starts 7 (25.0%; 75th percentile of apps" in "\n".join(simulate_lines(d))
    rare = simulate_lines({**d, "cold_starts": 1, "cold_start_rate": 2.7e-5})
    assert "cold starts 1 (0.0027%;" in "\n".join(rare)
    # F9: the pool's swap rate alike (2 swaps of 101 M calls read 0.000%)
    pooled = gpucast.simulate_serverless(trace=app_trace(tmp_path), pool_gpus=1, **KW).to_dict()
    pool = {**pooled["pool"], "swaps": 2, "swap_rate": 2e-8}
    assert "2 swaps (0.000002%," in "\n".join(simulate_lines({**pooled, "pool": pool}))
