"""``--json`` is ``json_text(result.to_dict())``: strict JSON, NaN and infinity as null, while
``to_dict()`` keeps them for a Python caller (QA 38 A #8: README said "exactly to_dict()")."""

from __future__ import annotations

import json
import math

from typer.testing import CliRunner

import gpucast
from gpucast.cli.app import app
from gpucast.domain.jsonable import json_text

OVERLOADED = {"model": "llama2-7b", "gpu": "H100-SXM", "rate": 100, "duration_s": 30}


def test_json_of_an_overloaded_server_is_strict_and_the_cli_prints_it() -> None:
    result = gpucast.simulate_serve(**OVERLOADED, horizon_s=20).to_dict()
    assert math.isinf(result["latency_s"]["p99"])  # kept for Python
    text = json_text(result)
    assert json.loads(text, parse_constant=lambda name: 1 / 0)["latency_s"]["p99"] is None
    args = ["simulate", "serve", "--model", "llama2-7b", "--gpu", "H100-SXM", "--rate", "100"]
    cli = CliRunner().invoke(app, [*args, "--duration-s", "30", "--horizon-s", "20", "--json"])
    assert cli.exit_code == 0, cli.output
    assert cli.stdout == text
