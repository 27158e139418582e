"""Facts about hardware and cloud offerings, as frozen values. Loaded by :mod:`gpucast.catalog`.

Every figure carries its unit in its name. Peak FLOP/s are *dense* (no sparsity), in TFLOP/s.
``None`` means the GPU has no such mode (e.g. no TF32 on a V100), never "unknown and zero".
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date
from typing import Any, ClassVar

from gpucast.domain.errors import (
    InvalidSpecError,
    UnknownGpuError,
    UnknownProviderError,
    UnknownRegionError,
)
from gpucast.domain.limits import MAX_PRICE_USD_PER_HOUR


def _check_positive(owner: str, name: str, value: float | None, *, allow_none: bool) -> None:
    if value is None:
        if not allow_none:
            raise InvalidSpecError(f"{owner}.{name}", "is required")
        return
    if not math.isfinite(value) or value <= 0:
        raise InvalidSpecError(f"{owner}.{name}", "must be a finite number > 0", got=value)


@dataclass(frozen=True, slots=True, kw_only=True)
class MigProfile:
    """A Multi-Instance GPU profile such as ``1g.10gb``."""

    name: str
    compute_slices: int  # of the GPU's compute slices (7; 4 on an A30)
    memory_gib: float
    max_instances: int
    #: of the GPU's memory slices (8; 4 on an A30), also the width of a placement; None: not
    #: published
    memory_slices: int | None = None
    #: streaming multiprocessors of one instance (``nvidia-smi mig -lgip``); None: unknown
    sm_count: int | None = None
    #: the start offsets (in memory slices) NVIDIA allows; () when not published
    placements: tuple[int, ...] = ()
    #: where the row's facts come from and when they were read (the data file's row; a
    #: profile built in code has none); not part of the profile's identity
    source_url: str = field(default="", compare=False)
    as_of: date | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.compute_slices < 1 or self.max_instances < 1:
            raise InvalidSpecError(f"mig {self.name}", "slices and instances must be >= 1")
        _check_positive(f"mig {self.name}", "memory_gib", self.memory_gib, allow_none=False)
        if self.memory_slices is not None and not 1 <= self.memory_slices <= 8:
            raise InvalidSpecError(
                f"mig {self.name}", "memory_slices must be 1..8", got=self.memory_slices
            )
        if self.sm_count is not None and self.sm_count < 1:
            raise InvalidSpecError(f"mig {self.name}", "sm_count must be >= 1", got=self.sm_count)
        width = self.memory_slices or 1
        bad = [p for p in self.placements if p < 0 or p + width > 8 or p + self.compute_slices > 8]
        if bad:
            raise InvalidSpecError(
                f"mig {self.name}",
                f"placement {bad[0]} does not fit the GPU's 8 memory / 7 compute slices",
            )


#: The PCIe facts, one place (PCI-SIG, https://pcisig.com/specifications; a GPU's generation
#: from ``gpus.csv``). A x16 link per GPU by generation, each way: its signalling rate in
#: Gbit/s (8/16/32/64 GT/s x 16 lanes; ~16/32/64/128 GB/s), what links and collectives use ...
PCIE_X16_GBIT_PER_S: dict[int, float] = {3: 128.0, 4: 256.0, 5: 512.0, 6: 1024.0}
#: ... and the payload it carries after line coding in GB/s (2.5/5 GT/s 8b/10b, 8/16/32 GT/s
#: 128b/130b, 64 GT/s FLIT), what a host-to-device copy moves.
PCIE_X16_PAYLOAD_GBYTE_PER_S: dict[int, float] = {
    1: 4.0, 2: 8.0, 3: 15.75, 4: 31.5, 5: 63.0, 6: 121.0,
}  # fmt: skip

#: Per precision, the catalog columns of its peak: its own, then the modes it falls back to.
_PEAK_COLUMNS: dict[str, tuple[str, ...]] = {
    "int8": ("int8_tops", "fp8_tflops", "fp16_tflops", "bf16_tflops", "fp32_tflops"),
    "fp8": ("fp8_tflops", "fp16_tflops", "bf16_tflops", "fp32_tflops"),
    "bf16": ("bf16_tflops", "fp16_tflops", "fp32_tflops"),
    "fp16": ("fp16_tflops", "bf16_tflops", "fp32_tflops"),
    "tf32": ("tf32_tflops", "fp32_tflops"),
    "fp32": ("fp32_tflops",),
}


#: The precisions a GPU runs only on units of its own (a datasheet peak in its catalog
#: column): a bf16 GEMM on a V100 or T4 (no bf16 units) is emulated on the FP32 path, not run
#: on the fp16 tensor cores; a K80 has no fp16 rate; fp8 needs fp8 tensor cores. Every verb
#: refuses these on a GPU without the units (:meth:`GpuSpec.runs`); tf32 is fp32 with TF32
#: matmuls where the GPU has them and runs everywhere, as does fp32. int8 (CNN serving) keeps
#: its fallback: the catalog's int8 column is empty on GPUs that run int8 (A10G, V100 DP4A).
OWN_UNIT_PRECISIONS: frozenset[str] = frozenset({"fp16", "bf16", "fp8"})


def _peak_columns(precision: str) -> tuple[str, ...]:
    if precision not in _PEAK_COLUMNS:
        raise InvalidSpecError(
            "precision", f"must be one of {', '.join(_PEAK_COLUMNS)}", got=precision
        )
    return _PEAK_COLUMNS[precision]


class VendorBound:
    """An engine that runs on some GPU vendors' GPUs only (``vendors``; empty: any), and its
    one-line refusal under ``ENGINE_FLAG`` with ``VENDOR_FIX`` (an LLM engine's
    ``--framework``, a serving engine's ``--engine``)."""

    __slots__ = ()
    ENGINE_FLAG: ClassVar[str] = "engine"
    VENDOR_FIX: ClassVar[str] = "pick an engine that runs there"
    name: str
    display_name: str
    vendors: tuple[str, ...]

    def runs_on(self, vendor: str) -> bool:
        """Whether the engine runs on GPUs of ``vendor`` (:attr:`vendors`)."""
        return not self.vendors or vendor.lower() in {v.lower() for v in self.vendors}

    def check_runs_on(self, gpu: str, vendor: str) -> None:
        """One clear error where the engine does not run on ``gpu`` (of ``vendor``)."""
        if not self.runs_on(vendor):
            raise InvalidSpecError(
                self.ENGINE_FLAG,
                f"{self.display_name} runs on {' / '.join(self.vendors)} GPUs only, not on "
                f"{gpu} ({vendor})",
                got=self.name,
                fix=self.VENDOR_FIX,
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuSpec:
    """Datasheet figures of one GPU (for K80: one GK210 die, as clouds expose it)."""

    name: str  # canonical, e.g. "V100-16GB", "H100-SXM", "K80"
    vendor: str  # "nvidia" | "amd"
    architecture: str  # "Kepler", "Volta", "Hopper", "CDNA3", ...
    fp32_tflops: float
    tf32_tflops: float | None
    fp16_tflops: float | None  # dense tensor-core FP16 (or FP16 ALU rate where no tensor cores)
    bf16_tflops: float | None
    fp8_tflops: float | None
    memory_gib: float
    memory_bandwidth_gbps: float  # GB/s (10^9 bytes per second)
    interconnect_gbps: float | None  # GB/s per GPU over NVLink / Infinity Fabric; None: PCIe only
    pcie_generation: int
    tdp_w: float
    sm_count: int  # SMs (NVIDIA) or compute units (AMD)
    mig_profiles: tuple[MigProfile, ...] = ()
    aliases: tuple[str, ...] = ()
    source_url: str
    as_of: date
    # Optional datasheet figures; None where the vendor publishes none.
    base_clock_mhz: float | None = None
    boost_clock_mhz: float | None = None  # max boost (AMD: peak engine clock)
    #: The SM clock the board holds under sustained load at its default settings, where that
    #: is below the boost clock its peaks are quoted at (K80: its default application clock);
    #: ``peak_tflops`` scales the datasheet peaks by ``sustained / boost``. None: the boost.
    sustained_clock_mhz: float | None = None
    # Power facts (W); None where no source gives them. ``max_power_limit_w`` is the default
    # power limit (the highest a data-center board accepts), ``min_power_limit_w`` the lowest
    # it accepts (``nvidia-smi -q``: Min/Max Power Limit), ``idle_power_w`` the board's draw
    # with clocks up and no work.
    idle_power_w: float | None = None
    min_power_limit_w: float | None = None
    max_power_limit_w: float | None = None
    #: dense INT8 tensor-core (or DP4A) peak, TOPS; None where the datasheet gives none
    int8_tops: float | None = None
    #: the FP32 rate of the lanes that run only FP32, where ``fp32_tflops`` also counts lanes
    #: shared with INT32 (NVIDIA GA10x and Ada: one of the two datapaths of each SM partition)
    #: or dual-issued ones (AMD RDNA3); None: every FP32 lane is dedicated
    fp32_dedicated_tflops: float | None = None

    def __post_init__(self) -> None:
        owner = f"gpu {self.name}"
        _check_positive(owner, "fp32_tflops", self.fp32_tflops, allow_none=False)
        for name in (
            "tf32_tflops",
            "fp16_tflops",
            "bf16_tflops",
            "fp8_tflops",
            "int8_tops",
            "fp32_dedicated_tflops",
            "interconnect_gbps",
            "base_clock_mhz",
            "boost_clock_mhz",
            "sustained_clock_mhz",
            "idle_power_w",
            "min_power_limit_w",
            "max_power_limit_w",
        ):
            _check_positive(owner, name, getattr(self, name), allow_none=True)
        self._check_power(owner)
        if (
            self.base_clock_mhz is not None
            and self.boost_clock_mhz is not None
            and self.boost_clock_mhz < self.base_clock_mhz
        ):
            raise InvalidSpecError(
                f"{owner}.boost_clock_mhz",
                f"must be >= base_clock_mhz ({self.base_clock_mhz:g})",
                got=self.boost_clock_mhz,
            )
        if self.sustained_clock_mhz is not None and (
            self.boost_clock_mhz is None or self.sustained_clock_mhz > self.boost_clock_mhz
        ):
            raise InvalidSpecError(
                f"{owner}.sustained_clock_mhz",
                "must be <= boost_clock_mhz (the clock the peaks are quoted at; give it too)",
                got=self.sustained_clock_mhz,
            )
        if self.fp32_dedicated_tflops is not None and self.fp32_dedicated_tflops > self.fp32_tflops:
            raise InvalidSpecError(
                f"{owner}.fp32_dedicated_tflops",
                f"must be <= fp32_tflops ({self.fp32_tflops:g})",
                got=self.fp32_dedicated_tflops,
            )
        for name in ("memory_gib", "memory_bandwidth_gbps", "tdp_w"):
            _check_positive(owner, name, getattr(self, name), allow_none=False)
        if self.sm_count < 1:
            raise InvalidSpecError(f"{owner}.sm_count", "must be >= 1", got=self.sm_count)

    def _check_power(self, owner: str) -> None:
        lo, hi, idle = self.min_power_limit_w, self.max_power_limit_w, self.idle_power_w
        if lo is not None and hi is not None and lo > hi:
            raise InvalidSpecError(
                f"{owner}.min_power_limit_w", f"must be <= max_power_limit_w ({hi:g})", got=lo
            )
        ceiling = hi if hi is not None else lo
        if idle is not None and ceiling is not None and idle >= ceiling:
            raise InvalidSpecError(
                f"{owner}.idle_power_w", f"must be below the power limits ({ceiling:g} W)", got=idle
            )

    @property
    def placeable_mig_profiles(self) -> tuple[MigProfile, ...]:
        """The MIG profiles whose start offsets and memory slices are published (the ones a
        layout can be built from)."""
        return tuple(p for p in self.mig_profiles if p.placements and p.memory_slices)

    @property
    def mig_summary(self) -> str:
        """The MIG profiles ``catalog mig`` can lay out, in a word: their count, ``no
        placements`` where profiles are listed without them, ``-`` without MIG."""
        if self.placeable_mig_profiles:
            return str(len(self.placeable_mig_profiles))
        return "no placements" if self.mig_profiles else "-"

    @property
    def mig_slices(self) -> tuple[int, int]:
        """(compute slices, memory slices) of the whole GPU in MIG mode: those of its largest
        profile (7 and 8 on an A100, H100, H200 or B200; 4 and 4 on an A30); (7, 8) where its
        profiles do not say."""
        compute = max((p.compute_slices for p in self.mig_profiles), default=7)
        memory = max((p.memory_slices or 0 for p in self.mig_profiles), default=0)
        return compute, memory or 8

    def peak_tflops(self, precision: str) -> float:
        """Peak dense TFLOP/s (TOPS for ``int8``) for a precision (``fp32``, ``tf32``,
        ``bf16``, ``fp16``, ``fp8``, ``int8``), falling back to the fastest mode the GPU does
        have below it. A precision the GPU does not :meth:`run <runs>` is refused by every verb
        before it is priced; the fallback serves what is not a user's request (the 16-bit
        rate an embedding or GNN estimate assumes, the fp16 compute of fp8 weights that vLLM
        runs weight-only)."""
        for attr in _peak_columns(precision):
            value = getattr(self, attr)
            if value is not None:
                return float(value) * self.clock_share
        return self.fp32_tflops  # pragma: no cover - fp32 is always present

    def priced_as(self, precision: str) -> str:
        """The precision whose peak :meth:`peak_tflops` takes for ``precision``: itself where
        the GPU has units for it, else the mode it falls back to (int8 on a K80: fp32)."""
        for attr in _peak_columns(precision):
            if getattr(self, attr) is not None:
                return attr.partition("_")[0]
        return "fp32"  # pragma: no cover - fp32 is always present

    def peak_text(self, precision: str) -> str:
        """``precision``'s peak as a note names it: ``"A100-80GB's BF16 peak"``, or, on a GPU
        without units for it, the mode :meth:`peak_tflops` takes instead (``"T4's FP16 peak
        (no BF16 units)"``: the note said BF16 where FP16's rate was priced)."""
        used = self.priced_as(precision)
        if used == precision:
            return f"{self.name}'s {precision.upper()} peak"
        return f"{self.name}'s {used.upper()} peak (no {precision.upper()} units)"

    def has_units(self, precision: str) -> bool:
        """Whether the GPU has units of its own for ``precision`` (a datasheet peak for it);
        one it lacks, :meth:`peak_tflops` prices at the mode it falls back to."""
        return getattr(self, _peak_columns(precision)[0]) is not None

    def runs(self, precision: str) -> bool:
        """Whether the GPU runs ``precision`` at all: one of :data:`OWN_UNIT_PRECISIONS` only
        with units of its own (:meth:`has_units`), any other everywhere."""
        return precision not in OWN_UNIT_PRECISIONS or self.has_units(precision)

    def fp32_path_tflops(self) -> float:
        """What the FP32 units offer matrix work (FP32 training, and reduced-precision work
        that falls back to them, :func:`gpucast.predict.roofline.matrix_seconds`): the
        dedicated FP32 lanes' peak where the datasheet figure also counts shared or
        dual-issued ones, else the FP32 peak (at the sustained clock, as :meth:`peak_tflops`).
        A GEMM or convolution that leaves the shared lanes to address arithmetic does not
        reach the doubled figure; MLPerf's L40S rows (bf16 ResNet-50 slower than 0.9 of its
        91.6 TFLOP/s FP32 figure would run it) bound it below the datasheet. ``peak_tflops``
        keeps the datasheet figure (what the catalog shows)."""
        fp32 = self.fp32_dedicated_tflops or self.fp32_tflops
        return float(fp32) * self.clock_share

    def fp32_convolution_tflops(self) -> float | None:
        """The TF32 tensor-core peak that fp32 convolutions may run at by default: cuDNN's,
        on NVIDIA GPUs with TF32 units (PyTorch's ``torch.backends.cudnn.allow_tf32`` is True
        by default, its ``torch.backends.cuda.matmul.allow_tf32`` False: fp32 matmuls stay
        on the FP32 units); None on GPUs without TF32 units or not NVIDIA's (ROCm's MIOpen
        keeps fp32 convolutions in fp32)."""
        if self.vendor != "nvidia" or self.tf32_tflops is None:
            return None
        return self.peak_tflops("tf32")

    def matrix_tflops(self, precision: str) -> float:
        """The peak matrix work at ``precision`` runs at: the FP32 units'
        (:meth:`fp32_path_tflops`) for ``fp32``, else :meth:`peak_tflops` -- what every
        predicted compute time divides by (MFU keeps the datasheet's :meth:`peak_tflops`)."""
        return self.fp32_path_tflops() if precision == "fp32" else self.peak_tflops(precision)

    @property
    def clock_share(self) -> float:
        """The share of the datasheet peaks the board sustains at its default clocks
        (``sustained_clock_mhz / boost_clock_mhz``; 1 where the catalog gives no sustained
        clock)."""
        if self.sustained_clock_mhz is None or self.boost_clock_mhz is None:
            return 1.0
        return self.sustained_clock_mhz / self.boost_clock_mhz


@dataclass(frozen=True, slots=True, kw_only=True)
class Offer:
    """One instance type in one region of one provider, with its prices.

    CPU-only instances (parameter servers, CPU inference) have ``gpu=None`` and ``gpus=0``.
    ``spot_usd_per_hour`` is ``None`` where the provider offers no spot/preemptible market.
    ``price_estimated``: the prices were not read from a source (a CSV row whose ``note``
    starts with :data:`ESTIMATED_PRICE_MARK`); plans that rest on such a row say so.
    """

    provider: str  # "aws" | "gcp" | "azure"
    region: str
    instance_type: str
    gpu: str | None  # canonical GpuSpec.name
    gpus: int
    vcpus: int
    memory_gib: float
    network_gbps: float  # Gbit/s
    on_demand_usd_per_hour: float
    spot_usd_per_hour: float | None
    source_url: str
    as_of: date
    price_estimated: bool = False

    def __post_init__(self) -> None:
        owner = f"offer {self.provider}/{self.region}/{self.instance_type}"
        if (self.gpu is None) != (self.gpus == 0):
            raise InvalidSpecError(f"{owner}.gpus", "must be 0 exactly when gpu is empty")
        if self.gpus < 0 or self.vcpus < 1:
            raise InvalidSpecError(f"{owner}", "gpus must be >= 0 and vcpus >= 1")
        for name in ("memory_gib", "network_gbps", "on_demand_usd_per_hour"):
            _check_positive(owner, name, getattr(self, name), allow_none=False)
        _check_positive(owner, "spot_usd_per_hour", self.spot_usd_per_hour, allow_none=True)
        ceiling = MAX_PRICE_USD_PER_HOUR * max(1, self.gpus)  # --price's ceiling, per GPU
        for name in ("on_demand_usd_per_hour", "spot_usd_per_hour"):
            price = getattr(self, name)
            if price is not None and price > ceiling:
                raise InvalidSpecError(
                    f"{owner}.{name}",
                    f"must be <= {ceiling:,.0f} US$/h ({MAX_PRICE_USD_PER_HOUR:,.0f} per GPU, "
                    "above which a price is a typo, not an offer)",
                    got=price,
                )

    def price_usd_per_hour(self, *, spot: bool) -> float:
        if spot:
            if self.spot_usd_per_hour is None:
                raise InvalidSpecError(
                    "market",
                    f"{self.instance_type} in {self.region} has no spot price",
                    fix="drop --spot or pick another offer",
                )
            return self.spot_usd_per_hour
        return self.on_demand_usd_per_hour


PROVIDERS = ("aws", "gcp", "azure")
#: How an offers CSV marks a row whose prices were not read from any source (its ``note``
#: starts with it).
ESTIMATED_PRICE_MARK = "UNVERIFIED"


def estimated_prices_note(offers: Iterable[str]) -> str:
    """What a plan says about the ``offers`` (named in words) whose prices it rests on but no
    source gave ("" when there are none)."""
    named = list(offers)
    if not named:
        return ""
    return (
        f"{', '.join(named)} -- not read from any source (the catalog's offers.csv marks these "
        f"rows {ESTIMATED_PRICE_MARK}); refresh them with `gpucast catalog import-skypilot` or "
        "give your own with --offers FILE"
    )


def lookup_key(name: str) -> str:
    """Normalised lookup key: case-, space-, dash- and underscore-insensitive."""
    return "".join(ch for ch in name.lower() if ch.isalnum())


#: Brand words a driver puts before a GPU's model (``NVIDIA H200``, ``Tesla T4``, ``AMD
#: Instinct MI300X``): a GPU lookup ignores them as leading words.
GPU_BRAND_PREFIXES = ("nvidia", "tesla", "amd")
_BRAND_WORD = re.compile(rf"^(?:{'|'.join(GPU_BRAND_PREFIXES)})[\s_-]+", re.IGNORECASE)


def gpu_lookup_key(name: str) -> str:
    """The key every GPU lookup compares: :func:`lookup_key` of ``name`` less its leading
    brand words (:data:`GPU_BRAND_PREFIXES`), so the name a driver reports (``NVIDIA
    A100-SXM4-80GB``, torch's ``get_device_properties().name``, NVML's
    ``nvmlDeviceGetName``) meets the catalog's alias ``A100-SXM4-80GB``. A bare brand word
    stays itself."""
    stripped = name.strip()
    while (match := _BRAND_WORD.match(stripped)) and match.end() < len(stripped):
        stripped = stripped[match.end() :]
    return lookup_key(stripped)


@dataclass(frozen=True, slots=True, kw_only=True)
class Catalog:
    """GPU specs and cloud offers, with lookups by (alias-tolerant) name."""

    gpus: tuple[GpuSpec, ...]
    offers: tuple[Offer, ...]
    _by_key: dict[str, GpuSpec] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict[str, GpuSpec] = {}
        for spec in self.gpus:
            for label in (spec.name, *spec.aliases):
                key = gpu_lookup_key(label)
                other = index.get(key)
                if other is not None and other.name != spec.name:
                    raise InvalidSpecError(
                        f"gpu {spec.name}.aliases",
                        f"{label!r} is already a name or alias of {other.name}",
                    )
                index[key] = spec
        object.__setattr__(self, "_by_key", index)

    # -- GPUs -------------------------------------------------------------------------------
    def gpu(self, name: str) -> GpuSpec:
        """The GPU called ``name`` or one of its aliases (:func:`gpu_lookup_key`: case, spaces,
        dashes and a leading ``NVIDIA``/``Tesla``/``AMD`` do not matter)."""
        spec = self._by_key.get(gpu_lookup_key(name))
        if spec is None:
            choices = [s.name for s in self.gpus] + [a for s in self.gpus for a in s.aliases]
            raise UnknownGpuError(name, choices, fix="see `gpucast catalog gpus`")
        return spec

    def gpu_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.gpus)

    def mig_gpu_names(self) -> tuple[str, ...]:
        """The GPUs whose MIG placements the catalog publishes (the ones ``catalog mig`` and
        MIG layouts take)."""
        return tuple(s.name for s in self.gpus if s.placeable_mig_profiles)

    # -- offers -----------------------------------------------------------------------------
    def providers(self) -> tuple[str, ...]:
        return tuple(sorted({o.provider for o in self.offers}))

    def regions(self, provider: str | None = None) -> tuple[str, ...]:
        """Regions with at least one offer (of ``provider``, when given), sorted."""
        if provider is not None:
            provider = self._provider(provider)
        return tuple(
            sorted({o.region for o in self.offers if provider is None or o.provider == provider})
        )

    def find_offers(
        self,
        provider: str | None = None,
        region: str | None = None,
        gpu: str | None = None,
        spot: bool | None = None,
        cpu_only: bool | None = None,
    ) -> tuple[Offer, ...]:
        """Offers matching every given filter.

        ``spot=True`` keeps offers that have a spot price (``False``/``None``: no filter);
        ``cpu_only=True`` keeps CPU-only offers, ``False`` only GPU offers. Unknown provider,
        region or GPU names raise the matching ``Unknown*Error`` listing close matches.
        """
        if provider is not None:
            provider = self._provider(provider)
        if region is not None:
            known = self.regions(provider)
            if region not in known:
                lowered = {r.lower(): r for r in known}
                if region.lower() not in lowered:
                    flag = f" --provider {provider}" if provider else ""
                    raise UnknownRegionError(
                        region, known, fix=f"see `gpucast catalog offers{flag}` for regions"
                    )
                region = lowered[region.lower()]
        gpu_name = self.gpu(gpu).name if gpu is not None else None
        if gpu_name is not None and cpu_only:
            raise InvalidSpecError(
                "cpu_only", "cannot be combined with a GPU filter", fix="drop --cpu-only or --gpu"
            )
        found = []
        for offer in self.offers:
            if provider is not None and offer.provider != provider:
                continue
            if region is not None and offer.region != region:
                continue
            if gpu_name is not None and offer.gpu != gpu_name:
                continue
            if spot and offer.spot_usd_per_hour is None:
                continue
            if cpu_only is True and offer.gpu is not None:
                continue
            if cpu_only is False and offer.gpu is None:
                continue
            found.append(offer)
        return tuple(found)

    @property
    def snapshot_date(self) -> date:
        """The latest ``as_of`` of any offer (or GPU row when there are no offers)."""
        dates = [o.as_of for o in self.offers] or [g.as_of for g in self.gpus]
        return max(dates)

    def _provider(self, provider: str) -> str:
        known = self.providers() or PROVIDERS
        if provider.lower() not in known:
            raise UnknownProviderError(provider, known, fix=f"e.g. --provider {sorted(known)[0]}")
        return provider.lower()


#: Environment variable naming an offers CSV every verb adds to the built-in catalog (the
#: configured default of ``--offers``).
OFFERS_ENV = "GPUCAST_OFFERS"


def offers_option() -> Any:
    """The ``--offers FILE`` request field of the verbs that price cloud offers."""
    from gpucast.domain.options import option

    return option(
        None,
        flag="offers",
        help="Offers CSV (e.g. from `gpucast catalog import-skypilot`) added to the built-in "
        f"catalog, replacing rows of the same provider, region and instance type [default: "
        f"${OFFERS_ENV} when set].",
        example="offers.csv",
    )


def provider_option(example: str = "aws") -> Any:
    """The ``--provider`` request field of a serving simulation: the offers that price its
    servers (``plan serve``'s filter, one server type)."""
    from gpucast.domain.options import lower_list, option

    return option(
        (),
        flag="provider",
        parse=lower_list,
        help="aws | gcp | azure: price the servers by this provider's offers (as plan serve).",
        example=example,
    )


def region_option(example: str = "us-east-1") -> Any:
    """The ``--region`` request field of a serving simulation (see :func:`provider_option`)."""
    from gpucast.domain.options import option

    return option(
        (),
        flag="region",
        help="Price the servers by the offers in this region (as plan serve).",
        example=example,
    )


def spot_option() -> Any:
    """The ``--spot`` request field of a serving simulation: spot prices, as ``plan serve
    --spot`` takes them (no interruptions: neither verb simulates them)."""
    from gpucast.domain.options import option

    return option(
        False,
        help="Spot prices: the cheapest offer with a spot price, at it (as plan serve --spot; "
        "interruptions are not simulated).",
    )


def regions_option() -> Any:
    """The ``--region`` request field of the planners that filter the catalog's offers."""
    from gpucast.domain.options import option

    return option((), flag="region", help="Regions allowed.")


def exclude_gpus_option() -> Any:
    """The ``--exclude-gpu`` request field of the planners that filter the catalog's offers."""
    from gpucast.domain.options import option

    return option((), flag="exclude-gpu", help="GPU types to skip.")
