"""`gpucast predict llm-train`'s text: what it prints beside the best layout."""

from __future__ import annotations

import json
import re

from typer.testing import CliRunner

from gpucast.cli.app import app as cli

runner = CliRunner()


def test_a_steps_energy_reads_in_plain_numbers() -> None:
    """QA session 39: `energy: 605 W per GPU, 1.01e+03 kJ a step` for Llama-2-70B on 64 H100."""
    args = ["predict", "llm-train", "--model", "llama-2-7b", "--gpu", "H100", "--gpus", "8",
            "--seq-len", "2048", "--global-batch", "16384", "--tp", "1", "--pp", "1", "--cp", "1",
            "--vpp", "1", "--micro-batch", "2", "--zero", "1", "--recompute", "selective",
            "--top", "0"]  # fmt: skip
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output
    step_j = json.loads(runner.invoke(cli, [*args, "--json"]).stdout)["energy"]["step_energy_j"]
    assert step_j > 1e6  # a step of more than 1,000 kJ: where ",.3g" wrote 1.01e+03
    line = next(x for x in result.output.splitlines() if x.strip().startswith("energy:"))
    assert "e+" not in line
    assert f" {step_j / 1e3:,.0f} kJ a step, " in line
    assert re.search(r"energy: [\d,]+ W per GPU, ", line)
