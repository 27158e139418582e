"""``predict gnn`` options given for a model or mode that does not read them (``--heads`` on
gcn, ``--sampler-workers`` on gat, ``--functions`` without ``--split``): one warning per group,
as ``simulate serve --dram-fraction`` without ``--cache-fraction`` says it has no effect
(QA 37: they were ignored without a word, while ``--software tuned``, ``--split`` or
``--parts`` on the wrong model are refused)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpucast.domain.options import field_for, is_default

if TYPE_CHECKING:
    from gpucast.app.gnn import PredictGnnRequest

#: options only gat/rgat read, only rgat, gcn/sage mini-batches, gcn/sage partitioned epochs
#: (``--gpus N``) and ``--split``
GAT_OPTIONS = (
    "heads",
    "feature_sharding",
    "overlap_fetch",
    "feature_precision",
    "feature_location",
)
RGAT_OPTIONS = ("target", "reverse_relations")
SAMPLER_OPTIONS = ("sampler_workers", "sampler_edges_per_s", "prefetch")
PARTITION_OPTIONS = ("price",)
SPLIT_OPTIONS = ("graph_server", "graph_servers", "functions", "function_memory_gb", "function")


def _flag(request: PredictGnnRequest, name: str) -> str:
    """The option as typed, by its declared flag: ``--heads 8``, ``--no-prefetch``."""
    f = field_for(type(request), name)
    assert f is not None  # the groups above name PredictGnnRequest fields
    value: Any = getattr(request, name)
    if isinstance(value, bool):
        return f.info.cli_flag if value else f"--{f.info.negative or 'no-' + f.flag}"
    return (
        f"{f.info.cli_flag} {value:g}" if isinstance(value, float) else f"{f.info.cli_flag} {value}"
    )


def ignored_options(request: PredictGnnRequest) -> list[str]:
    """A warning per group of options set away from their defaults that ``request``'s model
    and mode do not read."""
    gat = request.model in ("gat", "rgat")
    groups = (
        (not gat, GAT_OPTIONS, "gat/rgat options"),
        (request.model != "rgat", RGAT_OPTIONS, "rgat options"),
        (gat or request.batch is None, SAMPLER_OPTIONS, "gcn/sage mini-batch options"),
        (gat or request.partition_gpus is None, PARTITION_OPTIONS, "for gcn/sage --gpus N"),
        (not request.split, SPLIT_OPTIONS, "--split options"),
    )
    out = []
    for unread, names, what in groups:
        given = [_flag(request, n) for n in names if unread and not is_default(request, n)]
        if given:
            verb = "has" if len(given) == 1 else "have"
            mode = "mini-batch" if request.batch is not None else "full-graph"
            out.append(
                f"{', '.join(given)} {verb} no effect on a {request.model} {mode} step "
                f"({what}); drop {'it' if len(given) == 1 else 'them'}"
            )
    return out
