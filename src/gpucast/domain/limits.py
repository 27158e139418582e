"""Bounds on the work one request may ask for, checked before anything is allocated.

A typo (``--runs 1000000000``, ``repeats: 1000000000``, ``--max-gpus 100000000``) must fail in
a line naming the flag, the size and the memory it would take -- not after minutes of work or
a ``MemoryError``. Each verb estimates its own work from the request (rows of a plan's search
space, Monte Carlo runs x servers, simulated requests, sweep points) and calls
:func:`check_work`; ``--allow-large`` lifts the default ceiling for a user who means it.
Pure: no I/O.
"""

from __future__ import annotations

import math
from typing import Any

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.options import option

#: Items (simulated requests, Monte Carlo run x server cells, plan rows) one request may ask
#: for without ``--allow-large``: 50 million.
LARGE_ITEMS = 50_000_000
#: Memory one request may ask for without ``--allow-large``.
LARGE_BYTES = 2 * 2**30
#: Sweep points (campaign runs) expanded at most, with or without ``--allow-large``: a sweep
#: is a list of real measurements, each seconds to minutes long.
MAX_SWEEP_POINTS = 100_000


def allow_large_option() -> Any:
    """The ``--allow-large`` request field (shared by the verbs that bound their work)."""
    return option(
        False,
        negative="no-allow-large",
        help=f"Run work above the default ceilings ({LARGE_ITEMS:,} simulated items or "
        f"{LARGE_BYTES / 2**30:g} GiB of memory).",
    )


def jobs_option() -> Any:
    """The ``--jobs`` request field (the verbs whose searches run in worker processes)."""
    return option(
        None,
        help="Worker processes searching side by side (default: the CPUs this process may "
        "use; small searches run here); the result is the same for any number.",
        example="4",
    )


def check_jobs(jobs: object) -> None:
    """``--jobs``: None (the default) or an integer >= 1."""
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise InvalidSpecError("jobs", "must be an integer >= 1", got=jobs, fix="e.g. --jobs 1")


def check_db_text(path: str) -> str:
    """``path`` (``--db`` or ``$GPUCAST_DB``) when it names a file: a blank one (spaces) made
    a store file named by spaces in the current folder (QA session 36). Here, not in the
    store, so that the CLI's root checks it without loading the numeric stack."""
    if not path.strip():
        raise InvalidSpecError(
            "db",
            "is blank (spaces only)",
            got=path,
            fix="give the store's file (--db runs.db), or unset $GPUCAST_DB for the default",
        )
    return path


def format_bytes(n: float) -> str:
    """``n`` bytes as a person reads it (``3.2 GiB``)."""
    if not math.isfinite(n):
        return "unbounded memory"
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{n:,.0f} B"


def check_work(
    flag: str,
    items: float,
    *,
    what: str,
    bytes_per_item: float,
    allow_large: bool | None,
    fix: str,
    max_items: float = LARGE_ITEMS,
    max_bytes: float = LARGE_BYTES,
) -> None:
    """Refuse ``items`` of work (``what``: "Monte Carlo runs x servers") when it exceeds
    ``max_items`` or ``max_bytes`` of estimated memory, unless ``allow_large``; the message
    names ``flag``, the size, the estimated memory and ``fix`` (and ``--allow-large``, except
    where ``allow_large`` is None: a verb without that option).

    Even with ``allow_large`` an estimate beyond what any machine holds (1 PiB) is refused:
    that is a typo, not a big job.
    """
    memory = items * bytes_per_item
    absurd = not math.isfinite(memory) or memory > 2.0**50
    if not absurd and (allow_large or (items <= max_items and memory <= max_bytes)):
        return
    size = f"{items:,.0f}" if math.isfinite(items) and items < 1e18 else f"{items:.3g}"
    ceiling = "" if absurd else (
        f"; the default ceiling is {max_items:,.0f} ({format_bytes(max_bytes)})"
    )  # fmt: skip
    raise InvalidSpecError(
        flag,
        f"asks for {size} {what}, about {format_bytes(memory)} of memory{ceiling}",
        fix=fix if absurd or allow_large is None else f"{fix}, or pass --allow-large",
    )


def check_simulated_requests(
    flag: str,
    rate_rps: float | None,
    duration_s: float,
    allow_large: bool | None,
    *,
    bytes_per_request: float,
    fix: str = "lower --rate or --duration-s",
) -> None:
    """The requests a serving run simulates (rate x duration) fit the work ceiling;
    ``bytes_per_request``: what one costs its simulator (an LLM's more than a CNN's);
    ``allow_large`` None: the verb has no ``--allow-large`` (plan serve); ``fix`` names the
    flags the rate came from."""
    if rate_rps is None:
        return
    check_work(
        flag,
        rate_rps * duration_s,
        what="simulated requests (rate x duration)",
        bytes_per_item=bytes_per_request,
        allow_large=allow_large,
        fix=fix,
    )


# -- the ranges of options several verbs share: one constant and one check each ---------------
#: ``--seed`` of every verb: an integer in ``[0, MAX_SEED)`` (numpy seeds any of them, and it
#: fits the int64 of a store row and of JSON readers)
MAX_SEED = 2**53
#: ``--price`` of every verb: US$ per GPU-hour in ``(0, MAX_PRICE_USD_PER_HOUR]`` (a price of
#: 0 makes every candidate's cost a tie; above 1e6 US$/h is a typo, not an offer)
MAX_PRICE_USD_PER_HOUR = 1e6
#: ``--min-samples`` of the measure verbs is at most this: the stopping rule times no more
#: steps than this in one measurement (its ``sample_cap``), so a larger minimum is never met
MAX_SAMPLES = 100_000
#: ``--pool-gpus`` of every verb: a pool of ``[1, MAX_POOL_GPUS]`` GPUs
MAX_POOL_GPUS = 10_000
#: ``profile --batch-size``: samples per step in ``[1, MAX_PROFILE_BATCH]``. The profile runs on
#: fake tensors, so nothing stops a typo (``-b 1e12``) from printing EFLOPs and PiB as if real;
#: 2^20 is far above any one step's batch (MLPerf's DLRM trains at 65,536 per step)
MAX_PROFILE_BATCH = 2**20


def check_seed(seed: object) -> None:
    """``--seed``: an integer in ``[0, MAX_SEED)`` (one error naming the range otherwise)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < MAX_SEED:
        raise InvalidSpecError(
            "seed", "must be an integer in [0, 2^53)", got=seed, fix="e.g. --seed 0"
        )


def check_price(price: float | None, *, per: str = "per GPU") -> None:
    """``--price`` (None: the catalog's): US$/h in ``(0, MAX_PRICE_USD_PER_HOUR]``."""
    if price is None:
        return
    if isinstance(price, bool) or not (
        isinstance(price, int | float) and math.isfinite(price)
        and 0 < price <= MAX_PRICE_USD_PER_HOUR
    ):  # fmt: skip
        raise InvalidSpecError(
            "price", f"must be in (0, {MAX_PRICE_USD_PER_HOUR:,.0f}] US$/h {per}", got=price,
            fix="e.g. --price 2.5, or leave it out for the catalog's price",
        )  # fmt: skip


def check_pool_gpus(gpus: int | None) -> None:
    """``--pool-gpus`` (None: no pool): an integer in ``[1, MAX_POOL_GPUS]``."""
    if gpus is None:
        return
    if isinstance(gpus, bool) or not isinstance(gpus, int) or not 1 <= gpus <= MAX_POOL_GPUS:
        raise InvalidSpecError(
            "pool-gpus", f"must be an integer in [1, {MAX_POOL_GPUS:,}]", got=gpus,
            fix="e.g. --pool-gpus 2",
        )  # fmt: skip
