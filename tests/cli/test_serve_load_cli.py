"""`simulate serve` and `plan serve` under load through the CLI: closed loops, bounded queues,
the saturation search, engines and precisions, workload options, every arrival format in both
verbs and the process named in the output, and one-line refusals."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpucast.app.serve import SimulateServeRequest
from gpucast.cli.app import app
from gpucast.domain.options import META_KEY

runner = CliRunner()
SIM = ["simulate", "serve", "--model", "mlp", "--gpu", "T4", "--duration-s", "10"]
PLAN = ["plan", "serve", "--gpu", "T4", "--no-mig", "--duration-s", "10", "--slo-ms", "50"]


@pytest.fixture()
def table(tmp_path: Path) -> Path:
    path = tmp_path / "lat.csv"
    path.write_text("batch_size,latency_s\n1,0.004\n8,0.018\n")
    return path


@pytest.fixture()
def functions_trace(tmp_path: Path) -> Path:
    path = tmp_path / "functions.csv"
    header = "HashOwner,HashApp,HashFunction,Trigger," + ",".join(str(i) for i in range(1, 4))
    path.write_text(header + "\no,a,f,http,600,600,600\no,a,g,timer,60,60,60\n")
    return path


def _json(argv: list[str]) -> dict[str, object]:
    result = runner.invoke(app, [*argv, "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert isinstance(out, dict)
    return out


def test_closed_loop_clients_are_named_and_follow_littles_law(table: Path) -> None:
    out = _json([*SIM, "--latency-table", str(table), "--clients", "6", "--think-ms", "5"])
    assert out["arrival_process"] == "closed loop: 6 clients, think 5 ms (exponential)"
    assert out["sources"]["arrivals"] == out["arrival_process"]  # type: ignore[index]
    lat = out["latency_s"]["mean"]  # type: ignore[index]
    assert out["throughput_rps"] == pytest.approx(6 / (lat + 0.005), rel=0.08)
    assert out["requests"] == out["served"] + out["dropped"] + out["in_flight"]


def test_a_saturated_closed_loop_is_not_called_a_growing_queue(table: Path) -> None:
    # QA 40 V #1: 200 clients on a host carrying 300 req/s keep ~200 requests in the server,
    # a constant backlog (Little's law), not a queue growing with the run; and the overload
    # warning pointed to --find-saturation, which a closed loop refuses
    host = ["--host-ms", "2", "--host-capacity-rps", "300", "--latency-table", str(table)]
    result = runner.invoke(app, [*SIM, *host, "--clients", "200", "--think-ms", "5", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["throughput_rps"] == pytest.approx(300.0, rel=0.03)
    warned = " ".join(out["warnings"])  # type: ignore[arg-type]
    assert "grows with the run" not in warned and "--find-saturation" not in warned
    assert "saturated: 200 clients keep" in warned and "Little's law" in warned
    quiet = _json([*SIM, *host, "--clients", "2", "--think-ms", "5"])
    assert quiet["warnings"] == []


def test_bounded_queue_drops_are_counted_and_warned(table: Path) -> None:
    bounded = ["--max-queue", "8", "--queue-timeout-ms", "20", "--json"]
    result = runner.invoke(app, [*SIM, "--latency-table", str(table), "--rate", "2000", *bounded])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["dropped"] > 0 and out["dropped"] == out["queue_full"] + out["timeout"]
    assert out["batching"]["max_queue_size"] == 8  # type: ignore[index]
    assert "requests were rejected" in result.stderr
    assert out["throughput_rps"] < out["offered_rps"]


def test_timeouts_on_a_busy_host_say_the_work_was_wasted(table: Path) -> None:
    # QA 40 V #10: a timeout alone on a host carrying 300 req/s, offered 800: every admitted
    # request shares the host past the timeout and is dropped after using it (goodput
    # collapse); the warning said only "Add servers or instances"
    host = ["--host-ms", "2", "--host-capacity-rps", "300", "--latency-table", str(table)]
    argv = [*SIM, *host, "--rate", "800", "--queue-timeout-ms", "50", "--duration-s", "4"]
    out = _json(argv)
    assert out["throughput_rps"] < 30 and out["timeout"] > 0
    warned = " ".join(out["warnings"])  # type: ignore[arg-type]
    assert "The host stage was 9" in warned and "was wasted" in warned
    assert "Shed at arrival instead with --max-queue" in warned
    quiet = _json(
        [*SIM, "--latency-table", str(table), "--rate", "2000", "--queue-timeout-ms", "20"]
    )
    assert quiet["timeout"] > 0 and "wasted" not in " ".join(quiet["warnings"])  # type: ignore[arg-type]


def test_find_saturation_reports_the_host_capacity(table: Path) -> None:
    host = ["--host-ms", "2", "--host-capacity-rps", "300"]
    search = ["--arrivals", "constant", "--find-saturation"]
    out = _json([*SIM, "--latency-table", str(table), "--rate", "100", *host, *search])
    sat = out["saturation"]
    assert isinstance(sat, dict)
    assert sat["peak_throughput_rps"] == pytest.approx(300.0, rel=0.02)
    assert sat["saturation_rps"] == pytest.approx(300.0, rel=0.03)
    assert "held" in sat["criterion"] and len(sat["probes"]) >= 3
    # QA 40 V #9: the host-path stages' busy shares carry the suffix busy_fraction has
    (server,) = out["servers"]  # type: ignore[misc]
    assert "stages" not in server
    assert server["stage_busy_fractions"]["host"] == pytest.approx(100 / 300, rel=0.1)
    text = runner.invoke(app, [*SIM, "--latency-table", str(table), "--rate", "100",
                               "--host-capacity-rps", "300", "--find-saturation"])  # fmt: skip
    assert "saturation: held at" in text.stdout and "peak throughput" in text.stdout


def test_engine_and_precision_change_the_curve() -> None:
    eager = _json([*SIM, "--rate", "50", "--precision", "fp16"])
    trt = _json([*SIM, "--rate", "50", "--engine", "tensorrt", "--precision", "int8"])
    assert eager["engine"] == "eager-pytorch" and trt["engine"] == "tensorrt"
    assert trt["precision"] == "int8" and "(int8)" in trt["latency_curve"]["source"]  # type: ignore[index]
    assert "TensorRT-class" in trt["sources"]["engine"]  # type: ignore[index]
    lat = lambda o: o["latency_curve"]["latency_s"][-1]  # noqa: E731
    assert lat(trt) < lat(eager)
    default = _json([*SIM, "--rate", "50", "--engine", "trt"])
    assert default["precision"] == "fp16"  # the engine's default


def test_int8_priced_at_another_mode_s_peak_says_so() -> None:
    # QA 40 V #3: a K80 (no int8 figure in the catalog) ran int8 at its fp32 peak, unsaid;
    # an A10G (no int8 column) at its fp16 one; a T4 has its own int8 peak
    def source(gpu: str) -> str:
        argv = ["simulate", "serve", "--model", "mlp", "--gpu", gpu, "--duration-s", "2"]
        out = _json([*argv, "--rate", "50", "--engine", "tensorrt", "--precision", "int8"])
        return str(out["sources"]["latency"])  # type: ignore[index]

    assert "int8 priced at the K80's fp32 peak (the catalog has no int8 figure for it)" in source(
        "K80"
    )
    assert "int8 priced at the A10G's fp16 peak" in source("A10G")
    assert "priced at" not in source("T4")
    plan = ["plan", "serve", "--model", "mlp:50", "--no-mig", "--duration-s", "2", "--slo-ms", "50"]
    out = _json([*plan, "--gpu", "K80,T4,A10G", "--engine", "tensorrt", "--precision", "int8"])
    assert out["assumptions"]["latency"].endswith(  # type: ignore[index]
        "; int8 priced at another mode's peak where the catalog has no int8 figure: "
        "A10G (fp16), K80 (fp32)"
    )


def test_tensorrt_is_refused_on_a_gpu_it_does_not_run_on() -> None:
    # QA 40 V #12: TensorRT on an MI300X or a Gaudi2 was priced like an NVIDIA GPU's
    argv = ["simulate", "serve", "--model", "mlp", "--rate", "50", "--price", "3"]
    for gpu, vendor in (("MI300X", "amd"), ("Gaudi2", "intel")):
        result = runner.invoke(app, [*argv, "--gpu", gpu, "--engine", "tensorrt"])
        assert result.exit_code == 2, result.output
        line = result.stderr.strip()
        assert line.startswith(
            f"error: engine: TensorRT-class runs on nvidia GPUs only, not on {gpu} ({vendor})"
        )
        assert "\n" not in line and "--engine eager-pytorch" in line
    assert _json([*argv, "--gpu", "MI300X", "--duration-s", "2"])["engine"] == "eager-pytorch"


def test_plan_serve_plans_tensorrt_on_the_gpus_it_runs_on(tmp_path: Path) -> None:
    # QA 40 V #12: --engine tensorrt recommended a CPU server priced at TensorRT's efficiencies
    plan = [
        "plan",
        "serve",
        "--model",
        "mlp:5",
        "--slo-ms",
        "2000",
        "--no-mig",
        "--duration-s",
        "2",
    ]
    out = _json([*plan, "--engine", "tensorrt"])
    kinds = {g["server"]["kind"] for c in out["candidates"] for g in c["groups"]}  # type: ignore[index, union-attr]
    assert kinds == {"gpu"}
    assert "CPU servers" in out["assumptions"]["engine servers"]  # type: ignore[index]
    offers = tmp_path / "offers.csv"
    offers.write_text(
        "provider,region,instance_type,gpu,gpus,vcpus,memory_gib,network_gbps,"
        "on_demand_usd_per_hour,spot_usd_per_hour,source_url,as_of,note\n"
        "azure,eastus,ND-MI300X-v5,MI300X,8,96,1850,400,48.0,,https://example.org,2026-12-07,\n"
    )
    amd = ["--gpu", "MI300X", "--offers", str(offers)]
    assert _json([*plan, *amd])["recommended"] is not None  # eager PyTorch runs there
    result = runner.invoke(app, [*plan, "--engine", "tensorrt", *amd])
    assert result.exit_code == 2, result.output
    assert "engine: TensorRT-class runs on nvidia GPUs only, not on MI300X (amd)" in result.stderr


def test_a_trace_without_arrival_times_names_every_format_simulate_serve_reads(
    tmp_path: Path,
) -> None:
    # QA 40 V #7: the fix named the LLM trace and an arrival_s CSV, not the Azure Functions
    # counts simulate serve also reads
    trace = tmp_path / "times.csv"
    trace.write_text("time\n0.1\n0.2\n")
    result = runner.invoke(app, [*SIM, "--arrivals", f"trace:{trace}"])
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert "has columns time" in line and "Azure Functions" in line and "\n" not in line
    # the LLM verb reads the Functions counts too (lengths drawn) and now says so
    llm = ["simulate", "serve", "--model", "llama-3-8b", "--gpu", "H100"]
    result = runner.invoke(app, [*llm, "--arrivals", f"trace:{trace}"])
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert "has columns time" in line and "\n" not in line
    assert "Azure Functions per-minute count file (HashOwner," in line and "arrival_s" in line


def test_workload_options_reach_the_profile() -> None:
    small = _json([*SIM, "--rate", "50", "-o", "hidden=64"])
    big = _json([*SIM, "--rate", "50", "-o", "hidden=4096,4096"])
    assert big["latency_curve"]["latency_s"][-1] > small["latency_curve"]["latency_s"][-1]  # type: ignore[index]


def test_every_arrival_format_in_both_verbs_and_named(table: Path, functions_trace: Path) -> None:
    sim = _json([*SIM, "--latency-table", str(table), "--arrivals", f"trace:{functions_trace}"])
    assert str(sim["arrival_process"]).startswith("trace functions.csv (Azure Functions counts")
    scaled = _json([*SIM, "--latency-table", str(table), "--arrivals", f"trace:{functions_trace}",
                    "--rate", "40"])  # fmt: skip
    assert "time-scaled to 40 req/s" in str(scaled["arrival_process"])
    assert scaled["offered_rps"] == pytest.approx(40.0, rel=0.1)
    for kind in ("constant", "bursty", "poisson"):
        out = _json([*PLAN, "--model", "mlp:50", "--arrivals", kind])
        assert out["assumptions"]["arrivals"].startswith(  # type: ignore[index]
            {"constant": "mlp: constant 50", "bursty": "mlp: bursty", "poisson": "mlp: Poisson"}[
                kind
            ]
        )
    traced = _json([*PLAN, "--model", "mlp", "--trace", str(functions_trace)])
    arrivals = traced["assumptions"]["arrivals"]  # type: ignore[index]
    assert "trace functions.csv" in arrivals and "Poisson" not in arrivals
    same = _json([*PLAN, "--model", "mlp", "--arrivals", f"trace:{functions_trace}"])
    assert same["assumptions"]["arrivals"] == arrivals  # type: ignore[index]
    text = runner.invoke(app, [*PLAN, "--model", "mlp", "--trace", str(functions_trace)])
    assert text.exit_code == 0, text.output
    assert "Poisson" not in text.stdout and "arrivals: mlp: trace functions.csv" in text.stdout


def test_plan_reports_the_measured_peak_of_its_recommendation() -> None:
    out = _json([*PLAN, "--model", "mlp:50"])
    best = out["candidates"][0]  # type: ignore[index]
    assert best["peak_throughput_rps"] > 50 and best["saturation_rps"] > 50
    assert best["headroom"] == pytest.approx(best["peak_throughput_rps"] / 50 - 1)
    assert "peak throughput" in out["assumptions"]["saturation"]  # type: ignore[index]
    skipped = _json([*PLAN, "--model", "mlp:50", "--saturation-s", "0"])
    assert skipped["candidates"][0]["peak_throughput_rps"] is None  # type: ignore[index]


@pytest.mark.parametrize(
    "extra, text",
    [
        (["--clients", "0"], "clients: must be >= 1"),
        (["--clients", "4", "--rate", "10"], "clients: is a closed loop"),
        (["--max-queue", "0", "--rate", "10"], "max-queue: must be >= 1"),
        (["--queue-timeout-ms", "-1", "--rate", "10"], "e.g. --queue-timeout-ms 100"),
        (["--engine", "onnx", "--rate", "10"], "engine: unknown engine 'onnx'"),  # QA 38 I #7
        (["--precision", "int4", "--rate", "10"], "precision: must be one of fp32, fp16"),
        (["--precision", "int8", "--rate", "10"], "int8 is not run by eager PyTorch"),
        (["--host-ms", "-1", "--rate", "10"], "host-ms: must be >= 0 ms"),
        (["--host-ms", "nan", "--rate", "10"], "host-ms: must be >= 0 ms"),
        (["--host-concurrency", "0", "--rate", "10"], "host-concurrency: must be >= 1"),
        (["--think-ms", "-3", "--clients", "2"], "think-ms: must be >= 0 ms"),
        # QA 38 I #2: open-loop traffic ignored a think time without a word
        (["--think-ms", "50", "--rate", "10"], "think-ms: is the closed loop's think time"),
        # QA 38 I #4: the fix offered 4,8, itself refused under --max-batch 4
        (["--rate", "10", "--max-batch", "4", "--preferred", "4,8"], "e.g. --preferred 2,4,"),
        # QA 38 I #16: 1e12 ms held requests 31 years and read as an overloaded server
        (["--rate", "10", "--max-delay-ms", "1e12"], "max-delay-ms: must be at most 60,000 ms"),
        # QA 38 I #17: a scheduler with nothing to order was ignored without a word
        (["--rate", "10", "--scheduler", "edf"], "scheduler: orders requests by their deadlines"),
        (["--clients", "2", "--find-saturation"], "find-saturation: offers ever higher"),
        # QA 40 V #2: a timeout no request can meet dropped all of them, "add servers"
        (
            ["--rate", "10", "--host-ms", "2", "--queue-timeout-ms", "1"],
            "queue-timeout-ms: mlp: 1 ms is shorter than the 2.01 ms",
        ),
        # QA 40 V #5: calibration errors named "measured p50", and a falling median "rises"
        (["--rate", "10", "--calibrate-p50-ms", "0.5"], "calibrate-p50-ms: is not above"),
        (
            ["--rate", "10", "--calibrate-p50-ms", "30", "--calibrate-at", "200=20"],
            "calibrate-p50-ms / calibrate-at: falls from 30.00 to 20.00 ms",
        ),
        ([], "rate: is required"),
        (["--rate", "10", "-o", "nope=1"], "nope"),
    ],
)
def test_simulate_serve_bad_input_is_one_line_exit_2(extra: list[str], text: str) -> None:
    result = runner.invoke(app, [*SIM, *extra])
    assert result.exit_code == 2, result.output
    assert text in result.output
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "extra, text",
    [
        (["--model", "mlp:5", "--arrivals", "zipf"], "arrivals: must be poisson, constant"),
        (["--model", "mlp:5", "--engine", "tensorrt", "--precision", "int4"], "precision: must be"),
        (["--model", "mlp:5", "--precision", "fp8"], "fp8 is not run by eager PyTorch"),
        (["--model", "mlp:5", "--saturation-s", "-1"], "saturation-s: must be >= 0"),
        (["--model", "mlp:5", "--max-delays-ms", "0,1e9"], "max-delays-ms: must be at most"),
        (["--model", "mlp:5", "--trace", "a.csv", "--arrivals", "constant"],
         "trace: and --arrivals name two different"),
        # QA 40 V #14: the deployments cut for costing more than one over budget were
        # "not simulated: cannot beat the cheapest" when nothing was left to be cheapest
        (["--model", "mlp:5", "--budget-usd-per-hour", "0.01"],
         "(configurations by reason, most first: over budget: "),
    ],
)  # fmt: skip
def test_plan_serve_bad_input_is_one_line_exit_2(extra: list[str], text: str) -> None:
    result = runner.invoke(app, [*PLAN, *extra])
    assert result.exit_code == 2, result.output
    assert text in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_a_run_that_serves_nothing_has_no_cost_per_request(tmp_path: Path) -> None:
    """QA 38 I #16: a run in which no request completed printed 'inf US$ per million'."""
    slow = tmp_path / "slow.csv"
    slow.write_text("batch_size,latency_s\n1,1000\n8,8000\n")
    result = runner.invoke(app, [*SIM, "--latency-table", str(slow), "--rate", "10"])
    assert result.exit_code == 0, result.output
    assert "no request served in the run: no cost per request" in result.stdout
    assert "inf" not in result.stdout


def test_json_carries_the_warnings_the_text_prints(tmp_path: Path) -> None:
    """QA 38 I #22: --json dropped the overload / shed-load warnings (stderr only), where a
    language model's simulate serve --json has them; plan serve's JSON has them too."""
    sim = _json([*SIM, "--rate", "1e5", "--max-queue", "4"])
    assert any("requests were rejected" in w for w in sim["warnings"])  # type: ignore[union-attr]
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s\n" + "".join(f"{0.01 * k:.2f}\n" for k in range(1, 300)) + "x\n")
    plan = _json([*PLAN, "--model", "mlp", "--trace", str(trace)])
    assert any("malformed row" in w for w in plan["warnings"])  # type: ignore[union-attr]


def test_a_trace_s_last_request_in_flight_is_no_overload(tmp_path: Path) -> None:
    """QA 38 I #6: a trace ends on an arrival, so its last request is always in flight at the
    horizon; on a 3-request trace (2% busy) that read as 'overloaded ... latency grows'."""
    trace = tmp_path / "three.csv"
    trace.write_text("arrival_s\n0.5\n0.2\n0.3\n")
    result = runner.invoke(app, [*SIM[:6], "--arrivals", f"trace:{trace}"])
    assert result.exit_code == 0, result.output
    assert "in flight at the end 1" in result.stdout
    assert "overloaded" not in result.stderr


def test_servers_and_mig_help_say_what_the_run_does() -> None:
    """QA 38 I #23: --mig said 'Run on one MIG slice' and --servers 'Number of GPUs', while
    --mig 1g.5gb --servers 3 runs (and prices) three slices."""
    import gpucast

    helps = {f.name: f.metadata[META_KEY].help for f in dataclasses.fields(SimulateServeRequest)}
    assert "MIG slices with --mig" in helps["servers"]
    assert "--servers of them" in helps["mig"]
    run = gpucast.simulate_serve(model="mlp", gpu="A100-40GB", mig="1g.5gb", servers=3, rate=50,
                                 duration_s=2)  # fmt: skip
    assert len(run.serving.servers) == 3
    per_slice = run.serving.servers[0].price_usd_per_hour
    assert run.to_dict()["cost_usd_per_hour"] == pytest.approx(3 * per_slice)


def test_a_burst_at_the_end_is_not_called_a_growing_queue() -> None:
    """QA 38 I #14: bursty traffic on three MIG slices busy 33% of a 10 s run ended in a burst
    with 251 requests in flight, and the warning said 'latency grows with the run'. A backlog
    on servers that idled most of the run is a burst not yet cleared; a sustained overload
    (bottleneck busy ~100%) keeps the old words."""
    import gpucast

    bursty = gpucast.simulate_serve(model="resnet50", gpu="A100-40GB", mig="1g.5gb", servers=3,
                                    rate=300, arrivals="bursty", duration_s=10)  # fmt: skip
    assert bursty.serving.counts()["in_flight"] > 100
    (warning,) = [w for w in bursty.warnings if "still queued" in w]
    assert warning.startswith("behind at the end: ") and "busy more than 33% of it" in warning
    assert "grows with the run" not in warning.replace("not a queue that grows with the run", "")
    steady = gpucast.simulate_serve(model="resnet50", gpu="T4", rate=1e4, duration_s=2)
    (warning,) = [w for w in steady.warnings if "still queued" in w]
    assert warning.startswith("overloaded: ") and "latency grows with the run" in warning
