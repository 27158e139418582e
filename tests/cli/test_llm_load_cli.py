"""`gpucast simulate serve --model LLM` with --clients and --find-saturation: text, JSON,
bad input."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from gpucast.cli.app import app

runner = CliRunner()
BASE = ["simulate", "serve", "--model", "llama-3-8b", "--gpu", "H100-SXM"]


def _both(args: list[str]) -> tuple[str, dict]:  # type: ignore[type-arg]
    text = runner.invoke(app, args)
    assert text.exit_code == 0, text.output
    as_json = runner.invoke(app, [*args, "--json"])
    assert as_json.exit_code == 0, as_json.output
    return text.stdout, json.loads(as_json.stdout)


def test_clients_text_and_json_agree() -> None:
    text, out = _both([*BASE, "--clients", "16", "--think-ms", "500", "--duration-s", "60"])
    loop = out["closed_loop"]
    assert loop["clients"] == 16 and loop["think_s"] == 0.5
    assert loop["littles_law_clients"] == pytest.approx(16, rel=0.03)
    line = re.search(r"closed loop: 16 users, think 500 ms: ([\d.]+) req/s achieved", text)
    assert line and float(line.group(1)) == pytest.approx(loop["achieved_rps"], abs=0.006)
    assert f"= {loop['littles_law_clients']:.1f} users (Little's law)" in text
    assert "closed loop: 16 clients, think 500 ms (constant)" in out["arrival_process"]


def test_find_saturation_text_and_json_agree() -> None:
    args = [*BASE, "--rate", "2", "--duration-s", "20", "--output-len", "128", "--find-saturation"]
    text, out = _both(args)
    sat = out["saturation"]
    assert sat["saturation_rps"] > 2 and sat["peak_throughput_rps"] >= sat["saturation_rps"]
    assert "40 median request latencies" in sat["criterion"]
    held = f"held at {sat['offered_rps_at_saturation']:.1f} req/s offered, "
    assert f"saturation: {held}{sat['served_rps_at_saturation']:.1f} served" in text
    assert sat["saturation_rps"] == min(
        sat["offered_rps_at_saturation"], sat["served_rps_at_saturation"]
    )
    assert f"at saturation: {sat['tokens_per_s_at_saturation']:.0f} output tokens/s" in text
    assert "saturation probes" in text
    probes = sat["probes"]
    assert len(probes) >= 3 and {p["held"] for p in probes} == {True, False}
    for p in probes:
        assert {"offered_rps", "served_rps", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s",
                "tpot_p99_s", "run_s"} <= set(p)  # fmt: skip
        assert f"{p['offered_rps']:.2f}" in text


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--clients", "0"], "clients: must be an integer >= 1"),
        (["--clients", "4", "--think-ms", "-5"], "think-ms: must be >= 0 and at most"),
        (["--clients", "4", "--rate", "2"], "clients: is a closed loop"),
        (["--clients", "4", "--find-saturation"], "drop --find-saturation"),
        (["--rate", "2", "--think-ms", "50"], "think-ms: is the closed loop's think time"),
    ],
)
def test_bad_load_options_are_one_line_exit_2(extra, message) -> None:
    result = runner.invoke(app, [*BASE, *extra])
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_one_client_is_one_user() -> None:
    result = runner.invoke(app, ["simulate", "serve", "--model", "llama-3-8b", "--gpu",
                                 "H100-SXM", "--clients", "1", "--duration-s", "20"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "closed loop: 1 user, think 0 ms" in result.stdout
