"""The options several verbs share mean one range in all of them (QA #17): ``--seed``,
``--price`` and ``--pool-gpus`` are checked by one function each (``domain.limits``), and
``--allow-large`` lifts ``simulate kaas``'s ceiling as it lifts the others'.

The verbs are found from the fuzz table's request classes (:mod:`tests.cli.fuzz_cases`): a
new verb with one of these options is checked here without touching this file.
"""

from __future__ import annotations

from pathlib import Path

import fuzz_cases  # the table beside this file (pytest puts tests/cli on sys.path)
import pytest
from typer.testing import CliRunner

from gpucast.cli.app import app
from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.limits import (
    MAX_POOL_GPUS,
    MAX_PRICE_USD_PER_HOUR,
    MAX_SEED,
    check_pool_gpus,
    check_price,
    check_seed,
)
from gpucast.domain.options import fields_of

runner = CliRunner()

#: field -> (what every verb says, values just outside the range)
RANGES: dict[str, tuple[str, tuple[str, ...]]] = {
    "seed": ("seed: must be an integer in [0, 2^53)", ("-1", str(MAX_SEED))),
    "price": ("price: must be in (0, 1,000,000] US$/h", ("0", "1000000.5")),
    "pool_gpus": ("pool-gpus: must be an integer in [1, 10,000]", ("0", str(MAX_POOL_GPUS + 1))),
}

#: the language-model spellings of the serving verbs (other request classes, one CLI verb)
LLM = (
    ("simulate", "serve", "--model", "llama-3-8b", "--gpu", "H100-SXM", "--rate", "1"),
    ("plan", "serve", "--model", "llama-3-8b", "--rate", "1", "--slo-ttft-ms", "500"),
)


#: what a fuzz table's base lacks to reach the option's check (the fuzz table's plan
#: llm-train stops at its missing --global-batch)
MISSING: dict[tuple[str, ...], tuple[str, ...]] = {("plan", "llm-train"): ("--global-batch", "64")}


def _cases() -> list[object]:
    out = []
    for cmd in fuzz_cases.COMMANDS:
        pos = (cmd.positional,) if cmd.positional else (*MISSING.get(cmd.path, ()),)
        for f in fields_of(fuzz_cases._request_class(cmd.request)):
            if f.name not in RANGES or f.name in cmd.skip_fields:
                continue
            for value in RANGES[f.name][1]:
                argv = (*cmd.path, *pos, *fuzz_cases._with(cmd.base, f.info.cli_flag, value))
                out.append(pytest.param(f.name, argv, id=f"{' '.join(cmd.path)} {f.flag}={value}"))
    for base in LLM:
        for name in ("seed", "price"):
            for value in RANGES[name][1]:
                argv = (*base, f"--{name}", value)
                out.append(pytest.param(name, argv, id=f"{' '.join(base[:2])} llm {name}={value}"))
    return out


CASES = _cases()


def test_the_table_covers_every_verb_with_the_options() -> None:
    verbs = {" ".join(argv[:2]) for _name, argv in (c.values for c in CASES)}  # type: ignore[attr-defined]
    for verb in ("simulate kaas", "simulate serverless", "plan serverless", "simulate serve",
                 "plan serve", "plan placement", "simulate train", "plan train", "catalog mig",
                 "predict gnn", "plan llm-train", "predict embedding-cache"):  # fmt: skip
        assert verb in verbs, (verb, sorted(verbs))


@pytest.mark.parametrize(("name", "argv"), CASES)
def test_every_verb_refuses_the_same_range(
    name: str, argv: tuple[str, ...], tmp_path_factory: pytest.TempPathFactory
) -> None:
    files = fuzz_cases.make_files(tmp_path_factory.mktemp("ranges"))
    result = runner.invoke(app, fuzz_cases.resolve_argv(argv, files))
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and RANGES[name][0] in lines[0], lines


def test_the_edges_of_each_range_are_taken() -> None:
    check_seed(0)
    check_seed(MAX_SEED - 1)
    check_price(MAX_PRICE_USD_PER_HOUR)
    check_price(1e-6)
    check_pool_gpus(1)
    check_pool_gpus(MAX_POOL_GPUS)
    for bad in (True, 1.0, "1"):
        with pytest.raises(InvalidSpecError, match="seed"):
            check_seed(bad)


def test_kaas_takes_the_largest_pool_and_allow_large(tmp_path: Path) -> None:
    import gpucast

    big = gpucast.simulate_kaas(models=["mlp"], pool_gpus=MAX_POOL_GPUS, rate=5, duration_s=1)
    assert big.results["kernel"].gpus == MAX_POOL_GPUS
    argv = ["simulate", "kaas", "--models", "resnet50", "--gpu", "H100-SXM", "--rate", "100000",
            "--duration-s", "300"]  # fmt: skip
    refused = runner.invoke(app, argv)
    assert refused.exit_code == 2 and "or pass --allow-large" in refused.stderr
