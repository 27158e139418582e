"""`gpucast plan serve` through the CLI: output forms, bad input, traces, config files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpucast.cli.app import app

FAST = ["--gpu", "T4", "--gpu", "L4", "--no-mig", "--duration-s", "10"]


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["plan", "serve", *args])
    crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
    err = result.stderr + (repr(result.exception) if crashed else "")
    return result.exit_code, result.stdout, err


def test_json_has_candidates_pareto_recommended_infeasible() -> None:
    code, out, err = run("--model", "mlp:500", "--slo", "p99<20ms", *FAST, "--json")
    assert code == 0, err
    plan = json.loads(out)
    assert plan["recommended"] == 0
    assert plan["pareto"] and all(0 <= i < len(plan["candidates"]) for i in plan["pareto"])
    best = plan["candidates"][0]
    assert best["meets_slo"] and best["tail_latency_s"] <= 0.020
    assert best["cost_usd_per_million"] > 0 and "headroom" in best
    assert best["groups"][0]["server"]["name"] in ("T4", "L4")
    assert isinstance(plan["infeasible"], dict)


def test_json_is_the_api_result() -> None:
    import gpucast

    code, out, err = run("--model", "mlp:500", "--slo", "p99<20ms", *FAST, "--json")
    assert code == 0, err
    api = gpucast.plan_serve(
        models=["mlp:500"], slo="p99<20ms", gpus=["T4", "L4"], no_mig=True, duration_s=10
    )
    from gpucast.domain.jsonable import jsonable

    assert json.loads(out) == jsonable(api.to_dict())


def test_table_output_and_two_models() -> None:
    code, out, err = run("--model", "mlp:200", "--model", "mlp-b", "--rate", "50",
                         "--slo-ms", "30", "--slo-percentile", "95", *FAST)  # fmt: skip
    # mlp-b is not a workload: one clear line, exit 2
    assert code == 2 and "mlp-b" in err
    code, out, err = run("--model", "mlp:200", "--slo-ms", "30", *FAST)
    assert code == 0, err
    assert "recommended" in out and "T4" in out


def test_slo_below_every_server_is_one_line_exit_2() -> None:
    code, _out, err = run("--model", "mlp:100", "--slo", "p99<0.001ms", *FAST)
    assert code == 2
    assert "fastest" in err and "raise the SLO" in err
    assert len(err.strip().splitlines()) <= 2


@pytest.mark.parametrize("model", ["mlp:0", "mlp:-3"])
def test_rate_must_be_positive(model: str) -> None:
    code, _out, err = run("--model", model, "--slo-ms", "50", *FAST)
    assert code == 2 and "must be > 0" in err


@pytest.mark.parametrize(
    "args, text",
    [
        (["--slo-ms", "50"], "model: is required"),
        (["--model", "mlp:10"], "slo: is required"),
        (["--model", "mlp", "--slo-ms", "50"], "model: mlp has no rate"),
        (["--model", "mlp:10", "--slo", "fast please"], "slo: must look like p99<50ms"),
        (["--model", "mlp:10", "--slo-ms", "50", "--max-batch-sizes", "1,x"], "max-batch-sizes"),
        (["--model", "mlp:10", "--slo-ms", "50", "--placement", "nearby"], "placement: must be"),
        (["--model", "mlp:10", "--slo-ms", "50", "--latency-table", "t4.csv"], "MODEL@SERVER=CSV"),
        (["--model", "mlp:10", "--slo-ms", "50", "--precision", "fp7"], "precision: must be"),
        (["--model", "mlp:10,mlp:20", "--slo-ms", "50"], "model: lists a model twice"),
        # QA 38 I #8: the fix named --rate alone, where plan serve's rates are in --model
        (["--model", "mlp:1e12", "--slo-ms", "50"], "lower the rates in --model (NAME:RATE)"),
    ],
)
def test_bad_options_are_one_line_exit_2(args: list[str], text: str) -> None:
    code, _out, err = run(*args)
    assert code == 2, err
    assert text in err
    assert len(err.strip().splitlines()) == 1


def test_mig_profile_not_on_gpu() -> None:
    code, _out, err = run("--model", "mlp:10", "--slo-ms", "50", "--mig", "T4:1g.5gb")
    assert code == 2 and "T4 does not support MIG" in err


def test_trace_with_malformed_rows_is_reported(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    rows = ["arrival_s"] + [f"{i * 0.01:.3f}" for i in range(500)] + ["oops", "-"]
    trace.write_text("\n".join(rows) + "\n", encoding="utf-8")
    code, out, err = run("--model", "mlp", "--trace", str(trace), "--slo-ms", "30", *FAST, "--json")
    assert code == 0, err
    assert "skipped 2 malformed" in err
    plan = json.loads(out)
    assert plan["request"]["models"][0]["rate_rps"] == pytest.approx(100, rel=0.01)


def test_a_trace_rate_in_the_title_is_rounded(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"  # 12 gaps over 0.7952 s: 15.0905... req/s
    rows = ["arrival_s"] + [f"{i * 0.0662667:.7f}" for i in range(13)]
    trace.write_text("\n".join(rows) + "\n", encoding="utf-8")
    code, out, err = run("--model", "mlp", "--trace", str(trace), "--slo-ms", "30", *FAST)
    assert code == 0, err
    assert "mlp 15.1 req/s" in out and "15.09" not in out


def test_azure_functions_trace(tmp_path: Path) -> None:
    trace = tmp_path / "invocations.csv"
    header = "HashOwner,HashApp,HashFunction,Trigger," + ",".join(str(i) for i in range(1, 4))
    trace.write_text(f"{header}\no,a,f,http,600,900,300\no,a,g,http,1,x,1\n", encoding="utf-8")
    whole = [*FAST[:-2], "--json"]  # a trace shorter than an hour is replayed whole
    code, out, err = run("--model", "mlp", "--trace", str(trace), "--slo-ms", "30", *whole)
    assert code == 0, err
    assert "skipped 1 malformed" in err
    assert json.loads(out)["candidates"][0]["requests_in"] == 1800
    # --duration-s: its first D s (the first minute's 600 requests, and a few of the second:
    # the replay starts at the first arrival), as simulate serve does
    code, out, err = run("--model", "mlp", "--trace", str(trace), "--slo-ms", "30", *whole,
                         "--duration-s", "60")  # fmt: skip
    assert code == 0, err
    assert 600 <= json.loads(out)["candidates"][0]["requests_in"] < 630


def test_a_long_trace_is_planned_on_its_busiest_hour(tmp_path: Path) -> None:
    # 3 h: 1 req/s, then 4 req/s, then 1 req/s; the plan sizes for the busy hour, says so
    times = [*range(3600), *(3600 + i / 4 for i in range(4 * 3600)), *range(7200, 10800)]
    trace = tmp_path / "hours.csv"
    trace.write_text("arrival_s\n" + "\n".join(f"{t:g}" for t in times) + "\n")
    args = ["--model", "mlp", "--trace", str(trace), "--slo-ms", "30", *FAST[:-2]]
    code, out, err = run(*args, "--json")
    assert code == 0, err
    plan = json.loads(out)
    assert plan["candidates"][0]["requests_in"] == 14_400
    assert plan["request"]["models"][0]["rate_rps"] == pytest.approx(4.0, rel=1e-3)
    arrivals = plan["assumptions"]["arrivals"]
    assert "its busiest hour (1 h in: 14,400 of 21,600 requests, 4 req/s offered" in arrivals
    assert "--duration-s D replays the trace's first D s instead" in arrivals
    code, out, err = run(*args)  # the table's footer names the window too
    assert code == 0, err
    assert "mlp 4 req/s" in out and "busiest hour" in " ".join(out.split())


def test_config_file(tmp_path: Path) -> None:
    cfg = tmp_path / "plan.yaml"
    cfg.write_text("models: [mlp:300]\nslo: p95<25ms\ngpu: [T4]\nno_mig: true\n"
                   "duration_s: 10\n", encoding="utf-8")  # fmt: skip
    code, out, err = run("--config", str(cfg), "--json")
    assert code == 0, err
    assert json.loads(out)["request"]["slo_percentile"] == 95
    # flags win over the file
    code, out, err = run("--config", str(cfg), "--slo", "p90<25ms", "--json")
    assert code == 0, err
    assert json.loads(out)["request"]["slo_percentile"] == 90
    cfg.write_text("modles: [mlp:300]\n", encoding="utf-8")
    code, _out, err = run("--config", str(cfg))
    assert code == 2 and "modles" in err and "did you mean 'model'" in err


def test_config_file_models_as_mappings(tmp_path: Path) -> None:
    cfg = tmp_path / "plan.toml"
    cfg.write_text('slo-ms = 30\ngpu = ["T4"]\nno-mig = true\nduration-s = 10\n'
                   '[[model]]\nname = "mlp"\nrate = 120\n', encoding="utf-8")  # fmt: skip
    code, out, err = run("--config", str(cfg), "--json")
    assert code == 0, err
    assert json.loads(out)["request"]["models"] == [{"name": "mlp", "rate_rps": 120.0}]


def test_host_capacity_is_applied_to_every_server() -> None:
    code, out, err = run("--model", "mlp:500", "--slo", "p99<20ms", *FAST, "--json",
                         "--host-capacity-rps", "200")  # fmt: skip
    assert code == 0, err
    plan = json.loads(out)
    best = plan["candidates"][0]
    assert best["groups"][0]["server"]["host_capacity_rps"] == 200.0
    assert sum(g["count"] for g in best["groups"]) >= 3  # 500 req/s over 200 per server
    for bad in ("-1", "nan"):
        code, _out, err = run("--model", "mlp:500", "--slo", "p99<20ms", *FAST,
                              "--host-capacity-rps", bad)  # fmt: skip
        assert code == 2 and "host-capacity-rps: must be > 0" in err


def test_help_lists_every_flag_with_its_default() -> None:
    result = CliRunner().invoke(app, ["plan", "serve", "--help"])
    assert result.exit_code == 0, result.output
    for flag in ("--model", "--rate", "--trace", "--slo", "--slo-ms", "--slo-percentile",
                 "--gpu", "--mig", "--no-mig", "--no-cpu", "--provider", "--region", "--spot",
                 "--precision", "--max-batch-sizes", "--max-delays-ms", "--instances",
                 "--max-servers", "--budget-usd-per-hour", "--placement", "--latency-table",
                 "--duration-s", "--host-capacity-rps", "--seed", "--config", "--limit",
                 "--json"):  # fmt: skip
        assert flag in result.output, flag
    assert "0,2,5,10" in result.output  # the planner's delay grid, in ms


def test_error_line_is_the_api_error() -> None:
    import gpucast
    from gpucast.domain.errors import InvalidSpecError

    with pytest.raises(InvalidSpecError) as info:
        gpucast.plan_serve(models=["mlp:0"], slo_ms=20)
    code, _out, err = run("--model", "mlp:0", "--slo-ms", "20")
    assert code == 2
    assert err.strip() == f"error: {info.value}"


def test_report_and_save_then_report_from_the_saved_plan(tmp_path: Path) -> None:
    # #21: plan serve --report/--save, and gpucast report renders the saved plan identically
    html, saved = tmp_path / "plan.html", tmp_path / "plan.json"
    code, out, err = run("--model", "mlp:500", "--slo", "p99<20ms", *FAST,
                         "--report", str(html), "--save", str(saved))  # fmt: skip
    assert code == 0, err
    assert f"report -> {html}" in out and f"plan -> {saved}" in out
    data = json.loads(saved.read_text())
    assert data["kind"] == "serve-plan" and data["candidates"]
    page = html.read_text()
    assert page.startswith("<!DOCTYPE html>") and 'id="recommended"' in page
    assert data["candidates"][data["recommended"]]["description"] in page
    again = tmp_path / "again.html"
    result = CliRunner().invoke(app, ["report", "--plan", str(saved), "--out", str(again)])
    assert result.exit_code == 0, result.output
    assert again.read_text() == page


def test_report_may_not_overwrite_the_trace(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text("arrival_s\n" + "\n".join(f"{i / 100:.2f}" for i in range(200)) + "\n")
    before = trace.read_bytes()
    code, _out, err = run("--model", "mlp", "--arrivals", f"trace:{trace}", "--slo", "p99<20ms",
                          *FAST, "--report", str(trace))  # fmt: skip
    assert code == 2 and "report: is the input file" in err
    assert trace.read_bytes() == before


def test_a_saved_serving_plan_is_not_a_training_plan(tmp_path: Path) -> None:
    from gpucast.app import load_plan
    from gpucast.domain.errors import DataFormatError

    saved = tmp_path / "plan.json"
    code, _out, err = run("--model", "mlp:500", "--slo", "p99<20ms", *FAST, "--save", str(saved))
    assert code == 0, err
    with pytest.raises(DataFormatError, match="is a serving plan, not a training plan"):
        load_plan(saved)


def test_slo_errors_quote_their_fix_and_a_bad_percentile_has_one() -> None:
    """QA 33b #17: fixes read "--slo p99<50ms" (pasted, the shell redirects at <), and
    `--slo 'p0<50ms'` had no fix."""
    cases = [
        ([], "e.g. --slo 'p99<50ms' or --slo-ms 50"),
        (["--slo", "p99<0ms"], "e.g. --slo 'p99<50ms'"),
        (["--slo", "x"], "--slo 'p99<50ms' (quoted"),
        (["--slo", "p0<50ms"], "e.g. --slo 'p99<50ms'"),
    ]
    for extra, fix in cases:
        result = CliRunner().invoke(app, ["plan", "serve", "--model", "resnet50:150", *extra])
        assert result.exit_code == 2, result.output
        (line,) = result.stderr.strip().splitlines()
        assert fix in line, line
        assert " p99<" not in line.replace("like p99<", "")  # every pasteable one quoted


def test_a_latency_table_names_a_planned_model_and_server(tmp_path: Path) -> None:
    """QA 38 I #12: a table for a server the plan does not search (or a model it does not
    plan) was dropped without a word while the output said 'measured tables for mlp@A10G';
    the pick that runs on a table's latencies says so in its validated line."""
    table = tmp_path / "t.csv"
    table.write_text("batch_size,latency_s\n1,0.001\n8,0.004\n")
    for key in ("mlp@A10G", "resnet50@T4", "mlp@t4"):
        code, out, err = run("--model", "mlp:50", "--slo-ms", "50", *FAST,
                             "--latency-table", f"{key}={table}")  # fmt: skip
        assert code == 2, (key, out, err)
        assert f"latency-table: {key} names no model on a server this plan searches" in err
        assert len(err.strip().splitlines()) == 1
    one_gpu = ["--gpu", "T4", "--no-mig", "--duration-s", "10"]
    code, out, err = run("--model", "mlp:50", "--slo-ms", "50", *one_gpu,
                         "--latency-table", f"mlp@T4={table}", "--json")  # fmt: skip
    assert code == 0, err
    assert "serving latency (your latency table + simulator)" in json.loads(out)["validation"]


def test_the_arrivals_help_says_a_trace_replaces_it() -> None:
    # QA 38 N #12: `--trace T --arrivals poisson` ran the trace without a word; an explicit
    # poisson cannot be told from the default, so the help says --trace replaces it
    from gpucast.app.serve import PlanServeRequest
    from gpucast.domain.options import field_for

    arrivals = field_for(PlanServeRequest, "arrivals")
    assert arrivals is not None and "--trace FILE replaces it" in arrivals.info.help
    result = CliRunner().invoke(app, ["plan", "serve", "--help"], env={"COLUMNS": "400"})
    assert "--trace FILE replaces it" in result.output


def test_a_zero_rate_error_starts_with_model_for_cnns_and_language_models() -> None:
    """`--model resnet50:0` read `rate of resnet50: ...`, the LLM path `model: the rate in
    ...`: one field name for one flag."""
    runner = CliRunner()
    cnn = runner.invoke(app, ["plan", "serve", "--model", "resnet50:0", "--slo-ms", "20"])
    llm = runner.invoke(app, ["plan", "serve", "--model", "llama-3-8b:0", "--gpu", "H100-SXM",
                              "--slo-ttft-ms", "500"])  # fmt: skip
    for result, name in ((cnn, "resnet50"), (llm, "llama-3-8b")):
        assert result.exit_code == 2, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, lines
        assert lines[0].startswith(f"error: model: the rate in {name}:0 must be > 0"), lines
