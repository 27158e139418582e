"""Terms single-type and mixed rows share: the power model's answer per row and a GPU's
average draw over its step, a parameter server's per-update demands, and the prices of a
row (its market, the probe nodes). Split from :mod:`gpucast.plan.evaluate`.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from gpucast.plan._evaluate_types import BoolArray, EvalMemo, FloatArray, IntArray
from gpucast.plan.inputs import GpuTable, PerfParams, WorkloadFacts
from gpucast.plan.space import PS, Space
from gpucast.predict import comm
from gpucast.predict.variability import PROBE_S


def _power(
    params: PerfParams,
    terms: FloatArray,
    g: IntArray,
    gpus: GpuTable,
    batch: FloatArray,
    memo: EvalMemo | None = None,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """(compute slowdown, GPU power while computing W, limit W, idle power W) per row at the
    plan's power setting."""
    if params.power is None:
        nan = np.full(len(g), np.nan)
        return np.ones(len(g)), nan, nan.copy(), nan.copy()
    if memo is None or len(g) == 0:
        return params.power.at(terms, g, gpus.names, batch)
    return memo.power_at(params.power, terms, g, gpus.names, batch)


def _average_power(
    busy_w: FloatArray, idle_w: FloatArray, compute_s: FloatArray, step_s: FloatArray
) -> FloatArray:
    """A GPU's draw over its step: computing for ``compute_s`` of each ``step_s``, idle (waiting
    on the all-reduce or the parameter server) for the rest."""
    with np.errstate(divide="ignore", invalid="ignore"):
        busy = np.where(np.isfinite(step_s) & (step_s > 0), compute_s / step_s, 1.0)
    busy = np.clip(busy, 0.0, 1.0)
    return np.asarray(idle_w + (busy_w - idle_w) * busy, dtype=np.float64)


def ps_demands(
    facts: WorkloadFacts, ps_network_gbps: FloatArray, shards: FloatArray, params: PerfParams
) -> tuple[FloatArray, FloatArray]:
    """Per update, at the busiest of ``shards`` shards: (push, pull) seconds
    (:func:`gpucast.predict.comm.shard_demands_s`)."""
    net = facts.gradient_bytes * 8.0 / (ps_network_gbps * params.ps_network_efficiency * 1e9)
    cpu = np.full_like(net, params.ps_per_tensor_cost_s * facts.n_tensors)
    largest = min(facts.max_tensor_bytes / facts.gradient_bytes, 1.0)
    return comm.shard_demands_s(net, cpu, shards, largest)


def _probe_usd(
    params: PerfParams,
    nodes: npt.ArrayLike,
    sync: BoolArray,
    usd_per_node_hour: FloatArray,
    startup_s: float,
) -> FloatArray:
    """What the nodes started to drop the slowest cost (``exclude_slowest``): each extra node
    billed for its start-up and :data:`~gpucast.predict.variability.PROBE_S` at the price of
    a node (a mixed cluster's dearer one), then released."""
    extra = params.probe_nodes(nodes, sync)
    return np.asarray(extra * usd_per_node_hour * (startup_s + PROBE_S) / 3600.0, dtype=np.float64)


def _single_prices(
    space: Space, params: PerfParams, time_s: FloatArray, has_cpu: BoolArray, startup_s: float
) -> tuple[BoolArray, FloatArray, FloatArray, FloatArray]:
    """(has a market, US$/h, probe US$, cost US$) of rows of one GPU type taking
    ``time_s``: the only numbers of a row its market changes."""
    off = space.offers
    o = space.offer
    sync = space.strategy != PS
    price = np.where(space.spot, off.spot_usd_per_hour[o], off.on_demand_usd_per_hour[o])
    has_market = ~np.isnan(price)
    cpu_price = np.where(~sync & has_cpu, off.cpu_usd_per_hour[o] * space.shards, 0.0)
    usd_per_hour = space.nodes * np.nan_to_num(price, nan=0.0) + cpu_price
    probe = _probe_usd(params, space.nodes, sync, np.nan_to_num(price, nan=0.0), startup_s)
    cost = time_s / 3600.0 * usd_per_hour + probe
    return has_market, usd_per_hour, probe, cost
