"""`gpucast plan serve` through the CLI: output forms, bad input, traces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from gpucast.cli import app as root
from gpucast.cli.serve_cmds import parse_model_rate, parse_slo, plan_serve_command


def cli() -> typer.Typer:
    app = typer.Typer(cls=root.GpucastGroup)
    app.callback()(root.root)
    group = typer.Typer()
    group.command("serve")(plan_serve_command)
    group.command("noop")(lambda: None)
    app.add_typer(group, name="plan")
    return app


FAST = ["--gpu", "T4", "--gpu", "L4", "--no-mig", "--duration-s", "10"]


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli(), ["plan", "serve", *args])
    err = result.stderr + ("" if result.exception is None else repr(result.exception))
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


def test_mig_profile_not_on_gpu() -> None:
    code, _out, err = run("--model", "mlp:10", "--slo-ms", "50", "--mig", "T4:1g.5gb")
    assert code == 2 and "does not exist on T4" in err


def test_trace_with_malformed_rows_is_reported(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    rows = ["arrival_s"] + [f"{i * 0.01:.3f}" for i in range(500)] + ["oops", "-"]
    trace.write_text("\n".join(rows) + "\n", encoding="utf-8")
    code, out, err = run("--model", "mlp", "--trace", str(trace), "--slo-ms", "30", *FAST, "--json")
    assert code == 0, err
    assert "skipped 2 malformed" in err
    plan = json.loads(out)
    assert plan["request"]["models"][0]["rate_rps"] == pytest.approx(100, rel=0.01)


def test_azure_functions_trace(tmp_path: Path) -> None:
    trace = tmp_path / "invocations.csv"
    header = "HashOwner,HashApp,HashFunction,Trigger," + ",".join(str(i) for i in range(1, 4))
    trace.write_text(f"{header}\no,a,f,http,600,900,300\no,a,g,http,1,x,1\n", encoding="utf-8")
    code, out, err = run("--model", "mlp", "--trace", str(trace), "--slo-ms", "30", *FAST, "--json")
    assert code == 0, err
    assert "skipped 1 malformed" in err
    assert json.loads(out)["candidates"][0]["requests_in"] == 1800


def test_config_file(tmp_path: Path) -> None:
    cfg = tmp_path / "plan.yaml"
    cfg.write_text("models: [mlp:300]\nslo: p95<25ms\ngpu: [T4]\nno_mig: true\n"
                   "duration_s: 10\n", encoding="utf-8")  # fmt: skip
    code, out, err = run("--config", str(cfg), "--json")
    assert code == 0, err
    assert json.loads(out)["request"]["slo_percentile"] == 95
    cfg.write_text("modles: [mlp:300]\n", encoding="utf-8")
    code, _out, err = run("--config", str(cfg))
    assert code == 2 and "models" in err


def test_parsers() -> None:
    assert parse_slo("p99<50ms") == (99.0, pytest.approx(0.05))
    assert parse_slo("p95<=0.2s") == (95.0, pytest.approx(0.2))
    assert parse_slo("40") == (99.0, pytest.approx(0.04))
    assert parse_model_rate("resnet50:150", None) == ("resnet50", 150.0)
    assert parse_model_rate("pkg.mod:factory", 3.0) == ("pkg.mod:factory", 3.0)
    with pytest.raises(Exception, match="slo"):
        parse_slo("fast please")


def test_host_capacity_is_applied_to_every_server() -> None:
    code, out, err = run("--model", "mlp:500", "--slo", "p99<20ms", *FAST, "--json",
                         "--host-capacity-rps", "200")  # fmt: skip
    assert code == 0, err
    plan = json.loads(out)
    best = plan["candidates"][0]
    assert best["groups"][0]["server"]["host_capacity_rps"] == 200.0
    assert sum(g["count"] for g in best["groups"]) >= 3  # 500 req/s over 200 per server
    code, _out, err = run("--model", "mlp:500", "--slo", "p99<20ms", *FAST,
                          "--host-capacity-rps", "-1")  # fmt: skip
    assert code == 2 and "host-capacity-rps" in err
