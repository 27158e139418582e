"""The one rule for how much of a GPU's memory a job can fill: :func:`usable_bytes`.

Every verb that asks "does it fit?" -- ``predict train``, ``simulate train``, ``plan train``,
``predict llm-train`` / ``plan llm-train`` (per pipeline stage) and the inference engines of
``predict infer`` / ``predict llm-serve`` (as the cap on the engine's share) -- measures a
GPU against the same number: the catalog's memory less what a CUDA process loses before it
allocates anything of its own, :data:`RESERVED_GIB` plus :data:`RESERVED_FRACTION` of the
memory. An 80 GiB H100 has 75.0 GiB usable, a 40 GiB A100 37.0, a 24 GiB L4 21.8.

Where a verb needs more room than that, it says so on top of this rule, never instead of it:
``predict llm-train`` counts NCCL communicators and buffers as a need
(``ParallelAssumptions.framework_overhead_gib``); an inference engine takes its own documented
share of the GPU (vLLM's ``gpu_memory_utilization`` 0.9 of the whole GPU, TensorRT-LLM's
``kv_cache_free_gpu_memory_fraction`` 0.9 of what the weights leave) less its fitted reserve
for activations and CUDA graphs where that is smaller than the usable bytes, and the usable
bytes where it is not (:func:`engine_room_bytes`). A planner that keeps its own documented
share of the memory for what it does not count (TorchRec's 15% storage reservation in ``plan
embeddings``, the feature store of ``predict gnn --model gat``) takes that share, never more
than the usable bytes (:func:`share_bytes`); a MIG slice is a GPU of its own memory
(``plan serve``, ``plan serve --mix``, ``simulate serve``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpucast.domain.units import GIB

if TYPE_CHECKING:  # numpy loads where an array is priced, not with the CLI (tests/cli/test_startup)
    import numpy as np
    import numpy.typing as npt

#: GiB every GPU process loses to the CUDA context (its code and data: ~0.3-0.6 GiB on
#: Ampere/Hopper with CUDA 12's lazy module loading, more without; CUDA C++ Programming Guide,
#: "Lazy Loading", https://docs.nvidia.com/cuda/cuda-c-programming-guide/#lazy-loading) plus
#: the cuBLAS / cuDNN / NCCL library handles and workspaces a training or serving step creates.
#: A prior, not fitted: rounded up to 1 GiB so a plan does not fit to the last byte.
RESERVED_GIB = 1.0
#: Share of the memory lost to the caching allocator's fragmentation: PyTorch keeps freed
#: blocks per size class and stream, so a peak of N allocated bytes reserves more than N
#: (https://pytorch.org/docs/stable/notes/cuda.html#memory-management; the ZeRO paper,
#: Rajbhandari et al. 2020, section 3.2, saw out-of-memory errors with over 30% of memory
#: still free in extreme cases). A prior, not fitted: 5% for a steady loop whose tensors
#: repeat their sizes every step.
RESERVED_FRACTION = 0.05


def usable_bytes(
    memory_gib: float,
    *,
    reserved_gib: float = RESERVED_GIB,
    reserved_fraction: float = RESERVED_FRACTION,
) -> float:
    """Bytes of a ``memory_gib`` GPU a job can fill: the memory less ``reserved_gib`` and
    ``reserved_fraction`` of it (see the module docstring); never below 0."""
    return max(memory_gib * GIB * (1.0 - reserved_fraction) - reserved_gib * GIB, 0.0)


def usable_gib(memory_gib: float) -> float:
    """:func:`usable_bytes` of a ``memory_gib`` GPU (or MIG slice) in GiB."""
    return usable_bytes(memory_gib) / GIB


def usable_text(memory_gib: float) -> str:
    """The usable memory of a ``memory_gib`` GPU in words, for a refusal or an assumption:
    ``75.0 GiB usable of 80 GiB``."""
    return f"{usable_gib(memory_gib):.1f} GiB usable of {memory_gib:g} GiB"


def share_bytes(memory_gib: float, share: float) -> float:
    """Bytes of a planner's own ``share`` of a ``memory_gib`` GPU (the rest kept for what it
    does not count), never more than :func:`usable_bytes`: the rule caps the share where the
    share keeps less than the rule does: below ``RESERVED_GIB / (1 - RESERVED_FRACTION -
    share)`` GiB (10 GiB for a 0.85 share, 20 for 0.9)."""
    return min(share * memory_gib * GIB, usable_bytes(memory_gib))


def _usable(
    memory_bytes: npt.NDArray[np.float64] | np.float64,
    *,
    reserved_gib: float = RESERVED_GIB,
    fraction: float = RESERVED_FRACTION,
) -> npt.NDArray[np.float64]:
    import numpy as np

    return np.asarray(np.maximum(memory_bytes * (1.0 - fraction) - reserved_gib * GIB, 0.0))


def engine_room_bytes(
    memory_gib: npt.ArrayLike,
    held_bytes: npt.ArrayLike,
    fraction: npt.ArrayLike,
    of_free: npt.ArrayLike,
    reserve_bytes: npt.ArrayLike,
) -> npt.NDArray[np.float64]:
    """Bytes an inference engine leaves its KV cache beside ``held_bytes`` of weights (< 0:
    the weights do not fit). The engine's own share -- ``fraction`` of the GPU (vLLM's
    ``gpu_memory_utilization``) or, where ``of_free``, of what the weights leave
    (TensorRT-LLM) -- less its fitted ``reserve_bytes`` (activations of the largest pass, CUDA
    graphs, buffers, its context), but never more than what the weights leave of
    :func:`usable_bytes`: an engine told to take the whole GPU (DeepSpeed-MII, llama.cpp)
    gets the usable bytes, as every other verb does; one that keeps more headroom (vLLM's
    0.9) keeps it on top of the rule."""
    import numpy as np

    mem = np.asarray(memory_gib, dtype=np.float64) * GIB
    held = np.asarray(held_bytes, dtype=np.float64)
    frac = np.asarray(fraction, dtype=np.float64)
    own = np.where(np.asarray(of_free) > 0, frac * (mem - held), frac * mem - held)
    return np.asarray(np.minimum(own - reserve_bytes, _usable(mem) - held), dtype=np.float64)


def engine_share_note(
    engine: str,
    memory_gib: float,
    held_bytes: float,
    fraction: float,
    of_free: bool,
    reserve_gib: float,
) -> str:
    """How :func:`engine_room_bytes` came out for one GPU, in words, for the output."""
    mem, usable = memory_gib * GIB, usable_bytes(memory_gib)
    wanted = (fraction * (mem - held_bytes) + held_bytes if of_free else fraction * mem) - (
        reserve_gib * GIB
    )
    whole = f"{fraction:g} of what the weights leave" if of_free else f"{fraction:g} of the GPU"
    how = f"{engine} takes {whole} less its fitted {reserve_gib:.1f} GiB reserve (activations, "
    rule = (
        f"{usable / GIB:.1f} GiB usable of {memory_gib:g} GiB (every verb's rule: less "
        f"{RESERVED_GIB:g} GiB CUDA context and {RESERVED_FRACTION:.0%} fragmentation)"
    )
    how += f"CUDA graphs, buffers): {wanted / GIB:.1f} GiB, "
    return how + (f"within the {rule}" if wanted <= usable else f"capped at the {rule}")
