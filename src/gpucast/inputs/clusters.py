"""A cluster the user has (``--cluster FILE|NAME``): read, checked, with its source.

:func:`load_cluster` turns the request's cluster options into a
:class:`~gpucast.domain.systems.ClusterSpec`:

* ``FILE`` -- a YAML or TOML file (read by :mod:`gpucast.inputs.textfiles`, as config files
  are), its fields at the top level or under ``cluster:``::

      name: lab-h100             # default: the file's name
      gpu: H100                  # a catalog GPU name or alias
      gpus_per_node: 8
      nodes: 4                   # at most; plans use 1..nodes (default 1)
      intra_node: nvswitch       # nvswitch | nvlink-bridge | pcie | mesh (with > 1 GPU/node)
      intra_node_gbps: 900       # GB/s per GPU, both directions (required with > 1 GPU/node)
      topology: dgx1-v100        # or a server topology instead of the two lines above (a
      gpu_ids: 0,1,4,5           #   built-in name or CSV) and the GPUs the job gets on it:
                                 #   the link is the ring bandwidth of that subset
      inter_node_gbps: 400       # Gbit/s per node, compute NICs (required with nodes > 1)
      network: infiniband        # infiniband | roce | efa | slingshot | ethernet (optional)
      price_usd_per_gpu_hour: 2  # optional: without it costs are shown as 0
      spot_usd_per_gpu_hour: 1   # optional: a spot market (plans are on demand only without)
      provider: on-prem          # labels (default on-prem / local)
      region: local
      grid_gco2e_per_kwh: 350    # optional: the grid's carbon intensity (default: the
                                 #   catalog's figure for provider/region, grid_carbon.csv)

* ``NAME`` -- a node shape of the catalog (``catalog/data/systems.csv``, e.g. ``DGX-H100``),
  one node unless ``--nodes`` says more, no price unless ``--price-per-gpu-hour`` gives one;
* ``--cluster-set KEY=VALUE`` sets any field above (without ``--cluster``: the whole cluster
  from flags); ``--nodes`` and ``--price-per-gpu-hour`` are shorthands of two of them.

Every error is one line naming the field, where it is written (file and line, the flag, or
the catalog row) and the fix; an unknown GPU is the catalog's ``UnknownGpuError`` with close
names.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from gpucast.domain.catalog import PCIE_X16_GBIT_PER_S, Catalog, GpuSpec
from gpucast.domain.errors import (
    DataFormatError,
    GpucastError,
    InvalidSpecError,
    UnknownGpuError,
)
from gpucast.domain.provenance import Assumption
from gpucast.domain.systems import (
    INTRA_NODE_KINDS,
    LOCAL_REGION,
    NETWORKS,
    ON_PREM,
    ClusterSettings,
    ClusterSpec,
    NodeShape,
    as_intra_node,
    as_network,
)
from gpucast.inputs.textfiles import (
    flag_key,
    line_of,
    parse_mapping_text,
    read_text,
    reject_respelled_keys,
)

if TYPE_CHECKING:
    from gpucast.domain.simulation import PriceTable
    from gpucast.domain.topology import ServerTopology
    from gpucast.inputs.transient import Network as TransientNetwork

#: The fields of a cluster description, in the order the docs list them.
FIELDS: tuple[str, ...] = (
    "name",
    "gpu",
    "gpus_per_node",
    "nodes",
    "intra_node",
    "intra_node_gbps",
    "topology",
    "gpu_ids",
    "inter_node_gbps",
    "network",
    "price_usd_per_gpu_hour",
    "spot_usd_per_gpu_hour",
    "provider",
    "region",
    "grid_gco2e_per_kwh",
    "cpu",
    "note",
)
#: An example value of each field the fixes quote.
EXAMPLES = {
    "gpu": "H100",
    "gpus_per_node": "8",
    "nodes": "4",
    "intra_node": "nvswitch",
    "intra_node_gbps": "900",
    "inter_node_gbps": "400",
    "network": "infiniband",
    "price_usd_per_gpu_hour": "2.5",
    "spot_usd_per_gpu_hour": "1.0",
    "topology": "dgx1-v100",
    "gpu_ids": "0,1,2,3",
    "grid_gco2e_per_kwh": "350",
}
#: What each bandwidth means, for the fixes (``intra_node_gbps``'s: :func:`_intra_example`,
#: from the cluster's GPU in the catalog).
UNITS = {
    "intra_node_gbps": "GB/s per GPU, both directions",
    "inter_node_gbps": "Gbit/s per node over the compute NICs, e.g. 8 x 400 Gbit/s NICs = 3200",
    "grid_gco2e_per_kwh": "gCO2e/kWh of the grid where the cluster runs",
}
#: PCIe x16 GB/s per GPU, both directions, by generation (``PCIE_X16_GBIT_PER_S`` each way,
#: in GB/s, twice): the link of a one-GPU node, and of a PCIe-only GPU in the hints.
PCIE_X16_GBYTE_PER_S_BOTH_WAYS = {g: 2.0 * v / 8.0 for g, v in PCIE_X16_GBIT_PER_S.items()}
SUFFIXES = (".yaml", ".yml", ".toml")
#: A link figure above this many times the catalog's fastest of its kind (``systems.csv``:
#: NVLink 5 at 1,800 GB/s per GPU, a GB200 NVL72 rack's 28,800 Gbit/s) is a typo, not a
#: faster machine: room for a generation or two to come, not for 1e9 GB/s.
LINK_CEILING_FACTOR = 10.0


def link_ceilings() -> dict[str, tuple[float, str]]:
    """The most ``intra_node_gbps`` / ``inter_node_gbps`` a cluster may state: each
    :data:`LINK_CEILING_FACTOR` x the catalog's fastest node shape, with the reason the error
    gives (``"10x the catalog's fastest, DGX-B200's 1,800 GB/s"``)."""
    from gpucast.catalog.systems import load_systems

    ceilings: dict[str, tuple[float, str]] = {}
    for key in ("intra_node_gbps", "inter_node_gbps"):
        rows = [(getattr(s, key), s.name) for s in load_systems() if getattr(s, key)]
        fastest, name = max(rows, key=lambda row: row[0])
        unit = UNITS[key].split()[0]
        ceilings[key] = (
            LINK_CEILING_FACTOR * fastest,
            f"{LINK_CEILING_FACTOR:g}x the catalog's fastest, {name}'s {fastest:,g} {unit}",
        )
    return ceilings


class _Origin:
    """Where the fields come from, to say so in each error and in the fixes."""

    def __init__(self, kind: str, label: str, text: str = "") -> None:
        self.kind = kind  # "file" | "catalog" | "flags"
        self.label = label
        self.text = text
        self.flagged: dict[str, str] = {}  # field -> the flag that set it

    def where(self, key: str) -> str:
        if key in self.flagged:
            return self.flagged[key]
        if self.kind == "file":
            line = line_of(self.text, key)
            return self.label if line is None else f"{self.label}, line {line}"
        return self.label

    def add(self, key: str, value: str) -> str:
        """How to set ``key`` to ``value`` where the cluster is described."""
        if self.kind == "file":
            return f"add {key}: {value}"
        return f"pass --cluster-set {key}={value}"

    def add_all(self, pairs: Sequence[tuple[str, str]]) -> str:
        """How to set each ``(key, value)`` of ``pairs`` where the cluster is described."""
        if self.kind == "file":
            keys = [f"{key}: {value}" for key, value in pairs]
            return "add " + (
                ", ".join(keys[:-1]) + " and " + keys[-1] if len(keys) > 1 else keys[0]
            )
        return "pass --cluster-set " + ",".join(f"{key}={value}" for key, value in pairs)


def _bad(
    origin: _Origin, key: str, constraint: str, *, got: object = None, fix: str | None = None
) -> InvalidSpecError:
    got_text = "" if got is None else f"got {got!r}; "
    return InvalidSpecError(
        f"cluster.{key}", f"{constraint} ({got_text}{origin.where(key)})", fix=fix
    )


def _required(
    origin: _Origin, key: str, why: str, example: tuple[str, str] | None = None
) -> InvalidSpecError:
    """``key`` is missing; the fix adds ``example`` (value, what it is) or the generic one."""
    value, what = example or (EXAMPLES[key], UNITS.get(key, ""))
    return _bad(
        origin,
        key,
        f"is required {why}",
        fix=origin.add(key, value) + (f" ({what})" if what else ""),
    )


def _missing(
    origin: _Origin, missing: Sequence[tuple[str, str, tuple[str, str] | None]]
) -> InvalidSpecError:
    """The required fields ``missing`` (key, why, example as :func:`_required` takes it) in
    one error: the first as :func:`_required` states it, the others named after it, the fix
    adding every one."""
    if len(missing) == 1:
        return _required(origin, *missing[0])
    (key, why, example), rest = missing[0], missing[1:]
    others = [f"{k} ({w})" for k, w, _ in rest]
    listed = others[0] if len(others) == 1 else ", ".join(others[:-1]) + " and " + others[-1]
    what = (example or (EXAMPLES[key], UNITS.get(key, "")))[1]
    values = [(k, (e or (EXAMPLES[k], ""))[0]) for k, _, e in missing]
    return _bad(
        origin,
        key,
        f"is required {why}, and so {'is' if len(rest) == 1 else 'are'} {listed}",
        fix=origin.add_all(values) + (f" ({key}: {what})" if what else ""),
    )


def _intra_example(spec: GpuSpec) -> tuple[str, str]:
    """The ``intra_node_gbps`` a fix suggests for ``spec``, from the catalog (``gpus.csv``):
    its GPU-to-GPU link (A100 SXM NVLink 3: 600, H100 SXM NVLink 4: 900), else its PCIe x16
    link; with what the figure is."""
    pcie = PCIE_X16_GBYTE_PER_S_BOTH_WAYS.get(spec.pcie_generation, 32.0)
    pcie_text = f"PCIe Gen{spec.pcie_generation} x16: {pcie:g}"
    what = f"{UNITS['intra_node_gbps']}: {spec.name}'s"
    if spec.interconnect_gbps:
        value = f"{spec.interconnect_gbps:g}"
        return value, f"{what} NVLink / Infinity Fabric (catalog): {value}; {pcie_text}"
    return f"{pcie:g}", f"{what} {pcie_text}, no GPU-to-GPU link in the catalog"


def _number(
    origin: _Origin,
    values: Mapping[str, Any],
    key: str,
    *,
    minimum: float,
    strict: bool,
    example: str | None = None,
    maximum: tuple[float, str] | None = None,
) -> float | None:
    """``key``'s number (None where not given): at least ``minimum`` (above it if ``strict``)
    and at most ``maximum`` (the bound and why), else one line naming the key, bound and fix."""
    raw = values.get(key)
    if raw is None:
        return None
    value: float | None = None
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        value = float(raw)
    elif isinstance(raw, str):
        try:
            value = float(raw.strip())
        except ValueError:
            value = None
    unit = UNITS[key].split()[0] if key in UNITS else ""  # GB/s or Gbit/s, stated each time
    bound = (f"> {minimum:g}" if strict else f">= {minimum:g}") + (f" {unit}" if unit else "")
    fix = f"e.g. {key}: {example or EXAMPLES.get(key, '1')}" + (f" ({UNITS[key]})" if unit else "")
    if value is None:
        raise _bad(origin, key, f"must be a number {bound}", got=raw, fix=fix)
    if not math.isfinite(value) or value < minimum or (strict and value == minimum):
        raise _bad(origin, key, f"must be a finite number {bound}", got=raw, fix=fix)
    if maximum is not None and value > maximum[0]:
        raise _bad(
            origin, key, f"must be at most {maximum[0]:,g} {unit} ({maximum[1]})", got=raw,
            fix=fix,
        )  # fmt: skip
    return value


def _integer(origin: _Origin, values: Mapping[str, Any], key: str) -> int | None:
    raw = values.get(key)
    if raw is None:
        return None
    value = _number(origin, values, key, minimum=1.0, strict=False)
    assert value is not None
    if not value.is_integer():
        raise _bad(
            origin, key, "must be a whole number >= 1", got=raw, fix=f"e.g. {key}: {EXAMPLES[key]}"
        )
    return int(value)


def _choice(
    origin: _Origin, values: Mapping[str, Any], key: str, allowed: tuple[str, ...]
) -> str | None:
    raw = values.get(key)
    if raw is None:
        return None
    text = str(raw).strip().lower()
    if text not in allowed:
        raise _bad(
            origin, key, f"must be one of {', '.join(allowed)}", got=raw, fix=f"e.g. {key}: "
            f"{EXAMPLES[key]}"
        )  # fmt: skip
    return text


def _text(values: Mapping[str, Any], key: str, default: str) -> str:
    raw = values.get(key)
    return default if raw is None or not str(raw).strip() else str(raw).strip()


def _topology_link(
    origin: _Origin, values: Mapping[str, Any], per_node: int | None, gpu: str, catalog: Catalog
) -> tuple[int, float, str] | None:
    """``(GPUs per node, intra-node GB/s per GPU both directions, where that comes from)``
    from the ``topology`` and ``gpu_ids`` fields: the ring all-reduce bandwidth of the GPUs the job
    gets on that server (:func:`gpucast.predict.topology.allreduce_bandwidth_gb_per_s`, one
    direction) doubled to the both-directions figure the catalog quotes for NVLink.
    ``None`` without a topology."""
    raw = values.get("topology")
    if raw is None:
        if values.get("gpu_ids") is not None:
            raise _bad(origin, "gpu_ids", "needs a topology to name GPUs of",
                       fix=origin.add("topology", EXAMPLES["topology"]))  # fmt: skip
        return None
    for key in ("intra_node", "intra_node_gbps"):  # QA 40 M #2: both were silently replaced
        given = values.get(key) is not None and (origin.kind != "catalog" or key in origin.flagged)
        if given:
            raise _bad(origin, key, "cannot be given with topology: the topology's GPUs "
                       "(gpu_ids) set the link", got=values[key],
                       fix=f"drop {key}, or drop topology to give the link yourself")  # fmt: skip
    from gpucast.inputs.topology import resolve_topology
    from gpucast.predict.topology import allreduce_bandwidth_gb_per_s

    try:
        topology = resolve_topology(str(raw).strip())
    except GpucastError as exc:
        raise _bad(
            origin,
            "topology",
            f"is not a usable server topology: {exc}",
            fix="a built-in name (see gpucast plan placement --help) or a topology CSV",
        ) from None
    _check_topology_gpu(origin, topology, gpu, catalog)
    ids_raw = values.get("gpu_ids")
    if ids_raw is None:
        count = per_node or len(topology.gpus)
        if count > len(topology.gpus):
            raise _bad(origin, "gpus_per_node", f"is more than {topology.name}'s "
                       f"{len(topology.gpus)} GPUs", got=per_node,
                       fix=f"at most {len(topology.gpus)}, or another topology")  # fmt: skip
        ids = topology.gpus[:count]
    else:
        tokens = ids_raw if isinstance(ids_raw, list | tuple) else str(ids_raw).split(",")
        picked: list[str] = []
        for token in (str(t).strip() for t in tokens):
            name = token if token in topology.gpus else None
            if name is None and token.isdigit() and int(token) < len(topology.gpus):
                name = topology.gpus[int(token)]
            if name is None or name in picked:
                raise _bad(origin, "gpu_ids", f"{token!r} is not a{'nother' if name else ''} "
                           f"GPU of {topology.name}", got=ids_raw,
                           fix=f"name each once: {', '.join(topology.gpus)} or 0-"
                           f"{len(topology.gpus) - 1}")  # fmt: skip
            picked.append(name)
        ids = tuple(picked)
        if per_node is not None and per_node != len(ids):
            raise _bad(origin, "gpus_per_node", f"is {per_node} but gpu_ids names {len(ids)}",
                       fix="drop gpus_per_node (gpu_ids sets it) or make them agree")  # fmt: skip
    if len(ids) < 2:
        return len(ids), 0.0, f"1 GPU of {topology.name}: no intra-node all-reduce"
    ring = allreduce_bandwidth_gb_per_s(topology, ids)
    note = (
        f"ring all-reduce of {', '.join(ids)} on {topology.name} "
        f"{ring:g} GB/s each way (x2 = {2 * ring:g} GB/s both directions; {topology.source}); "
        # QA 40 M #15: --gpus 2 of 0,1,6,7 took the 4-GPU ring's figure without a word
        "fewer of them (--gpus) are priced at this ring too: set gpu_ids to the GPUs a job gets"
    )
    return len(ids), 2.0 * ring, note


def _check_topology_gpu(
    origin: _Origin, topology: ServerTopology, gpu: str, catalog: Catalog
) -> None:
    """A topology built for other GPUs (a DGX-1's NVLink 2 for an A100) is refused; one built for
    none (a PCIe server) takes any GPU. Names in a user's CSV must be catalog GPUs."""
    if not topology.gpu_names:
        return
    held = []
    for name in topology.gpu_names:
        try:
            held.append(catalog.gpu(name).name)
        except UnknownGpuError:
            raise _bad(origin, "topology", f"{topology.name}'s gpus names {name!r}, not a "
                       "catalog GPU", fix="fix the CSV's gpus column (gpucast catalog gpus), "
                       "or leave it blank for any GPU") from None  # fmt: skip
    if gpu in held:
        return
    from gpucast.catalog.topologies import load_topologies

    # the built-in server of this GPU, else the first one for any GPU (a PCIe server)
    other = min(
        load_topologies().values(), key=lambda t: (gpu not in t.gpu_names, t.gpu_names != ())
    )
    raise _bad(origin, "topology", f"{topology.name} is a server of {' or '.join(held)} GPUs, "
               f"not {gpu} (its links are theirs)", got=topology.name,
               fix=f"topology: {other.name}, or a topology CSV of your own "
               "(its gpus column blank)")  # fmt: skip


def _build(
    values: Mapping[str, Any],
    origin: _Origin,
    catalog: Catalog,
    *,
    name: str,
    source: str,
    source_url: str,
    as_of: date,
) -> ClusterSpec:
    unknown = [k for k in values if k not in FIELDS]
    if unknown:
        key = unknown[0]
        close = difflib.get_close_matches(key, FIELDS, n=1)
        raise _bad(
            origin,
            key,
            "is not a cluster field",
            fix=f"did you mean {close[0]!r}?" if close else f"known: {', '.join(FIELDS)}",
        )
    gpu_name = values.get("gpu")
    if gpu_name is None or not str(gpu_name).strip():
        raise _bad(
            origin,
            "gpu",
            "is required",
            fix=origin.add("gpu", "H100") + " (a catalog GPU name or alias: gpucast catalog gpus)",
        )
    try:
        spec = catalog.gpu(str(gpu_name).strip())
    except UnknownGpuError as exc:
        choices = [s.name for s in catalog.gpus] + [a for s in catalog.gpus for a in s.aliases]
        raise UnknownGpuError(
            exc.name,
            choices,
            fix=f"fix cluster.gpu ({origin.where('gpu')}); see `gpucast catalog gpus`",
        ) from None
    per_node = _integer(origin, values, "gpus_per_node")
    link = _topology_link(origin, values, per_node, spec.name, catalog)
    if link is not None:
        per_node = link[0]
    if per_node is None:
        raise _required(origin, "gpus_per_node", "(GPUs in each node)")
    nodes = _integer(origin, values, "nodes") or 1
    intra_kind = _choice(origin, values, "intra_node", INTRA_NODE_KINDS)
    intra_example = _intra_example(spec)
    ceilings = link_ceilings()
    intra = _number(
        origin, values, "intra_node_gbps", minimum=0.0, strict=True, example=intra_example[0],
        maximum=ceilings["intra_node_gbps"],
    )  # fmt: skip
    if link is not None and per_node > 1:  # the topology's subset decides the link
        intra_kind, intra = "nvswitch", link[1]
    inter = _number(
        origin, values, "inter_node_gbps", minimum=0.0, strict=True,
        maximum=ceilings["inter_node_gbps"],
    )  # fmt: skip
    # every link field missing, in one error (QA 39: three runs to learn of three fields)
    missing: list[tuple[str, str, tuple[str, str] | None]] = []
    if per_node > 1:
        if intra is None:
            missing.append(("intra_node_gbps", f"with {per_node} GPUs per node", intra_example))
        if intra_kind is None:
            kinds = f"one of {', '.join(INTRA_NODE_KINDS)}"
            missing.append(("intra_node", f"with {per_node} GPUs per node", ("nvswitch", kinds)))
    if nodes > 1 and inter is None:
        missing.append(("inter_node_gbps", "for nodes > 1", None))
    if missing:
        raise _missing(origin, missing)
    network = _choice(origin, values, "network", NETWORKS)
    price = _number(origin, values, "price_usd_per_gpu_hour", minimum=0.0, strict=False)
    spot = _number(origin, values, "spot_usd_per_gpu_hour", minimum=0.0, strict=False)
    if spot is not None and price is None:
        raise _required(origin, "price_usd_per_gpu_hour", "with spot_usd_per_gpu_hour")
    grid = _number(origin, values, "grid_gco2e_per_kwh", minimum=0.0, strict=True)
    grid_where = origin.where("grid_gco2e_per_kwh")
    try:
        shape = NodeShape(
            name=_text(values, "name", name),
            gpu=spec.name,
            gpus_per_node=per_node,
            intra_node=as_intra_node(intra_kind or "pcie"),
            intra_node_gbps=intra
            if intra is not None
            else PCIE_X16_GBYTE_PER_S_BOTH_WAYS.get(spec.pcie_generation, 32.0),
            inter_node_gbps=inter,
            network=None if network is None else as_network(network),
            cpu=_text(values, "cpu", ""),
            source_url=source_url,
            as_of=as_of,
            note=_text(values, "note", ""),
            link_source=link[2] if link else "",
        )
        return ClusterSpec(
            shape=shape,
            nodes=nodes,
            price_usd_per_gpu_hour=price,
            spot_usd_per_gpu_hour=spot,
            provider=_text(values, "provider", ON_PREM),
            region=_text(values, "region", LOCAL_REGION),
            grid_gco2e_per_kwh=grid,
            grid_source=""
            if grid is None
            else f"cluster file {grid_where}"
            if origin.kind == "file" and "grid_gco2e_per_kwh" not in origin.flagged
            else grid_where,
            source=source,
        )
    except InvalidSpecError as exc:  # e.g. an odd GPU count on NVLink bridges
        field = exc.field.rpartition(".")[2]
        raise _bad(origin, field, exc.message.partition(": ")[2], fix=exc.fix) from None


class NamesCluster(Protocol):
    """A request with the cluster options (``--cluster``, ``--nodes``,
    ``--price-per-gpu-hour``, ``--cluster-set``)."""

    @property
    def cluster(self) -> str | None: ...
    @property
    def cluster_nodes(self) -> int | None: ...
    @property
    def cluster_price_usd_per_gpu_hour(self) -> float | None: ...
    @property
    def cluster_set(self) -> ClusterSettings: ...


def request_cluster(
    request: NamesCluster, catalog: Catalog, gpu: str | None = None
) -> ClusterSpec | None:
    """The cluster a request's options name (:func:`load_cluster`; ``None`` when none);
    ``gpu``: the request's ``--gpu``, the GPU of a cluster that names none."""
    return load_cluster(
        request.cluster,
        catalog,
        nodes=request.cluster_nodes,
        price_usd_per_gpu_hour=request.cluster_price_usd_per_gpu_hour,
        settings=request.cluster_set,
        gpu=gpu,
    )


def is_cluster_file(ref: str) -> bool:
    """Whether ``--cluster`` names a file (a YAML/TOML suffix, a folder, or an existing
    path) rather than a node shape of the catalog."""
    path = Path(ref)
    return path.suffix.lower() in SUFFIXES or "/" in ref or "\\" in ref or path.exists()


def _file_values(path: Path) -> tuple[dict[str, Any], str]:
    text = read_text(
        path, "cluster", fix="check the path, or name a node shape of the catalog (e.g. DGX-H100)"
    )
    data = parse_mapping_text(path, text)
    if isinstance(data, dict) and set(data) == {"cluster"} and isinstance(data["cluster"], dict):
        data = data["cluster"]
    if not isinstance(data, dict):
        raise DataFormatError(
            str(path),
            "must be a mapping of cluster fields (gpu, gpus_per_node, nodes, ...)",
            fix="see the README's 'Your own cluster'",
        )
    reject_respelled_keys(path, text, data)
    return {flag_key(k): v for k, v in data.items()}, text


def _shape_values(shape: NodeShape) -> dict[str, Any]:
    return {
        "name": shape.name,
        "gpu": shape.gpu,
        "gpus_per_node": shape.gpus_per_node,
        "intra_node": shape.intra_node,
        "intra_node_gbps": shape.intra_node_gbps,
        "inter_node_gbps": shape.inter_node_gbps,
        "network": shape.network,
        "cpu": shape.cpu,
        "note": shape.note,
    }


def load_cluster(
    ref: str | None,
    catalog: Catalog,
    *,
    nodes: int | None = None,
    price_usd_per_gpu_hour: float | None = None,
    settings: ClusterSettings = (),
    gpu: str | None = None,
) -> ClusterSpec | None:
    """The cluster the options name (``None`` when they name none); see the module docstring.
    ``gpu`` (a verb's ``--gpu``) is the cluster's GPU where the file or ``--cluster-set``
    names none."""
    if ref is None and not settings:
        return None
    if ref is None:
        values: dict[str, Any] = {}
        origin = _Origin("flags", "--cluster-set")
        name, source, url, as_of = "cluster", "flags (--cluster-set)", "", date.today()
    elif is_cluster_file(ref):
        path = Path(ref)
        values, text = _file_values(path)
        origin = _Origin("file", str(path), text)
        name, source, url = path.stem, str(path), str(path)
        as_of = datetime.fromtimestamp(path.stat().st_mtime, tz=UTC).date()
    else:
        from gpucast.catalog.systems import get_system
        from gpucast.domain.systems import UnknownSystemError

        try:
            shape = get_system(ref)
        except UnknownSystemError:
            raise UnknownSystemError(
                ref,
                _system_names(),
                fix="name a node shape of catalog/data/systems.csv, or pass a cluster file "
                "(.yaml or .toml)",
            ) from None
        values = _shape_values(shape)
        origin = _Origin("catalog", f"catalog systems.csv: {shape.name}")
        name, source, url, as_of = shape.name, origin.label, shape.source_url, shape.as_of
    changed: list[str] = []
    for key, value in settings:
        values[key] = value
        origin.flagged[key] = f"--cluster-set {key}"
        changed.append(f"--cluster-set {key}={value}")
    if gpu is not None and not str(values.get("gpu") or "").strip():
        values["gpu"] = gpu
        origin.flagged["gpu"] = "--gpu"
        changed.append(f"--gpu {gpu}")
    if nodes is not None:
        values["nodes"] = nodes
        origin.flagged["nodes"] = "--nodes"
        changed.append(f"--nodes {nodes}")
    if price_usd_per_gpu_hour is not None:
        values["price_usd_per_gpu_hour"] = price_usd_per_gpu_hour
        origin.flagged["price_usd_per_gpu_hour"] = "--price-per-gpu-hour"
        changed.append(f"--price-per-gpu-hour {price_usd_per_gpu_hour:g}")
    cluster = _build(values, origin, catalog, name=name, source=source, source_url=url, as_of=as_of)
    return replace(cluster, set_by=tuple(changed)) if ref is not None else cluster


#: Where the catalog's grid carbon intensities come from.
CATALOG_GRID_SOURCE = "gpucast/catalog/data/grid_carbon.csv (a source URL, year and note per row)"


def grid_intensities(cluster: ClusterSpec | None) -> tuple[dict[tuple[str, str], float], str]:
    """gCO2e/kWh per (provider, region): the catalog's (``grid_carbon.csv``), with a cluster's
    own ``grid_gco2e_per_kwh`` for its provider/region in place of the catalog's; and the
    source of the figures the cluster's plans use."""
    from gpucast.catalog.carbon import grid_carbon

    grid = {k: g.gco2e_per_kwh for k, g in grid_carbon().items()}
    if cluster is None or cluster.grid_gco2e_per_kwh is None:
        return grid, CATALOG_GRID_SOURCE
    grid[(cluster.provider, cluster.region)] = cluster.grid_gco2e_per_kwh
    return grid, (
        f"{cluster.grid_gco2e_per_kwh:g} gCO2e/kWh for {cluster.provider}/{cluster.region} "
        f"({cluster.grid_source})"
    )


def _system_names() -> list[str]:
    from gpucast.catalog.systems import load_systems

    return [label for s in load_systems() for label in (s.name, *s.aliases)]


def cluster_assumption(cluster: ClusterSpec) -> Assumption:
    """What a result rests on when it rests on a user's cluster."""
    return Assumption(
        name="cluster",
        value=cluster.describe(),
        source=cluster.source,
        override="--cluster FILE|NAME, --nodes, --price-per-gpu-hour, --cluster-set KEY=VALUE",
    )


def cluster_gpu(
    cluster: ClusterSpec | None, catalog: Catalog, gpu: str | None, gpus: int | None = None
) -> GpuSpec:
    """The GPU a request runs on: the cluster's (a ``--gpu`` naming another type is refused,
    as are more ``gpus`` than the cluster has), else the one ``--gpu`` names."""
    if cluster is None:
        if gpu is None:
            raise InvalidSpecError("gpu", "is required (or --cluster)", fix="e.g. --gpu H100")
        return catalog.gpu(gpu)
    spec = catalog.gpu(cluster.gpu)
    if gpu is not None and catalog.gpu(gpu).name != spec.name:
        raise InvalidSpecError(
            "gpu",
            f"the cluster {cluster.name} has {spec.name} GPUs",
            got=gpu,
            fix="drop --gpu (the cluster gives it) or pick another --cluster",
        )
    if gpus is not None and gpus > cluster.max_gpus:
        raise InvalidSpecError(
            "gpus",
            f"exceeds the {cluster.max_gpus} GPUs of the cluster {cluster.name}",
            got=gpus,
            fix=f"use --gpus <= {cluster.max_gpus}, or more nodes: --nodes N",
        )
    return spec


def host_link_gbps(cluster: ClusterSpec, pcie_generation: int) -> float:
    """Gbit/s a node's GPUs reach beyond the node with: its compute network, or (one node
    without one) their PCIe x16 links to the host, as the planner counts them."""
    if cluster.shape.inter_node_gbps is not None:
        return cluster.shape.inter_node_gbps
    return PCIE_X16_GBIT_PER_S.get(pcie_generation, 128.0) * cluster.gpus_per_node


def intra_link_gbps(
    cluster: ClusterSpec, catalog: Catalog, gpus: int | None = None, *, all_reduce: bool = True
) -> float:
    """Gbit/s per GPU of a collective over ``gpus`` GPUs of one node of ``cluster`` (default:
    the whole node, the planner's figure for its whole-node offer); a ring over more than a
    bridged pair crosses PCIe: an all-reduce at the figure of catalog pcie_allreduce.csv for
    the group (:func:`gpucast.catalog.pcie_allreduce.pcie_group_gbps`), another collective
    (``all_reduce`` False: an all-to-all, which those figures do not measure) at the x16
    link's nominal rate."""
    from gpucast.catalog.pcie_allreduce import pcie_group_gbps

    group = cluster.gpus_per_node if gpus is None else gpus
    generation = catalog.gpu(cluster.gpu).pcie_generation
    nominal = PCIE_X16_GBIT_PER_S.get(generation, 128.0)
    pcie = pcie_group_gbps(generation, group) if all_reduce else nominal
    return cluster.shape.ring_gbps(group, pcie)


def node_link_gbps(
    catalog: Catalog, cluster: ClusterSpec | None = None
) -> dict[tuple[str, int], float]:
    """Gbit/s per GPU of the data-parallel all-reduce inside one node, by (GPU type, GPUs in
    the node), as ``plan train``, ``predict train --cluster`` and ``simulate train`` price it
    (:attr:`gpucast.plan.train.PlanContext.node_link_gbps`): on ``cluster``, every group of
    2..k GPUs of its node at :func:`intra_link_gbps`; else every catalog offer of several
    GPUs at :func:`gpucast.catalog.pcie_allreduce.data_parallel_gbps` (the tensor-parallel
    rule: bridged pairs beyond a pair and GPUs without NVLink at NCCL's PCIe figures)."""
    from gpucast.catalog.pcie_allreduce import data_parallel_gbps

    if cluster is not None:
        name = catalog.gpu(cluster.gpu).name
        return {
            (name, c): intra_link_gbps(cluster, catalog, c)
            for c in range(2, cluster.gpus_per_node + 1)
        }
    nodes = {(str(o.gpu), o.gpus) for o in catalog.offers if o.gpu is not None and o.gpus > 1}
    return {(g, n): data_parallel_gbps(catalog.gpu(g), n) for g, n in sorted(nodes)}


def simulation_prices(
    cluster: ClusterSpec, catalog: Catalog, *, ps_count: int, spot: bool
) -> tuple[PriceTable, TransientNetwork]:
    """``simulate train``'s price table and NIC speeds for ``cluster``: a node costs its GPUs'
    price (0 without one); PS shards run on the nodes' host CPUs at no extra cost."""
    from gpucast.domain.simulation import CPU_PS, PriceTable
    from gpucast.inputs.transient import Network

    if spot and not cluster.has_spot:
        raise InvalidSpecError(
            "spot",
            f"the cluster {cluster.name} has no spot market",
            fix="drop --spot, or give spot_usd_per_gpu_hour in the cluster",
        )
    gpn = cluster.gpus_per_node
    prices: dict[tuple[str, str], float] = {
        (cluster.gpu, "on-demand"): cluster.usd_per_hour(gpn) or 0.0
    }
    spot_price = cluster.usd_per_hour(gpn, spot=True)
    if spot_price is not None:
        prices[(cluster.gpu, "spot")] = spot_price
    if ps_count:
        prices[(CPU_PS, "on-demand")] = 0.0
        prices[(CPU_PS, "spot")] = 0.0
    link = host_link_gbps(cluster, catalog.gpu(cluster.gpu).pcie_generation)
    price = (
        "no price given (0)"
        if not cluster.priced
        else f"${cluster.price_usd_per_gpu_hour:g} per GPU-hour x {gpn} GPUs per node"
    )
    return (
        PriceTable(
            usd_per_hour=prices, source=f"cluster {cluster.name} ({cluster.source}): {price}"
        ),
        Network(
            ps_gbps=link,
            worker_gbps=link,
            source=f"cluster {cluster.name}: {link:g} Gbit/s per node"
            + (  # QA 40 M #17: a one-node cluster's figure read as a network it lacks
                ""
                if cluster.shape.inter_node_gbps is not None
                else f" (no inter-node network: its {gpn} GPUs' PCIe x16 links to the host)"
            )
            + ("; PS shards on its hosts" if ps_count else ""),
        ),
    )
