"""`gpucast.plan_serve` and `gpucast.simulate_serve` from Python: keywords, request objects,
config files, and bad options as the one typed error the CLI prints."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import gpucast
from gpucast.app.serve import (
    PlanServeRequest,
    PlanServeResult,
    SimulateServeRequest,
    SimulateServeResult,
    parse_model_rate,
    parse_slo,
)
from gpucast.domain.errors import InvalidSpecError

PLAN = {"gpus": ["T4"], "no_mig": True, "duration_s": 10}


@pytest.fixture
def table(tmp_path: Path) -> Path:
    path = tmp_path / "lat.csv"
    path.write_text("batch_size,latency_s\n1,0.010\n4,0.016\n8,0.024\n")
    return path


def test_parsers() -> None:
    assert parse_slo("p99<50ms") == (99.0, pytest.approx(0.05))
    assert parse_slo("p95<=0.2s") == (95.0, pytest.approx(0.2))
    assert parse_slo("40ms") == (99.0, pytest.approx(0.04))
    assert parse_slo("p99<1e-6s") == (99.0, pytest.approx(1e-6))  # QA 35 S #16
    assert parse_slo("p50<2.5E+1ms") == (50.0, pytest.approx(0.025))
    with pytest.raises(InvalidSpecError, match="slo: must be a finite latency > 0"):
        parse_slo("p99<1e999s")
    assert parse_model_rate("resnet50:150", None) == ("resnet50", 150.0)
    assert parse_model_rate("pkg.mod:factory", 3.0) == ("pkg.mod:factory", 3.0)
    with pytest.raises(InvalidSpecError, match="slo"):
        parse_slo("fast please")


def test_plan_serve_with_keywords_and_with_a_request_is_the_same_plan() -> None:
    by_keywords = gpucast.plan_serve(models=["mlp:300"], slo="p99<20ms", **PLAN)
    assert isinstance(by_keywords, PlanServeResult)
    request = PlanServeRequest(models=("mlp:300",), slo="p99<20ms", gpus=("T4",), no_mig=True,
                               duration_s=10.0)  # fmt: skip
    by_request = gpucast.plan_serve(request)
    assert by_request.to_dict() == by_keywords.to_dict()
    best = by_keywords.best
    assert best is not None and best.meets_slo and best.tail_latency_s <= 0.020
    frame = by_keywords.to_frame()
    assert len(frame) == len(by_keywords.plan.candidates)
    assert frame["recommended"].sum() == 1 and frame["pareto"].any()
    # keywords win over the request's fields
    looser = gpucast.plan_serve(request, slo="p95<30ms")
    assert looser.plan.request.slo_percentile == 95


def test_plan_serve_flag_names_and_config_file(tmp_path: Path) -> None:
    cfg = tmp_path / "plan.yaml"
    cfg.write_text("model: [mlp:300]\nslo-ms: 25\ngpu: T4\nno-mig: true\nduration-s: 10\n")
    plan = gpucast.plan_serve(config=cfg, **{"slo-percentile": 95})
    assert plan.plan.request.slo_percentile == 95
    assert plan.plan.request.slo_s == pytest.approx(0.025)
    assert plan.to_dict()["assumptions"]["prices"] == "catalog on-demand"


@pytest.mark.parametrize(
    "options, text",
    [
        ({"slo": "p99<20ms"}, "model: is required; e.g. --model resnet50:150"),
        ({"models": ["mlp:10"]}, "slo: is required"),
        ({"models": ["mlp"], "slo_ms": 20}, "model: mlp has no rate; write --model mlp:150"),
        ({"models": ["mlp:-1"], "slo_ms": 20}, "model: the rate in mlp:-1 must be > 0"),
        ({"models": ["mlp:10"], "slo_ms": 20, "host_capacity_rps": math.nan},
         "host-capacity-rps: must be > 0 requests per second"),
        ({"models": ["mlp:10"], "slo_ms": 20, "max_servers": 0}, "max-servers: must be >= 1"),
        ({"models": ["a:1", "b:1"], "slo_ms": 20, "trace": "t.csv"},
         "trace: applies to exactly one --model"),
        ({"models": ["mlp:10"], "slo_ms": 20, "placements": ["far"]}, "placement: must be among"),
        ({"models": ["mlp:10"], "slo_ms": 20, "no_such": 1}, "no_such: is not an option"),
        # QA 38 I #19: a mapping without a name read "rate of None: ... --model None:150"
        ({"model": {"mlp": 10}, "slo_ms": 20}, "model: a mapping takes the keys name and rate"),
    ],
)  # fmt: skip
def test_plan_serve_bad_options_raise_the_cli_error(options: dict[str, object], text: str) -> None:
    with pytest.raises(InvalidSpecError) as info:
        gpucast.plan_serve(**options)
    assert text in str(info.value)


def test_simulate_serve_keywords_request_and_frame(table: Path) -> None:
    kw = {"model": "resnet50", "gpu": "P4", "rate": 150, "latency_table": table,
          "duration_s": 10, "slo_ms": 100, "servers": 2}  # fmt: skip
    result = gpucast.simulate_serve(**kw)
    assert isinstance(result, SimulateServeResult)
    request = SimulateServeRequest(model="resnet50", gpu="P4", rate=150.0, latency_table=table,
                                   duration_s=10.0, slo_ms=100.0, servers=2)  # fmt: skip
    assert gpucast.simulate_serve(request).to_dict() == result.to_dict()
    out = result.to_dict()
    assert out["throughput_rps"] == pytest.approx(150, rel=0.1)
    assert out["batching"] == {"max_batch_size": 8, "max_queue_delay_s": 0.01,
                               "preferred_batch_sizes": [], "max_queue_size": None,
                               "queue_timeout_s": None}  # fmt: skip
    assert out["requests"] == out["served"] + out["dropped"] + out["in_flight"]
    assert out["latency_curve"]["source"] == "measured: lat.csv"
    frame = result.to_frame()
    assert list(frame["replica"]) == [0, 1] and frame["requests"].sum() == out["requests"]
    assert result.warnings == ()


def test_simulate_serve_warnings_come_back_in_the_result(table: Path, tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s\n" + "\n".join(str(i * 0.01) for i in range(2000)) + "\nbad\n")
    result = gpucast.simulate_serve(
        model="resnet50", gpu="P4", rate=100, latency_table=table, arrivals=f"trace:{trace}",
        host_capacity_rps=50, duration_s=20,
    )  # fmt: skip
    assert any(w.startswith("skipped 1 malformed row(s) of t.csv") for w in result.warnings)
    # the trace time-scaled to 100 req/s against a host path that carries 50: it holds 50
    # (less the requests it is part-way through when the run ends)
    assert any(w.startswith("overloaded: 100.0 req/s offered") for w in result.warnings)
    assert result.serving.throughput_rps() == pytest.approx(50, rel=0.05)


def test_a_trace_shorter_than_the_duration_is_offered_at_its_own_rate(
    table: Path, tmp_path: Path
) -> None:
    """3,000 requests over 30 s, time-scaled to 100 req/s and simulated with the default 60 s:
    the run ends with the trace, so 100 req/s are offered (it read 50, the 3,000 requests
    spread over 60 s, and priced each request twice as dear)."""
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s\n" + "\n".join(f"{i * 0.01:.3f}" for i in range(3000)) + "\n")
    kw = {"model": "resnet50", "gpu": "P4", "latency_table": table, "arrivals": f"trace:{trace}"}
    short = gpucast.simulate_serve(**kw, rate=100).to_dict()
    assert short["horizon_s"] == pytest.approx(30, rel=0.01)
    assert short["offered_rps"] == pytest.approx(100, rel=0.01)
    cut = gpucast.simulate_serve(**kw, rate=100, duration_s=10).to_dict()
    assert cut["horizon_s"] == 10 and cut["offered_rps"] == pytest.approx(100, rel=0.02)
    # the mean batch is per batch, as each server's (requests / batches)
    server = short["servers"][0]
    assert short["mean_batch_size"] == pytest.approx(server["mean_batch_size"], rel=0.02)
    # a trace longer than 60 s is replayed whole, as a language model's run replays it (QA 34
    # C #16: a CNN replayed its first 60 s); --duration-s still cuts it
    long = tmp_path / "long.csv"
    long.write_text("arrival_s\n" + "\n".join(f"{i * 0.05:.3f}" for i in range(3000)) + "\n")
    kw["arrivals"] = f"trace:{long}"
    whole = gpucast.simulate_serve(**kw).to_dict()
    assert whole["horizon_s"] == pytest.approx(150, rel=0.01)
    assert whole["requests"] == 3000
    assert gpucast.simulate_serve(**kw, duration_s=60).to_dict()["horizon_s"] == 60
    llm = gpucast.simulate_serve(model="llama-3-8b", gpu="H100-SXM", arrivals=f"trace:{long}",
                                 input_len=64, output_len=8).to_dict()  # fmt: skip
    assert llm["requests"] == 3000


def test_simulate_serve_prices_a_mig_slice_by_the_planner_rule() -> None:
    from gpucast.inputs.serving import build_server_options

    options, _ = build_server_options(gpus=["A100-40GB"], migs=["A100-40GB:3g.20gb"])
    planned = next(o for o in options if o.name == "A100-40GB/3g.20gb")
    sim = gpucast.simulate_serve(model="mlp", gpu="A100-40GB", mig="3g.20gb", rate=50,
                                 duration_s=2)  # fmt: skip
    assert sim.serving.servers[0].price_usd_per_hour == pytest.approx(planned.price_usd_per_hour)
    assert sim.server == "A100-40GB/3g.20gb"


def test_a_mig_slice_states_the_slice_speed_validation() -> None:
    """simulate serve --mig and plan serve's MIG rows stated only the whole-GPU serving
    validation; catalog mig and plan serve --mix the slice speed's (session 37 QA)."""
    sim = gpucast.simulate_serve(model="mlp", gpu="A100-80GB", mig="1g.10gb", rate=50,
                                 duration_s=2)  # fmt: skip
    assert "MAPE 8.0%" in sim.validation["MIG slice speed"]
    whole = gpucast.simulate_serve(model="mlp", gpu="A100-80GB", rate=50, duration_s=2)
    assert "MIG slice speed" not in whole.validation
    plan = gpucast.plan_serve(models=["mlp:300"], slo="p99<20ms", migs=["A100-40GB:1g.5gb"],
                              duration_s=2)  # fmt: skip
    assert plan.plan.best is not None
    assert any(g.server.kind == "mig" for g in plan.plan.best.groups)
    assert "validated only for A100-80GB" in plan.validation["MIG slice speed"]


@pytest.mark.parametrize(
    "options, text",
    [
        ({"rate": 0}, "rate: must be > 0 requests per second"),
        ({"rate": 10, "arrivals": "zipf"}, "arrivals: must be poisson, constant, bursty"),
        ({"rate": 10, "calibrate_p50_ms": 50, "host_ms": 3}, "cannot be combined"),
        ({"rate": 10, "preferred": "4,x"}, "preferred: must be a whole number"),
        ({"rate": 10, "seed": -1}, "seed: must be an integer in [0, 2^53)"),
        ({"rate": 10, "mig": "9g.9gb", "gpu": "A100-40GB"}, "does not exist on A100-40GB"),
    ],
)
def test_simulate_serve_bad_options(table: Path, options: dict[str, object], text: str) -> None:
    base: dict[str, object] = {"model": "resnet50", "gpu": "P4", "latency_table": table}
    with pytest.raises(InvalidSpecError) as info:
        gpucast.simulate_serve(**{**base, **options})
    assert text in str(info.value)


def test_a_request_of_the_wrong_verb_is_refused(table: Path) -> None:
    request = SimulateServeRequest(model="resnet50", gpu="P4", rate=10.0, latency_table=table)
    with pytest.raises(InvalidSpecError, match="request: must be a PlanServeRequest"):
        gpucast.plan_serve(request)  # type: ignore[arg-type]


def test_both_serving_verbs_name_the_request_size_they_assume() -> None:
    """A default that changes a result is shown: the request's bytes over the network and
    PCIe follow the serving precision (mlp: 784 float features, 2 B each at fp16)."""
    sim = gpucast.simulate_serve(model="mlp", gpu="T4", rate=50, duration_s=2, precision="fp16")
    payload = sim.to_dict()["sources"]["payload"]
    assert payload.startswith("1.568 KB per request") and "x 2 B (fp16)" in payload
    given = gpucast.simulate_serve(model="mlp", gpu="T4", rate=50, duration_s=2, input_kb=150)
    assert given.to_dict()["sources"]["payload"] == "150 KB per request (given)"
    plan = gpucast.plan_serve(models=["mlp:50"], slo_ms=50, precision="fp16", **PLAN)
    assert plan.plan.assumptions["payload"] == payload
