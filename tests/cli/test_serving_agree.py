"""The serving verbs agree with each other (QA session 33): the same arrival file, the same
SLO grammar, defaults said to be defaults, and an alias that says which options apply."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpucast.cli.app import app

runner = CliRunner()


def _arrivals(tmp_path: Path) -> Path:
    """An ``arrival_s`` CSV: 40 requests, one every 1.5 s (within a minute)."""
    path = tmp_path / "arr.csv"
    path.write_text("arrival_s\n" + "".join(f"{1.5 * i:g}\n" for i in range(40)))
    return path


def _json(argv: list[str]) -> dict[str, object]:
    result = runner.invoke(app, [*argv, "--json"])
    assert result.exit_code == 0, result.output
    out: dict[str, object] = json.loads(result.stdout)
    return out


def test_one_arrival_file_feeds_every_serving_verb(tmp_path: Path) -> None:
    """QA #7: an arrival_s CSV that simulate serve replays is taken by simulate serverless
    (one function's invocations) and simulate kaas (--arrivals trace:FILE), and each output
    names the process it used."""
    path = _arrivals(tmp_path)
    serve = _json(["simulate", "serve", "--model", "mlp", "--gpu", "T4",
                   "--arrivals", f"trace:{path}"])  # fmt: skip
    assert serve["requests"] == 40 and "arr.csv" in str(serve["arrival_process"])
    fn = _json(["simulate", "serverless", "--trace", str(path), "--models", "mlp"])
    assert fn["invocations"] == 40 and fn["units"] == 1
    assert "arr.csv's arrival_s timestamps, one function" in str(fn["arrival_process"])
    plan = _json(["plan", "serverless", "--trace", str(path), "--models", "mlp"])
    assert plan["invocations"] == 40
    kaas = _json(["simulate", "kaas", "--models", "mlp", "--arrivals", f"trace:{path}"])
    assert str(kaas["arrival_process"]).startswith("trace arr.csv (40 requests")
    assert {r["invocations"] for r in kaas["sharing"].values()} == {40}  # type: ignore[attr-defined]
    constant = _json(["simulate", "kaas", "--models", "mlp", "--arrivals", "constant",
                      "--rate", "10", "--duration-s", "2"])  # fmt: skip
    assert str(constant["arrival_process"]).startswith("constant 10 req/s for 2 s")


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--models", "mlp,resnet18"], "models: gives 2 models, and arr.csv (an arrival_s CSV"),
        (["--models", "mlp", "--unit", "app"], "unit: app needs a trace's applications"),
        (["--models", "mlp", "--day", "2"], "day: picks a day of an Azure Functions 2019"),
    ],
)
def test_what_an_arrival_file_cannot_be_is_one_line(
    tmp_path: Path, extra: list[str], says: str
) -> None:
    path = _arrivals(tmp_path)
    result = runner.invoke(app, ["simulate", "serverless", "--trace", str(path), *extra])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], lines


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "serve", "--model", "mlp:50"],
        ["plan", "serverless", "--synthetic", "5", "--minutes", "60"],
        ["plan", "serve", "--serverless", "--model", "mlp", "--synthetic", "5"],
        ["simulate", "serve", "--model", "mlp", "--gpu", "T4", "--rate", "5"],
    ],
)
@pytest.mark.parametrize("slo", ["p99<2", "2", "p95 <= 0.5"])
def test_an_slo_without_a_unit_is_refused_everywhere(argv: list[str], slo: str) -> None:
    """QA #8/#9: ms or s would be a guess, as for a keep-alive."""
    result = runner.invoke(app, [*argv, "--slo", slo])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "slo: needs the latency's unit (ms or s)" in lines[0], lines
    assert "ms' for milliseconds or" in lines[0]


def test_simulate_serve_takes_the_slo_of_plan_serve() -> None:
    base = ["simulate", "serve", "--model", "mlp", "--gpu", "T4", "--rate", "50",
            "--duration-s", "5"]  # fmt: skip
    by_slo = _json([*base, "--slo", "p99<2ms"])
    by_ms = _json([*base, "--slo-ms", "2"])
    assert by_slo["slo_s"] == by_ms["slo_s"] == pytest.approx(0.002)
    assert by_slo["slo_attainment"] == by_ms["slo_attainment"]
    assert by_slo["slo_percentile"] == by_ms["slo_percentile"] == 99.0
    attained = float(by_slo["slo_attainment"])  # type: ignore[arg-type]
    assert by_slo["slo_met"] is (attained >= 0.99)
    loose = _json([*base, "--slo", "p50<1s"])
    assert loose["slo_percentile"] == 50.0 and loose["slo_met"] is True
    text = runner.invoke(app, [*base, "--slo", "p50<1s"])
    assert "SLO p50 <= 1000 ms met: 100.0% of requests within 1000 ms" in text.stdout
    both = runner.invoke(app, [*base, "--slo", "p99<2ms", "--slo-ms", "2"])
    assert both.exit_code == 2 and "slo: and --slo-ms both give the SLO" in both.stderr


@pytest.mark.parametrize(
    ("verb", "extra"),
    [
        (["plan", "serve", "--model", "mlp:50"], ["--slo-ms", "40"]),
        (["plan", "serve", "--model", "mlp:50"], ["--slo-percentile", "95"]),
        (["plan", "serve", "--model", "mlp:50"], ["--slo-ms", "40", "--slo-percentile", "95"]),
        (["simulate", "serve", "--model", "mlp", "--gpu", "T4", "--rate", "5"], ["--slo-ms", "40"]),
    ],
)
def test_an_slo_given_twice_is_refused_in_one_line(verb: list[str], extra: list[str]) -> None:
    """QA2 #1: plan serve took --slo-ms / --slo-percentile over --slo silently; every serving
    verb now refuses the pair with simulate serve's line."""
    result = runner.invoke(app, [*verb, "--slo", "p99<50ms", *extra])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"slo: and {extra[0]} both give the SLO" in lines[0], lines
    assert "give one, e.g. --slo 'p99<100ms' alone" in lines[0]


def test_plan_serve_takes_slo_ms_with_its_percentile() -> None:
    """--slo-ms with --slo-percentile (no --slo) stays the way to give a non-p99 SLO."""
    out = _json(["plan", "serve", "--model", "mlp:50", "--slo-ms", "40", "--slo-percentile",
                 "95", "--gpu", "T4", "--limit", "1", "--duration-s", "5"])  # fmt: skip
    request = out["request"]
    assert isinstance(request, dict)
    assert request["slo_s"] == pytest.approx(0.04) and request["slo_percentile"] == 95.0


def test_defaults_that_set_a_result_are_marked() -> None:
    """QA #18: the SLO and GPU plan serverless used, the GPU, rate, pool and span of kaas."""
    plan = ["plan", "serverless", "--synthetic", "5", "--minutes", "60", "--models", "mlp"]
    head = runner.invoke(app, plan).stdout.splitlines()[0]
    assert "on T4 (--gpu default)" in head and "SLO p99 <= 2 s (--slo default)" in head
    assert _json(plan)["defaults"] == ["--gpu", "--slo"]
    given = runner.invoke(app, [*plan, "--gpu", "T4", "--slo", "p99<2s"]).stdout
    assert "default)" not in given.splitlines()[0]
    assert _json([*plan, "--gpu", "T4", "--slo", "p99<2s"])["defaults"] == []
    simulate = ["simulate", "serverless", "--synthetic", "5", "--minutes", "60", "--models", "mlp"]
    assert "on T4 (--gpu default)" in runner.invoke(app, simulate).stdout.splitlines()[0]
    kaas = ["simulate", "kaas", "--models", "mlp", "--duration-s", "1"]
    d = _json(kaas)
    assert d["defaults"] == ["--gpu", "--rate", "--pool-gpus"]
    text = runner.invoke(app, kaas).stdout
    assert "mlp on T4 (--gpu default)" in text
    assert "Poisson 20 req/s for 1 s (--rate default)" in text
    assert "1 x T4 (--pool-gpus default)" in text


def test_the_models_default_is_marked() -> None:
    """QA 41 QF F8: without --models the serverless verbs serve resnet50 and kaas resnet50 and
    bert-base, which set every figure; the result says the models were the default."""
    simulate = ["simulate", "serverless", "--synthetic", "5", "--minutes", "60", "--gpu", "T4"]
    d = _json(simulate)
    assert d["defaults"] == ["--models"]
    assert d["assumptions"]["assignment"].endswith("of --models resnet50 (--models default)")
    given = _json([*simulate, "--models", "mlp"])
    assert given["defaults"] == [] and "default" not in given["assumptions"]["assignment"]
    plan = ["plan", "serverless", "--synthetic", "5", "--minutes", "60", "--gpu", "T4"]
    assert _json(plan)["defaults"] == ["--models", "--slo"]
    kaas = ["simulate", "kaas", "--duration-s", "1", "--gpu", "T4", "--rate", "5"]
    assert _json(kaas)["defaults"] == ["--models", "--pool-gpus"]
    head = runner.invoke(app, kaas).stdout.splitlines()[0]
    assert head == "resnet50, bert-base (--models default) on T4"


def test_the_cold_start_percentile_key_names_its_unit() -> None:
    """QA #37: the percentile is over functions here (the text says so), not apps."""
    d = _json(["simulate", "serverless", "--synthetic", "5", "--minutes", "60", "--models", "mlp"])
    assert d["unit"] == "function" and "unit_cold_start_pct_p75" in d
    assert "app_cold_start_pct_p75" not in d


def test_plan_serve_serverless_says_which_options_apply() -> None:
    """QA #38: the alias runs plan serverless; plan serve's own options are not its."""
    result = runner.invoke(app, ["plan", "serve", "--serverless", "--model", "resnet50",
                                 "--synthetic", "20", "--arrivals", "constant"])  # fmt: skip
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "No such option: --arrivals" in lines[0]
    assert "with --serverless, plan serve is plan serverless and takes its options" in lines[0]
    assert "gpucast plan serverless --help" in lines[0]
    plain = runner.invoke(app, ["plan", "serve", "--model", "mlp:5", "--arrivalz", "constant"])
    assert plain.exit_code == 2 and "--serverless" not in plain.stderr
