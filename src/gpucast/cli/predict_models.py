"""`gpucast predict llm-train|infer|gnn|embedding-cache`: published LLMs, graph models and
the embedding-cache hit-rate curve.

Each command joins the `predict` group (:data:`gpucast.cli.verbs.JOINS`); the flags are the
fields of its request, the work happens in :mod:`gpucast.app`, this module only renders.
"""

from __future__ import annotations

import typer

from gpucast.app.embeddings import PredictEmbeddingCacheRequest
from gpucast.app.gnn import PredictGnnRequest, PredictGnnResult
from gpucast.app.infer import PredictInferRequest
from gpucast.app.llm import PredictLlmTrainRequest
from gpucast.cli._command import request_command
from gpucast.cli._common import JSON_OPTION_HELP, console, emit_json, print_warnings
from gpucast.domain.units import count_of, format_amount, format_ms_sig, format_ratio, format_sig


@request_command(PredictLlmTrainRequest)
def llm_train_command(
    request: PredictLlmTrainRequest,
    json_out: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Predict one training step of a published LLM under 3D parallelism: the fastest layout
    (tp, pp, dp, micro-batch, ZeRO, recompute) that fits, its memory per GPU, MFU, tokens/s."""
    from gpucast.app import predict_llm_train

    result = predict_llm_train(request)
    if json_out:
        emit_json(result.to_dict())
        return
    for i, p in enumerate((result.best, *result.alternatives)):
        mem = p.memory
        band = (
            f" [{format_sig(p.step_time.lower)}, {format_sig(p.step_time.upper)}]" if i == 0 else ""
        )
        console.print(
            f"{'best' if i == 0 else f'  #{i + 1}'}: {p.layout.label()}: "
            f"{p.step_time_s:.3g} s/step{band}, {p.tokens_per_s:,.0f} tokens/s, MFU "
            f"{p.mfu:.0%}{' of the fp8 peak' if p.layout.precision == 'fp8' else ''}, "
            f"{mem.total_bytes / 2**30:.1f} of {mem.usable_bytes / 2**30:.1f} GiB "
            f"per GPU, bound by {p.bottleneck}",
            highlight=False,
            markup=False,
        )
    console.print(
        f"  {result.layouts_tried} layouts tried; {result.step_time_model}", highlight=False
    )
    if result.interval_note:
        console.print(f"  {result.interval_note}", highlight=False, markup=False)
    for note in result.best.notes:  # the best layout's own: uneven stages, fp8's scope, ...
        if note != result.interval_note:
            console.print(f"  note: {note}", highlight=False, markup=False)
    console.print(f"  validated: {result.validation.text()}", highlight=False, markup=False)
    if result.energy:
        e = result.energy
        console.print(
            f"  energy: {e['avg_power_w']:,.0f} W per GPU, "
            f"{format_amount(e['step_energy_j'] / 1e3)} kJ a step, "
            f"{e['energy_j_per_token']:.3g} J a token (the best layout)",
            highlight=False,
            markup=False,
        )
    if result.cost:
        c = result.cost
        console.print(
            f"  cost: ${c['usd_per_hour']:,.2f}/h, ${c['usd_per_million_tokens']:,.4g} per 1M "
            f"tokens ({count_of(c['paid_gpus'], 'GPU')} paid for; the best layout)",
            highlight=False,
            markup=False,
        )
    for name, value in result.assumptions.items():
        console.print(f"  assumption {name}: {value}", highlight=False, markup=False)


@request_command(PredictInferRequest)
def infer_command(
    request: PredictInferRequest,
    json_out: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Predict one batch of a published LLM with an inference engine: time to first token,
    batch latency, generated tokens/s, memory per GPU and whether it fits."""
    from gpucast.app import predict_infer

    result = predict_infer(request)
    if json_out:
        emit_json(result.to_dict())
        return
    p = result.prediction
    mem = p.memory
    (t_lo, t_hi), (l_lo, l_hi) = result.interval("ttft_s"), result.interval("latency_s")
    r_lo, r_hi = result.interval("tokens_per_s")
    console.print(
        f"{p.model} on {p.tp} x {p.gpu} with {result.engine.display_name} ({p.precision_text()}, "
        f"batch {p.batch_size} x {p.input_len} + {p.output_len} tokens): "
        f"TTFT {format_sig(p.ttft_s)} s [{format_sig(t_lo)}, {format_sig(t_hi)}], batch latency "
        f"{format_sig(p.latency_s)} s [{format_sig(l_lo)}, {format_sig(l_hi)}], "
        f"{p.tokens_per_s:,.0f} generated tokens/s "
        f"[{r_lo:,.0f}, {r_hi:,.0f}], {p.tpot_s * 1e3:.1f} ms per output token",
        highlight=False,
        markup=False,
    )
    console.print(f"  {result.band.note}", highlight=False, markup=False)
    console.print(
        f"  memory per GPU: {mem.total_bytes / 2**30:.1f} GiB (weights "
        f"{mem.weights_bytes / 2**30:.1f} + KV cache {mem.kv_cache_bytes / 2**30:.1f}) of "
        f"{mem.capacity_bytes / 2**30:.1f} GiB the engine gives them: "
        f"{'fits' if p.fits else 'does NOT fit'}; bound by {p.bottleneck}",
        highlight=False,
        markup=False,
    )
    if "memory" in result.assumptions:
        console.print(
            f"  memory rule: {result.assumptions['memory']}", highlight=False, markup=False
        )
    for note in p.notes:
        console.print(f"  {note}", highlight=False, markup=False)
    said = result.assumptions["precision"]
    console.print(f"  precision: {said}", highlight=False, markup=False)
    console.print(f"  engine: {result.engine.provenance()}", highlight=False, markup=False)
    if "intra-node links" in result.assumptions:
        console.print(
            f"  links: {result.assumptions['intra-node links']}", highlight=False, markup=False
        )
    console.print(f"  validated: {result.validation.text()}", highlight=False, markup=False)
    if result.energy:
        e = result.energy
        console.print(
            f"  energy: {e['avg_power_w']:,.0f} W per GPU, {e['batch_energy_j'] / 1e3:,.3g} kJ "
            f"the batch, {e['energy_j_per_token']:.3g} J a generated token",
            highlight=False,
            markup=False,
        )
    if result.hint:
        console.print(f"  hint: {result.hint}", highlight=False, markup=False)


_ms = format_ms_sig  # every time predict gnn prints, in ms


def gnn_lines(result: PredictGnnResult) -> list[str]:
    """The headline of ``predict gnn`` (in ms): the figure asked for first -- the epoch over
    ``--gpus N`` GPUs, else the step -- then the dense-adjacency pricing beside the GPU step
    it is a ratio of (a mini-batch step bound by CPU sampling is not that step); and the
    partitioned epoch's terms or the GPU/sampling split."""
    what = f"{result.model} on {result.gpu}, {result.nodes:,} nodes, {result.edges:,} edges"
    gpu_step = result.gpu_step_time_s or result.step_time_s
    ratio = format_ratio(result.dense_step_time_s / gpu_step)
    dense = f"a dense adjacency would take {_ms(result.dense_step_time_s)} ms on the GPU ({ratio})"
    e = result.partitioned
    if e is not None:
        i = e.slowest
        cost = (
            "no price (give --price)"
            if result.usd_per_epoch is None or result.usd_per_gpu_hour is None
            else f"${result.usd_per_epoch:.4g} per epoch ({e.gpus} x "
            f"${result.usd_per_gpu_hour:.2f} per GPU-hour)"
        )
        return [
            f"{what}: {_ms(e.epoch_s)} ms per epoch on {count_of(e.gpus, 'GPU')} "
            f"({result.partition_method} partition); on one GPU {_ms(result.step_time_s)} ms "
            f"(sparse aggregation), {dense}",
            f"  epoch on {count_of(e.gpus, 'GPU')}: compute {_ms(e.compute_s[i])} + halo exchange "
            f"{_ms(e.exchange_s[i])} + all-reduce {_ms(e.allreduce_s)} ms (part {i}, the "
            f"slowest); halo {e.halo_share:.0%} of the epoch; {cost}",
        ]
    if result.sampling_s is None or result.gpu_step_time_s is None:
        n = result.data_parallel_gpus
        how = (
            "(sparse aggregation)"
            if n == 1
            else f"on each of {n} GPUs (data parallel, sparse aggregation, all-reduce included)"
        )
        return [f"{what}: {_ms(result.step_time_s)} ms per step {how}; {dense}"]
    return [
        f"{what}: {_ms(result.step_time_s)} ms per step, bound by {result.bound}",
        f"  GPU step {_ms(result.gpu_step_time_s)} ms (sparse aggregation; {dense}), CPU "
        f"sampling {_ms(result.sampling_s)} ms a batch",
    ]


@request_command(PredictGnnRequest)
def gnn_command(
    request: PredictGnnRequest,
    json_out: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Predict one GCN / GraphSAGE / GAT (full graph or mini-batch) or R-GAT (mini-batch)
    training step with sparse aggregation, against a dense-adjacency pricing; halo bytes of a
    METIS partition."""
    from gpucast.app import predict_gnn

    result = predict_gnn(request)
    print_warnings(result.warnings)
    if json_out:
        emit_json(result.to_dict())
        return
    for line in gnn_lines(result):
        console.print(line, highlight=False, markup=False)
    if result.nodes_per_hop:
        hops = ", ".join(f"{n:,.0f}" for n in result.nodes_per_hop)
        console.print(
            f"  sampled nodes per hop: {hops}; feature fetch {_ms(result.feature_fetch_s)} ms",
            highlight=False,
            markup=False,
        )
    if result.halo_nodes is not None and result.halo_bytes_per_epoch is not None:
        console.print(
            f"  halo nodes per part: {', '.join(f'{h:,}' for h in result.halo_nodes)}; "
            f"{result.halo_bytes_per_epoch / 2**30:.3g} GiB across parts per epoch",
            highlight=False,
            markup=False,
        )
    if result.phases_s:
        phases = ", ".join(f"{k.removesuffix('_s')} {_ms(v)} ms" for k, v in
                           result.phases_s.items())  # fmt: skip
        console.print(f"  per GPU: {phases}", highlight=False, markup=False)
    if result.eval_step_time_s is not None:
        console.print(
            f"  evaluation step (forward only): {_ms(result.eval_step_time_s)} ms",
            highlight=False,
            markup=False,
        )
    for option in result.split:
        console.print(f"  {option.text()}", highlight=False, markup=False)
    for note in result.notes:
        console.print(f"  {note}", highlight=False, markup=False)
    for name, value in result.assumptions.items():
        console.print(f"  assumption {name}: {value}", highlight=False, markup=False)
    if result.validated:
        console.print(f"  validated: {result.validated}", highlight=False, markup=False)


@request_command(PredictEmbeddingCacheRequest)
def embedding_cache_command(
    request: PredictEmbeddingCacheRequest,
    json_out: bool = typer.Option(False, "--json", help=JSON_OPTION_HELP),
) -> None:
    """Predict an embedding cache's LRU/LFU hit rate at each cache size (a share of the
    distinct rows) from the locality model fitted on a dlrm_datasets window; --replay adds an
    exact replay of a synthetic stream matching the window."""
    from rich.table import Table

    from gpucast.app import predict_embedding_cache

    result = predict_embedding_cache(request)
    print_warnings(result.warnings)
    if json_out:
        emit_json(result.to_dict())
        return
    console.print(
        f"{result.policy.upper()} hit rate, dlrm_datasets {result.window} window "
        f"{result.trace} ({result.lookups:,} lookups, {result.unique_rows:,} distinct rows):",
        highlight=False,
        markup=False,
    )
    table = Table(show_edge=False)
    columns = ["cache share", "cache rows", "predicted"]
    if result.replayed:
        columns.append("replayed")
    for column in columns:
        table.add_column(column, justify="right")
    for p in result.points:
        row = [f"{p.fraction:.3g}", f"{p.cache_rows:,}", f"{p.predicted_hit_rate:.1%}"]
        if result.replayed:
            replayed = p.replayed_hit_rate
            row.append("-" if replayed is None else f"{replayed:.1%}")
        table.add_row(*row)
    console.print(table)
    console.print(f"  validated: {result.validation.text()}", highlight=False, markup=False)
    for name, value in result.assumptions.items():
        console.print(f"  assumption {name}: {value}", highlight=False, markup=False)
