"""What LLM serving (``simulate serve`` / ``plan serve`` with a language model) needs.

* :func:`llm_traffic` -- requests with token counts: a replayed trace (the Azure LLM trace
  with its prompt and output tokens; an ``arrival_s`` CSV or Azure Functions counts with
  drawn lengths), time-scaled or rescaled to a rate, or synthetic arrivals (Poisson,
  constant, bursty: :func:`gpucast.inputs.serving.arrivals`) with drawn lengths. Skipped
  malformed rows and requests beyond the model's context window come back as warnings; a
  trace none of whose requests fits is refused.
* :func:`serving_model` -- the model, GPU, engine, tensor-parallel degree and the
  :class:`~gpucast.domain.llm_serving.IterationCost` the simulator runs on, with its price.
* :func:`kv_link_gbps`, :func:`swap_gbps` -- the links of disaggregation and swapping.
* :func:`is_llm_model` -- whether a serving verb's ``--model`` names a language model.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from gpucast.domain.catalog import GpuSpec, Offer
from gpucast.domain.errors import InvalidSpecError, UnknownModelError
from gpucast.domain.llm import TransformerSpec
from gpucast.domain.llm_infer import EngineProfile, check_kv_units, check_weight_units
from gpucast.domain.llm_serving import IterationCost, LlmRequests, TokenLengths
from gpucast.domain.parallel import NodeLinks
from gpucast.domain.provenance import Sourced
from gpucast.domain.units import count_of

if TYPE_CHECKING:
    from gpucast.plan.llm_serve import GpuChoice

TRACE_PREFIX = "trace:"
#: Seconds of synthetic arrivals when no ``--duration-s`` is given (the arrivals line says so).
DEFAULT_DURATION_S = 60.0
#: Link for a KV-cache transfer when the GPU has no catalog offer (Gbit/s per GPU).
DEFAULT_KV_LINK_GBPS = 100.0


def is_llm_model(name: object) -> bool:
    """Whether ``name`` (``NAME`` or ``NAME:RATE``) is a model of ``llm_models.csv``."""
    from gpucast.catalog.llm import llm_model

    if isinstance(name, list | tuple):
        if len(name) != 1:
            return False
        name = name[0]
    if not isinstance(name, str) or not name:
        return False
    head, sep, _tail = name.rpartition(":")
    candidates = [name] + ([head] if sep and head else [])
    for candidate in candidates:
        try:
            llm_model(candidate)
        except UnknownModelError:
            continue
        return True
    return False


@dataclass(frozen=True, slots=True, kw_only=True)
class LlmTraffic:
    """The requests, where they came from, and what was skipped or dropped on the way."""

    requests: LlmRequests
    source: str
    lengths: str
    warnings: tuple[str, ...] = ()


def _trace_path(arrivals: str) -> Path | None:
    return Path(arrivals[len(TRACE_PREFIX) :]) if arrivals.startswith(TRACE_PREFIX) else None


def _clip(
    inp: np.ndarray, out: np.ndarray, spec: TransformerSpec, what: str
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Drawn lengths kept inside the context window (prompt < context, prompt + output <=
    context), with a warning when any draw was cut."""
    ctx = spec.max_context
    new_in = np.minimum(inp, ctx - 1)
    new_out = np.minimum(out, ctx - new_in)
    cut = int(np.count_nonzero((new_in != inp) | (new_out != out)))
    notes = []
    if cut:
        notes.append(
            f"{cut} drawn {what} were cut to {spec.name}'s context window of {ctx} tokens "
            "(prompt + output)"
        )
    return new_in, new_out, notes


def llm_traffic(
    arrivals: str,
    *,
    spec: TransformerSpec,
    rate_rps: float | None,
    duration_s: float | None,
    time_scale: float | None,
    input_len: TokenLengths,
    output_len: TokenLengths,
    seed: int,
    field: str = "arrivals",
    window_s: float | None = None,
    given_lengths: tuple[str, ...] = (),
) -> LlmTraffic:
    """Requests for serving ``spec`` (module docstring). A trace is replayed ``time_scale``
    times faster or rescaled to ``rate_rps``, then cut at ``duration_s`` when given, else to
    its busiest ``window_s`` seconds when given (:func:`gpucast.inputs.serving.busiest_part`),
    else whole; synthetic arrivals run ``duration_s`` (default 60 s) at ``rate_rps``.
    ``given_lengths``: the length flags the user set, refused with a trace that gives each
    request's tokens (they would go unused)."""
    from gpucast.inputs import serving as cnn_inputs
    from gpucast.simulate import arrivals as gen
    from gpucast.simulate.llm_serving import offered_rps

    rng = np.random.default_rng([seed, 1])  # lengths: independent of the arrival draws
    warnings: list[str] = []
    path = _trace_path(arrivals)
    lengths = f"prompt {input_len.describe()}, output {output_len.describe()} tokens"
    if path is None:
        if time_scale is not None:
            raise InvalidSpecError(
                "time-scale", "applies to a trace (--arrivals trace:FILE)",
                fix="drop --time-scale or replay a trace",
            )  # fmt: skip
        if rate_rps is None:
            raise InvalidSpecError(
                "rate", f"is required with --arrivals {arrivals}",
                fix="e.g. --rate 5 (requests/s), or --arrivals trace:FILE",
            )  # fmt: skip
        duration = DEFAULT_DURATION_S if duration_s is None else duration_s
        made = cnn_inputs.arrivals(arrivals, rate_rps, duration, seed)
        times = made.times_s
        inp = input_len.draw(rng, times.size)
        out = output_len.draw(rng, times.size)
        if input_len.kind == "fixed" and input_len.a >= spec.max_context:
            raise InvalidSpecError(
                "input-len", f"is beyond {spec.name}'s context window of {spec.max_context} "
                "tokens", got=int(input_len.a),
                fix=f"use --input-len + --output-len <= {spec.max_context}",
            )  # fmt: skip
        fixed = input_len.kind == "fixed" and output_len.kind == "fixed"
        if fixed and input_len.a + output_len.a > spec.max_context:
            raise InvalidSpecError(
                "output-len",
                f"prompt + output ({input_len.a:g} + {output_len.a:g}) is beyond "
                f"{spec.name}'s context window of {spec.max_context} tokens",
                got=int(output_len.a),
                fix=f"use --output-len <= {spec.max_context - int(input_len.a)}",
            )
        inp, out, notes = _clip(inp, out, spec, "lengths")
        warnings += notes
        source = made.source
        if duration_s is None:  # a default that sets the result is shown
            source += f" for {duration:g} s (the default; --duration-s sets it)"
    else:
        times, inp, out, source, notes, drawn = _replay(
            path, spec=spec, seed=seed, rng=rng, input_len=input_len, output_len=output_len,
            field=field,
        )  # fmt: skip
        warnings += notes
        if given_lengths and not drawn:
            flags = " and ".join(f"--{flag}" for flag in given_lengths)
            raise InvalidSpecError(
                given_lengths[0],
                f"is not used: {path.name} gives each request's prompt and output tokens",
                fix=f"drop {flags}, or replay a trace without token columns (arrival_s only)",
            )
        if time_scale is not None and rate_rps is not None:
            raise InvalidSpecError(
                "time-scale", "cannot be combined with --rate",
                fix="give the speed-up factor or the target rate, not both",
            )  # fmt: skip
        if time_scale is not None:
            times = times / time_scale
            source += (  # QA 40 FB: 0.5 read "0.5x faster" for a trace played slower
                f", {time_scale:g}x faster"
                if time_scale >= 1
                else f", {1 / time_scale:g}x slower (--time-scale {time_scale:g})"
            )
        elif rate_rps is not None:
            times = gen.from_timestamps(times, target_rate_rps=rate_rps)
            source += f", rescaled to a mean of {rate_rps:g} req/s over the whole trace"
        if duration_s is not None:
            keep = times < duration_s
            if not keep.all():
                kept = times[keep]
                rate = f", {offered_rps(kept, duration_s):.3g} req/s offered" if kept.size else ""
                source += (
                    f", first {duration_s:g} s ({int(keep.sum())} of {keep.size} requests{rate})"
                )
            times, inp, out = times[keep], inp[keep], out[keep]
            if times.size == 0:
                raise InvalidSpecError(
                    "duration-s", "keeps no request of the trace", got=duration_s,
                    fix="raise --duration-s",
                )  # fmt: skip
        elif window_s is not None:
            part, note = cnn_inputs.busiest_part(times, window_s)
            if note:
                times, inp, out = times[part] - times[part.start], inp[part], out[part]
                source += note
        else:  # replayed whole: its busiest hour named, what plan serve sizes for
            source += cnn_inputs.whole_trace_note(times)
        # what the replayed requests' lengths need: counted on those replayed only
        if drawn:
            inp, out, notes = _clip(inp, out, spec, "lengths")
        else:
            inp, out, notes = _trace_tokens(inp, out, spec, path.name, field)
        warnings += notes
        lengths = (
            f"{lengths} (drawn: {path.name} has no token columns)" if drawn else ("from the trace")
        )
    return LlmTraffic(
        requests=LlmRequests(arrival_s=times, input_tokens=inp, output_tokens=out, source=source),
        source=source,
        lengths=lengths,
        warnings=tuple(warnings),
    )


def _replay(
    path: Path,
    *,
    spec: TransformerSpec,
    seed: int,
    rng: np.random.Generator,
    input_len: TokenLengths,
    output_len: TokenLengths,
    field: str,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, str, list[str], bool]:
    """A trace's arrivals and lengths: its own token counts, or lengths drawn for every
    request (the last item says which: True, drawn). The lengths are not yet fitted to the
    context window: that counts the requests replayed (:func:`_clip`, :func:`_trace_tokens`)."""
    from gpucast.inputs.serving import (
        FUNCTIONS_TRACE_FORMAT,
        read_trace_arrivals,
        skipped_rows_warning,
    )
    from gpucast.store.datasets.azure_traces import read_arrival_trace
    from gpucast.store.files import not_utf8, open_input_text

    try:
        with open_input_text(path, field, fix="check the trace's path") as handle:
            head = handle.readline()
    except UnicodeDecodeError as exc:
        raise not_utf8(path, exc) from None
    notes: list[str] = []
    if head.startswith("HashOwner"):  # Azure Functions counts: no tokens
        trace = read_trace_arrivals(path, seed, field=field)
        times = trace.times_s
        notes += trace.warnings
        inp, out = input_len.draw(rng, times.size), output_len.draw(rng, times.size)
        return times, inp, out, trace.source, notes, True
    # the fix names the Functions counts read above too (QA 40 V "Open": LLM traces)
    formats = (
        "give an Azure LLM trace (TIMESTAMP,ContextTokens,GeneratedTokens), a CSV with an "
        f"arrival_s column (and prompt_tokens,output_tokens) or {FUNCTIONS_TRACE_FORMAT} "
        "(lengths drawn)"
    )
    parsed = read_arrival_trace(path, formats=formats)
    frame = parsed.frame
    if parsed.skipped:
        notes.append(skipped_rows_warning(path, parsed.skipped))
    times = frame["arrival_s"].to_numpy(dtype=np.float64)
    if "context_tokens" not in frame:
        inp, out = input_len.draw(rng, times.size), output_len.draw(rng, times.size)
        source = f"trace {path.name} ({count_of(len(frame), 'request')}, "
        source += f"{count_of(len(parsed.skipped), 'malformed row')} skipped)"
        return times, inp, out, source, notes, True
    inp = frame["context_tokens"].to_numpy(dtype=np.int64)
    out = frame["generated_tokens"].to_numpy(dtype=np.int64)
    source = (
        f"trace {path.name} ({count_of(len(frame), 'request')} with prompt and output "
        f"tokens, {count_of(len(parsed.skipped), 'malformed row')} skipped)"
    )
    return times, inp, out, source, notes, False


def _trace_tokens(
    inp: np.ndarray, out: np.ndarray, spec: TransformerSpec, name: str, field: str
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """A trace's own token counts of the requests replayed: 0 served as 1 token, those beyond
    ``spec``'s context window named (the simulator drops them), none fitting refused."""
    notes = []
    zero = (inp < 1) | (out < 1)
    if zero.any():
        notes.append(
            f"{int(zero.sum())} request(s) of {name} with 0 prompt or output tokens are "
            "served as 1 token"
        )
        inp, out = np.maximum(inp, 1), np.maximum(out, 1)
    beyond = inp + out > spec.max_context
    if beyond.all():
        raise InvalidSpecError(
            field,
            f"every request of {name} needs more than {spec.name}'s context window "
            f"of {spec.max_context} tokens (prompt + output; shortest {int((inp + out).min())})",
            fix="serve a model with a longer context (e.g. mistral-7b: 32768)",
        )
    if beyond.any():
        worst = int(np.argmax(inp + out))
        notes.append(
            f"{int(beyond.sum())} of {inp.size} requests of {name} need more than "
            f"{spec.name}'s context window of {spec.max_context} tokens (prompt + output, "
            f"up to {int(inp[worst])} + {int(out[worst])}); they are dropped"
        )
    return inp, out, notes


# -- the model on its GPUs -------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class ServingModel:
    """A language model on ``tp`` GPUs of one type with an engine: what one instance costs
    per iteration and per hour."""

    spec: TransformerSpec
    gpu: GpuSpec
    engine: EngineProfile
    tp: int
    tp_source: str
    precision: str
    cost: IterationCost
    price_per_gpu: Sourced[float]
    offer: Offer | None


def serving_model(
    model: str,
    gpu: str,
    framework: str,
    *,
    tp: int | None,
    precision: str | None,
    kv_precision: str | None,
    longest_tokens: tuple[int, int],
    max_tokens: int,
    price_usd_per_gpu_hour: float | None,
    providers: tuple[str, ...] = (),
    regions: tuple[str, ...] = (),
    spot: bool = False,
) -> ServingModel:
    """The instance a serving simulation runs (module docstring); without ``tp`` the fewest
    of 1, 2, 4, 8 GPUs that hold the weights and the longest request (``(prompt, output)``)."""
    from gpucast.catalog import load_catalog
    from gpucast.catalog.engines import inference_engine
    from gpucast.catalog.llm import llm_model
    from gpucast.predict.llm_infer import (
        iteration_cost,
        lighter_text,
        node_degrees,
        predict_inference,
        smallest_fitting_tp,
    )

    spec = llm_model(model)
    catalog = load_catalog()
    gpu_spec, node = node_links(catalog.gpu(gpu))  # as its catalog node links it
    check_tp_within_node(gpu_spec.name, tp)
    engine = inference_engine(framework)
    check_weight_units(precision, gpu_spec, catalog, engine.name)
    check_kv_units(kv_precision, gpu_spec, engine, catalog)
    longest_in, longest_out = longest_tokens
    longest_in = min(longest_in, spec.max_context - 1)
    longest_out = max(1, min(longest_out, spec.max_context - longest_in))
    largest = largest_node_gpus(gpu_spec.name)
    if tp is None:
        used = smallest_fitting_tp(
            spec, gpu_spec, engine, input_len=longest_in, output_len=longest_out,
            precision=precision, kv_precision=kv_precision, node=node, node_gpus=largest,
        )  # fmt: skip
        tp_source = "the fewest GPUs of 1, 2, 4, 8 that hold the weights and the longest request"
        check_tp_within_node(
            gpu_spec.name, used, model=spec.name, weights=precision or engine.default_precision
        )
    else:
        used = tp
        tp_source = "given"
        one = predict_inference(
            spec, gpu_spec, engine, batch_size=1, input_len=longest_in, output_len=longest_out,
            tp=tp, precision=precision, kv_precision=kv_precision, node=node,
        )  # fmt: skip
        if not one.fits:
            from gpucast.domain.units import GIB

            need = smallest_fitting_tp(
                spec, gpu_spec, engine, input_len=longest_in, output_len=longest_out,
                precision=precision, kv_precision=kv_precision, node=node, node_gpus=largest,
                choices=node_degrees(largest),
            )  # fmt: skip
            raise InvalidSpecError(
                "tp",
                f"{spec.name} in {one.precision} does not fit on {tp} x {gpu_spec.name} with "
                f"{engine.display_name}: {one.memory.weights_bytes / GIB:.1f} GiB of weights "
                f"per GPU, {one.memory.capacity_bytes / GIB:.1f} GiB available",
                got=tp,
                fix=f"use --tp {need}{lighter_text(one.precision)}",
            )
    cost = iteration_cost(
        spec, gpu_spec, engine, tp=used, precision=precision, kv_precision=kv_precision,
        max_tokens=max_tokens, node=node,
    )  # fmt: skip
    price, offer = instance_price(
        gpu_spec.name, used, price_usd_per_gpu_hour, providers=providers, regions=regions,
        spot=spot,
    )  # fmt: skip
    return ServingModel(
        spec=spec,
        gpu=gpu_spec,
        engine=engine,
        tp=used,
        tp_source=tp_source,
        precision=precision or engine.default_precision,
        cost=cost,
        price_per_gpu=price,
        offer=offer,
    )


def kv_link_gbps(offer: Offer | None) -> Sourced[float]:
    """Per-GPU link a KV cache crosses between a prefill and a decode instance: the node's
    network shared by its GPUs (Splitwise's machines talk over InfiniBand)."""
    if offer is None or offer.gpus < 1 or offer.network_gbps <= 0:
        return Sourced(DEFAULT_KV_LINK_GBPS, f"{DEFAULT_KV_LINK_GBPS:g} Gbit/s per GPU (default)")
    gbps = offer.network_gbps / offer.gpus
    return Sourced(
        gbps,
        f"{gbps:g} Gbit/s per GPU: {offer.instance_type}'s {offer.network_gbps:g} Gbit/s over "
        f"its {offer.gpus} GPUs",
    )


def swap_gbps(gpu: GpuSpec) -> float:
    """Host <-> GPU bandwidth for swapped KV blocks: PCIe x16 of the GPU's generation."""
    from gpucast.domain.catalog import PCIE_X16_GBIT_PER_S

    return PCIE_X16_GBIT_PER_S.get(gpu.pcie_generation, 128.0)


def gpu_offers(
    *,
    gpus: tuple[str, ...] = (),
    providers: tuple[str, ...] = (),
    regions: tuple[str, ...] = (),
    spot: bool = False,
    priced: bool = False,
) -> list[tuple[GpuSpec, Offer, float]]:
    """Per GPU type and GPUs per instance, the cheapest offer (price per GPU-hour): a model
    split over ``tp`` GPUs rents the cheapest instance with at least ``tp`` of them. With
    ``priced`` (the user gives the price per GPU-hour), a GPU of ``gpus`` no offer matches is
    planned on the catalog's largest node of it (``systems.csv``: :func:`own_node_offer`)."""
    from gpucast.catalog import load_catalog

    catalog = load_catalog()
    wanted = {catalog.gpu(g).name for g in gpus}
    offers: list[Offer] = []
    any_: list[str | None] = [None]
    for provider in list(providers) or any_:
        for region in list(regions) or any_:
            offers += catalog.find_offers(provider=provider, region=region, cpu_only=False)
    best: dict[tuple[str, int], tuple[Offer, float]] = {}
    for offer in offers:
        if offer.gpu is None or offer.gpus < 1 or (wanted and offer.gpu not in wanted):
            continue
        if spot and offer.spot_usd_per_hour is None:
            continue
        per_gpu = offer.price_usd_per_hour(spot=spot) / offer.gpus
        key = (offer.gpu, offer.gpus)
        if key not in best or per_gpu < best[key][1]:
            best[key] = (offer, per_gpu)
    if priced:
        for name in sorted(wanted - {gpu for gpu, _n in best}):
            node = own_node_offer(name)
            if node is not None:
                best[(name, node.gpus)] = (node, node.on_demand_usd_per_hour)
    if not best:
        raise InvalidSpecError(
            "gpu", "no catalog offer matches the GPU, provider, region and spot filters",
            fix="relax --gpu / --provider / --region / --spot (see gpucast catalog offers)"
            + ("" if priced else ", or give --price to plan a GPU without offers on the "
               "catalog's node of it"),
        )  # fmt: skip
    return [
        (catalog.gpu(name), offer, price) for (name, _n), (offer, price) in sorted(best.items())
    ]


#: The provider of :func:`own_node_offer`'s offers: a node the user prices with ``--price``.
OWN_NODE_PROVIDER = "own"


def own_node_offer(gpu: str) -> Offer | None:
    """The largest ``systems.csv`` node of ``gpu`` (a canonical name) as an offer a user
    prices with ``--price`` (its price a placeholder the price replaces); None where the
    catalog has no node of it."""
    from gpucast.catalog.systems import load_systems

    nodes = [s for s in load_systems() if s.gpu == gpu]
    if not nodes:
        return None
    node = max(nodes, key=lambda s: (s.gpus_per_node, s.name))
    return Offer(
        provider=OWN_NODE_PROVIDER,
        region="-",
        instance_type=node.name,
        gpu=gpu,
        gpus=node.gpus_per_node,
        vcpus=1,
        memory_gib=1.0,
        network_gbps=node.inter_node_gbps or 100.0,
        on_demand_usd_per_hour=1.0,
        spot_usd_per_hour=1.0,
        source_url=node.source_url,
        as_of=node.as_of,
    )


def gpu_choice(
    gpu: GpuSpec, offer: Offer, price_usd_per_gpu_hour: float, *, link_gbps: float | None = None
) -> GpuChoice:
    """One offer of :func:`gpu_offers` as the planner rents it: ``gpu`` as its catalog node
    links it, at most ``offer.gpus`` per tensor-parallel group, the node's network share for
    a KV transfer (or ``link_gbps`` given), PCIe for swapping."""
    from gpucast.catalog.pcie_allreduce import catalog_node_links
    from gpucast.catalog.systems import mesh_board_gpus, mesh_linked
    from gpucast.plan.llm_serve import GpuChoice

    return GpuChoice(
        gpu=mesh_linked(gpu),
        offer=offer,
        price_usd_per_gpu_hour=price_usd_per_gpu_hour,
        max_tp=offer.gpus,
        kv_link_gbps=kv_link_gbps(offer).value if link_gbps is None else link_gbps,
        swap_gbps=swap_gbps(gpu),
        node=catalog_node_links(gpu, mesh_board_gpus(gpu.name, offer.gpus)),
    )


def instance_price(
    gpu: str,
    tp: int,
    price_usd_per_gpu_hour: float | None = None,
    *,
    providers: tuple[str, ...] = (),
    regions: tuple[str, ...] = (),
    spot: bool = False,
) -> tuple[Sourced[float], Offer | None]:
    """What one instance of ``tp`` GPUs of type ``gpu`` costs per GPU-hour, and the offer it
    is rented as, by the rule of ``plan serve`` (:func:`gpucast.plan.llm_serve.cheapest_for_tp`
    over :func:`gpu_offers`: the cheapest per GPU of the offers with at least ``tp`` of them,
    within ``providers`` and ``regions``, on demand or with ``spot`` at their spot price).
    Where no offer has that many, the cheapest GPU-hour of any size, and the source says so.
    A given ``price_usd_per_gpu_hour`` replaces the price (the offer still names the node,
    e.g. its network for a KV transfer)."""
    from gpucast.catalog import load_catalog
    from gpucast.inputs import serving as cnn_inputs
    from gpucast.plan.llm_serve import cheapest_for_tp

    catalog = load_catalog()
    name = catalog.gpu(gpu).name
    filtered = bool(providers or regions or spot)
    sold = filtered or any(o.gpus >= 1 for o in catalog.find_offers(gpu=name))
    try:
        offers = (
            gpu_offers(gpus=(name,), providers=providers, regions=regions, spot=spot)
            if sold
            else []
        )
    except InvalidSpecError:  # the filters leave no offer: the GPU named, as for a CNN
        raise cnn_inputs.no_offer_within(
            name, providers=providers, regions=regions, spot=spot
        ) from None
    choices = [gpu_choice(*row) for row in offers]
    rented = cheapest_for_tp(choices, tp)
    short = rented is None and bool(choices)
    if short:  # no instance holds tp of them
        rented = cheapest_for_tp(choices, 1)
    offer = None if rented is None else rented.offer
    if price_usd_per_gpu_hour is not None:
        given = cnn_inputs.given_price_text(price_usd_per_gpu_hour, offer, spot=spot)
        return Sourced(price_usd_per_gpu_hour, given), offer
    if rented is None or offer is None:
        raise InvalidSpecError(
            "price", f"the catalog has no offer with {name}", fix="pass --price USD_PER_HOUR"
        )
    per_gpu = rented.price_usd_per_gpu_hour
    rule = (
        f"no catalog instance has {tp} x {name}: the cheapest GPU-hour of any size"
        if short
        else f"the cheapest per GPU of the instances with at least {tp}, as plan serve prices"
    )
    where = f" in {offer.region}" if filtered else ""
    market = " spot" if spot else ""
    return Sourced(
        per_gpu,
        f"{per_gpu:.4g} US$/h per GPU ({offer.provider} {offer.instance_type}{where}: "
        f"{offer.gpus} x {name} for {offer.price_usd_per_hour(spot=spot):.4g} US$/h{market}; "
        f"{rule})",
    ), offer


def largest_node_gpus(gpu: str) -> int:
    """The most GPUs of type ``gpu`` (a canonical name) one node of the catalog holds: its
    instances offered and its ``systems.csv`` nodes; 0 where it has none."""
    from gpucast.catalog import load_catalog
    from gpucast.catalog.systems import load_systems

    sizes = [o.gpus for o in load_catalog().find_offers(gpu=gpu, cpu_only=False)]
    sizes += [s.gpus_per_node for s in load_systems() if s.gpu == gpu]
    return max(sizes, default=0)


def check_tp_within_node(
    gpu: str, tp: int | None, *, model: str | None = None, weights: str = "fp16"
) -> None:
    """One clear error where ``tp`` is more GPUs of type ``gpu`` (a canonical name) than any
    node of the catalog holds (its instances offered, ``systems.csv``): its links are priced
    at the node's, which a group spanning two nodes does not have -- the rule ``plan serve``
    applies to the instances it rents. A GPU the catalog has no node of passes. ``model``:
    the tp is the default's (the fewest GPUs that hold ``model``), not a given ``--tp``."""
    from gpucast.plan.llm_serve import largest_node_text

    if tp is None or tp <= 1:
        return
    largest = largest_node_gpus(gpu)
    if 0 < largest < tp:
        where = largest_node_text(gpu, largest, "node in the catalog (instances, systems.csv)")
        if model is None:
            raise InvalidSpecError(
                "tp", where, got=tp,
                fix=f"use --tp {largest} or fewer (more replicas for more throughput)",
            )  # fmt: skip
        raise InvalidSpecError(
            "gpu",
            f"{model} needs {tp} x {gpu} to hold it (the fewest of 1, 2, 4, 8: the --tp "
            f"default), but {where}",
            fix="use a GPU with more memory"
            + (", or fewer bytes per weight (--precision int4)" if weights != "int4" else ""),
        )


def node_links(gpu: GpuSpec) -> tuple[GpuSpec, NodeLinks]:
    """What LLM inference prices tensor parallelism on where no cluster says otherwise: ``gpu``
    as the catalog's node of its type links it (:func:`gpucast.catalog.systems.mesh_linked`)
    and how that node joins its GPUs: the GPUs of its mesh (0: none; fewer GPUs reach fewer
    links, :func:`gpucast.catalog.systems.mesh_node_gpus`) and whether its cards are bridged
    in pairs (beyond a pair, PCIe: :func:`gpucast.catalog.systems.bridged_pairs`)."""
    from gpucast.catalog.pcie_allreduce import catalog_node_links
    from gpucast.catalog.systems import mesh_linked, mesh_node_gpus

    return mesh_linked(gpu), catalog_node_links(gpu, mesh_node_gpus(gpu.name))


def _pcie_basis(gpu: GpuSpec, tp: int) -> str:
    """The figure a group of ``tp`` GPUs of ``gpu`` crossing PCIe is priced on."""
    from gpucast.catalog.pcie_allreduce import pcie_allreduce_gb_per_s

    figure = pcie_allreduce_gb_per_s(gpu.pcie_generation, tp)
    return "no row for its generation" if figure is None else figure.source


def links_text(gpu: GpuSpec, tp: int) -> str:
    """The link a tensor-parallel all-reduce of ``tp`` GPUs of type ``gpu`` is priced on, and
    why: the catalog's meshed node, its bridged pairs, or the datasheet's link
    (:func:`node_links`, as the predictions take them)."""
    from gpucast.predict.parallel import group_link_gbps

    gpu, node = node_links(gpu)
    mesh = node.mesh_gpus
    rate = f"{group_link_gbps(gpu, tp, node) / 8:g} GB/s per GPU"
    if mesh > 1 and tp <= mesh:
        return (
            f"{rate}: {tp} of a {mesh}-GPU node whose {gpu.name}s link pairwise (catalog "
            f"systems.csv), each reaching the other{'s' if tp > 2 else ''} over "
            f"{tp - 1}/{mesh - 1} of its links"
        )
    over_pcie = (
        f"NCCL all-reduce over PCIe (catalog pcie_allreduce.csv: {_pcie_basis(gpu, tp)})"
        if node.pcie_gbps(tp) is not None
        else "PCIe x16 at its nominal rate"
    )
    if node.bridged:
        how = "the bridge to its partner" if tp <= 2 else f"a group beyond a pair: {over_pcie}"
        return f"{rate}: {gpu.name} cards bridged in pairs (catalog systems.csv), {how}"
    if gpu.interconnect_gbps is None and node.pcie_gbps(tp) is not None:
        return f"{rate}: {over_pcie}"
    kind = "NVLink / switch" if gpu.interconnect_gbps is not None else "PCIe x16"
    return f"{rate}: the {gpu.name}'s {kind} link from its datasheet"
