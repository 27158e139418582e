"""The one rule for a language-model request beyond its model's context window, in every verb
(``plan serve``, ``simulate serve``, the serverless verbs): every deployment of the model
rejects it at arrival -- it starts no instance, costs nothing, is no invocation -- and it
counts as infinitely late in every latency percentile and SLO share. So where such requests
are more than ``100 - percentile``% of the load, no deployment meets a pNN SLO, and
:func:`beyond_context_error` says so in one line before anything is searched."""

from __future__ import annotations

import math
from collections.abc import Sequence

from gpucast.domain.errors import NoFeasiblePlanError


def beyond_context_error(
    *,
    beyond: int,
    total: int,
    longest: int,
    windows: Sequence[tuple[str, int]],
    percentile: float,
    percentile_flag: str,
) -> NoFeasiblePlanError | None:
    """The error when ``beyond`` of ``total`` requests exceed their model's context window
    (``windows``: each model's name and window in tokens) and leave fewer than
    ``percentile``% to meet an SLO, else None. The fix names a model whose window holds the
    ``longest`` request (prompt + output tokens) and the highest percentile that could be met
    (``percentile_flag``: the verb's flag for it)."""
    from gpucast.catalog.llm import load_llm_models
    from gpucast.domain.units import count_of

    servable = 1.0 - beyond / max(total, 1)
    if servable * 100.0 >= percentile - 1e-9:
        return None
    longer = sorted(
        (m for m in load_llm_models() if m.max_context >= longest), key=lambda m: m.total_params
    )
    model = (
        f"a model whose context window holds {longest:,} tokens (e.g. {longer[0].name}: "
        f"{longer[0].max_context:,})"
        if longer
        else "a model with a longer context window (catalog/data/llm_models.csv)"
    )
    if len(windows) == 1:
        (name, window), whose = windows[0], "it"
        need = f"{name}'s context window of {window:,} tokens"
    else:
        need = "their model's context window (" + ", ".join(
            f"{n}: {w:,} tokens" for n, w in windows
        ) + ")"  # fmt: skip
        whose = "them"
    return NoFeasiblePlanError(
        f"{beyond:,} of {count_of(total, 'request')} ({1 - servable:.1%}) need more than "
        f"{need} (prompt + output): every deployment of {whose} rejects them, so none serves "
        f"{percentile:g}% of the requests within the SLOs (at most {servable:.1%})",
        fix=f"serve {model}, or an SLO at the {math.floor(servable * 1000) / 10:g}th percentile "
        f"or lower ({percentile_flag})",
    )
