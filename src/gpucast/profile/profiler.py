"""Profile a workload without running it: shapes only, on fake tensors.

The model and batch are built under ``FakeTensorMode`` on a fake CPU device (no memory is
allocated for weights or data, so ResNet-50 at batch 64 takes about as long as at batch 1),
and one training step (forward with loss, backward, optimizer step) and one inference
forward run under :class:`_OpRecorder`, a ``TorchDispatchMode`` that sees every aten op and
records, per operator class, the FLOPs (``torch.utils.flop_counter``'s formulas with ours for
sparse matmul, CPU attention, grouped-convolution backward and fused LSTM kernels:
:mod:`.flops`), an estimate of the arithmetic flop_counter does not count, and the bytes of
the tensors read and written. It also collects the names of the ops that do arithmetic
flop_counter does not count (``uncounted_ops``). The headline FLOPs per phase are its sums:
the op-level dispatch sees what ``FlopCounterMode`` would count (composite ops are decomposed
before it), without the module tracking that made ``FlopCounterMode`` half of a profile's time.

A model that comes back holding real tensors (built before profiling, e.g. a user's) is
replaced by a fake copy (:func:`gpucast.workloads.user.copy_module`), so that nothing real is
run or updated; ops fake tensors cannot shape on their own get a rule for the duration of the
profile (:mod:`.fake_rules`: CTC loss).

Saved-tensor hooks measure what autograd keeps for the backward pass (activation memory), and
the optimizer's real state after one step gives its memory. Precision follows
:mod:`gpucast.workloads.steps`: fp32, or mixed precision with ``torch.autocast`` (here CPU
autocast's operator lists, which differ from CUDA's in a few ops).
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from gpucast.domain.errors import GpucastError, InvalidSpecError
from gpucast.domain.profile import (
    OPERATOR_CLASSES,
    MemoryEstimate,
    OperatorClassCost,
    PhaseCost,
    WorkloadProfile,
)
from gpucast.domain.units import MIB
from gpucast.domain.workload import WorkloadSpec
from gpucast.profile import flops as flop_formulas
from gpucast.profile.fake_rules import static_shape_rules
from gpucast.profile.opclasses import NO_TRAFFIC, classify, does_arithmetic, is_pointwise
from gpucast.workloads.base import Workload
from gpucast.workloads.registry import get_workload
from gpucast.workloads.steps import OPTIMIZERS, autocast_for, make_optimizer
from gpucast.workloads.user import (
    copy_module,
    is_user_spec,
    reads_tensor_values,
    user_step_failed,
)

_FAKE_DEVICE = torch.device("cpu")


def tensor_bytes(t: torch.Tensor) -> int:
    """Bytes a tensor occupies: distinct elements (broadcast dimensions count once)."""
    if t.layout == torch.sparse_coo:
        nnz = int(t._nnz())
        dense_elements = math.prod(t.shape[t.sparse_dim() :])
        return nnz * (
            t.sparse_dim() * t._indices().element_size() + dense_elements * t.element_size()
        )
    if t.layout != torch.strided or t.numel() == 0:
        return 0
    elements = 1
    for size, stride in zip(t.shape, t.stride(), strict=True):
        if stride != 0:
            elements *= size
    return elements * t.element_size()


def _tensor_key(t: torch.Tensor) -> tuple[Any, ...]:
    if t.layout != torch.strided:
        return ("id", id(t))
    return (t.untyped_storage()._cdata, t.storage_offset(), tuple(t.shape), tuple(t.stride()))


def _storage_key(t: torch.Tensor) -> Any:
    return ("id", id(t)) if t.layout != torch.strided else t.untyped_storage()._cdata


def _tensors(tree: Any) -> list[torch.Tensor]:
    leaves, _ = tree_flatten(tree)
    return [x for x in leaves if isinstance(x, torch.Tensor)]


def _unique(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    seen: dict[tuple[Any, ...], torch.Tensor] = {}
    for t in tensors:
        seen.setdefault(_tensor_key(t), t)
    return list(seen.values())


#: Gathers: (the argument gathered from, the index argument) positions. They read the rows
#: their indices name, not the whole source (an embedding lookup of 64 tokens reads 64 rows of
#: a 50,257-row table); the rows read are the output's elements, or, for a bag, one row per
#: index before pooling.
GATHERS: dict[str, tuple[int, int]] = {
    "embedding": (0, 1),
    "_embedding_bag": (0, 1),
    "_embedding_bag_forward_only": (0, 1),
    "index_select": (0, 2),
    "gather": (0, 2),
}


def _gather_read_bytes(name: str, args: tuple[Any, ...], written: list[torch.Tensor]) -> int | None:
    """Bytes a gather reads (its indices, offsets and the rows they name), or None for any
    other op or a call whose arguments are not where :data:`GATHERS` says."""
    where = GATHERS.get(name)
    if where is None or len(args) <= max(where):
        return None
    source, index = args[where[0]], args[where[1]]
    if not isinstance(source, torch.Tensor) or not isinstance(index, torch.Tensor):
        return None
    others = _unique([t for t in _tensors(args) if t is not source])
    rest = sum(tensor_bytes(t) for t in others)
    if name.startswith("_embedding_bag"):
        row = math.prod(source.shape[1:]) * source.element_size()
        return rest + index.numel() * row
    gathered = sum(t.numel() for t in written[:1]) * source.element_size()
    return rest + min(gathered, tensor_bytes(source))


@dataclass(frozen=True, slots=True)
class OpCost:
    """What one aten op call costs: its class, FLOPs (counted, or approximated for arithmetic
    flop_counter does not count) and the bytes of the distinct tensors it reads and writes."""

    name: str
    op_class: str
    flops: int
    conv_flops: int
    approx_uncounted_flops: int
    bytes_read: int
    bytes_written: int


def op_cost(
    func: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    out: Any,
    formulas: dict[Any, Callable[..., int]],
) -> OpCost | None:
    """The cost of one aten op call (``None``: not an aten op, a view or metadata only).

    ``formulas`` is :func:`gpucast.profile.flops.registry`; an op with a formula is
    ``matmul_conv``, any other is classed by :func:`gpucast.profile.opclasses.classify`.
    """
    if not isinstance(func, torch._ops.OpOverload) or func.namespace != "aten":
        return None
    packet = func._overloadpacket
    name = packet.__name__
    if func.is_view or name in NO_TRAFFIC:
        return None
    formula = formulas.get(packet)
    op_class = "matmul_conv" if formula is not None else classify(name, is_pointwise(func))
    inputs = _unique(_tensors((args, {k: v for k, v in kwargs.items() if k != "out"})))
    written = _tensors(out)
    for index, argument in enumerate(func._schema.arguments):
        if argument.alias_info is not None and argument.alias_info.is_write:
            value = args[index] if index < len(args) else kwargs.get(argument.name)
            written.extend(_tensors(value))
    written = _unique(written)
    flops = conv = approx = 0
    if formula is not None:
        flops = int(formula(*args, **kwargs, out_val=out))
        conv = flops if "convolution" in name else 0
    elif does_arithmetic(name, op_class):
        largest_input = max((t.numel() for t in inputs), default=0)
        approx = max(sum(t.numel() for t in written), largest_input)
    read = _gather_read_bytes(name, tuple(args), written)
    if read is None:
        read = sum(tensor_bytes(t) for t in inputs)
    return OpCost(
        name=name,
        op_class=op_class,
        flops=flops,
        conv_flops=conv,
        approx_uncounted_flops=approx,
        bytes_read=read,
        bytes_written=sum(tensor_bytes(t) for t in written),
    )


class _ClassTotals:
    __slots__ = ("approx", "calls", "conv", "flops", "read", "written")

    def __init__(self) -> None:
        self.calls = self.flops = self.approx = self.read = self.written = self.conv = 0


class _OpRecorder(TorchDispatchMode):
    """Records FLOPs and bytes of every aten op, by phase and operator class."""

    def __init__(self, formulas: dict[Any, Callable[..., int]]) -> None:
        super().__init__()
        self.formulas = formulas
        self.phase = "forward"
        self.totals: dict[str, dict[str, _ClassTotals]] = defaultdict(
            lambda: {c: _ClassTotals() for c in OPERATOR_CLASSES}
        )
        self.uncounted: set[str] = set()
        self.largest_op_bytes: dict[str, int] = defaultdict(int)

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        cost = op_cost(func, args, kwargs, out, self.formulas)
        if cost is None:
            return out
        totals = self.totals[self.phase][cost.op_class]
        totals.calls += 1
        totals.read += cost.bytes_read
        totals.written += cost.bytes_written
        self.largest_op_bytes[self.phase] = max(
            self.largest_op_bytes[self.phase], cost.bytes_read + cost.bytes_written
        )
        totals.flops += cost.flops
        totals.conv += cost.conv_flops
        totals.approx += cost.approx_uncounted_flops
        if cost.op_class != "matmul_conv" and does_arithmetic(cost.name, cost.op_class):
            self.uncounted.add(f"aten.{cost.name}")
        return out

    def phase_cost(self, phase: str) -> PhaseCost:
        by_class = self.totals[phase]
        return PhaseCost(
            phase=phase,
            by_class=tuple(
                OperatorClassCost(
                    op_class=c,
                    calls=t.calls,
                    flops=t.flops,
                    approx_uncounted_flops=t.approx,
                    bytes_read=t.read,
                    bytes_written=t.written,
                    conv_flops=t.conv,
                )
                for c, t in by_class.items()
            ),
        )


class _SavedTensors:
    """Saved-tensor hooks summing the distinct storages autograd keeps for backward."""

    def __init__(self, exclude: set[Any]) -> None:
        self.exclude = exclude
        self.storages: dict[Any, int] = {}
        self._keep: list[torch.Tensor] = []  # keep storages alive so their ids stay unique

    def pack(self, t: torch.Tensor) -> torch.Tensor:
        key = _storage_key(t)
        if key not in self.exclude and key not in self.storages:
            self.storages[key] = (
                t.untyped_storage().nbytes() if t.layout == torch.strided else tensor_bytes(t)
            )
            self._keep.append(t)
        return t

    @staticmethod
    def unpack(t: torch.Tensor) -> torch.Tensor:
        return t

    @property
    def total_bytes(self) -> int:
        return sum(self.storages.values())


def _fake_model(model: torch.nn.Module, fake_mode: FakeTensorMode) -> torch.nn.Module:
    """``model``, or a fake copy of it when it holds real tensors (it was built before profiling
    or outside the fake mode): the profile never runs, nor updates, a real tensor."""
    held = [*model.parameters(), *model.buffers()]
    if all(fake_mode.is_our_fake(t) for t in held):
        return model
    return copy_module(model, _FAKE_DEVICE)


def profile_workload(
    spec: WorkloadSpec, *, optimizer: str = "sgd", **workload_options: Any
) -> WorkloadProfile:
    """Profile the workload ``spec.name`` (built with ``workload_options``) at ``spec``.

    A user's model that reads a tensor's value (``.item()``, ``if x.sum() > 0``: control flow
    on data, which fake tensors do not have) is profiled on real tensors on this CPU instead,
    its factory called as written, where its weights, gradients and optimizer state fit in
    half of the memory available (QA 41: no verb could price such a model)."""
    workload = workload_without_weights(spec.name, workload_options)
    try:
        return profile(workload, spec, optimizer=optimizer)
    except InvalidSpecError as exc:
        if not is_user_spec(spec.name) or not reads_tensor_values(exc.__cause__):
            raise
        _check_fits_for_real(workload, optimizer, exc)
    real = get_workload(spec.name, **workload_options)  # the factory as written
    return profile(real, spec, optimizer=optimizer, real=True)


def _check_fits_for_real(workload: Workload, optimizer: str, failed: InvalidSpecError) -> None:
    """Refuse to run ``workload`` on real tensors (``failed``: why fake ones would not do) where
    its weights, gradients and optimizer state (sized on a fake copy) would take more
    than half of the memory available now."""
    import psutil

    with FakeTensorMode(allow_non_fake_inputs=True):  # a copy that holds no memory
        params = list(workload.build_model(_FAKE_DEVICE).parameters())
    per_weight = 4 if optimizer == "adam" else 3  # weights, gradients, 1 or 2 state tensors
    need = per_weight * sum(p.numel() * p.element_size() for p in params)
    available = psutil.virtual_memory().available
    if need > available / 2:
        raise InvalidSpecError(
            "workload",
            f"{failed.detail}; on real tensors its training state alone would take "
            f"{need / 2**30:.1f} GiB, more than half of the {available / 2**30:.1f} GiB "
            "available here",
            fix="time it instead on a machine where it fits (gpucast measure train|infer)",
        ) from failed.__cause__


def workload_without_weights(name: str, options: dict[str, Any]) -> Workload:
    """The workload ``name``, to profile or to check a name with: a user's factory is called
    on the meta device first (:func:`user_workload_on_meta`), and as written where it cannot
    run there; its error, if any, is the one reported."""
    return user_workload_on_meta(name, options) or get_workload(name, **options)


def user_workload_on_meta(name: str, options: dict[str, Any]) -> Workload | None:
    """The user model ``name`` with its factory called on the meta device, so that profiling
    (or checking that it fits before measuring it) a model too big for host memory allocates
    none of its weights (QA 39: a 6.4B-parameter MLP, 25.8 GB of fp32 weights, was built for
    real and the OS killed the profile); ``None`` for a built-in, or a factory that cannot run
    there (it reads a tensor's value, loads a file onto a device)."""
    if not is_user_spec(name):
        return None
    try:
        with torch.device("meta"):
            return get_workload(name, **options)
    except GpucastError:
        return None


@contextlib.contextmanager
def _phase(recorder: _OpRecorder, name: str) -> Iterator[None]:
    recorder.phase = name
    with recorder:
        yield


@contextlib.contextmanager
def _without_fused_transformer_path() -> Iterator[None]:
    """Inference through ``nn.MultiheadAttention`` / ``nn.TransformerEncoderLayer``'s unfused
    operators: in eval() and no_grad PyTorch takes a fused fast path (one
    ``aten._transformer_encoder_layer_fwd`` per layer) that flop_counter does not count, and a
    user's encoder profiled only its head (QA 39). The fused kernels do the same arithmetic."""
    enabled = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        yield
    finally:
        torch.backends.mha.set_fastpath_enabled(enabled)


@contextlib.contextmanager
def _quiet_fake_tensor_log() -> Iterator[None]:
    """Keep torch's fake-tensor logger from printing a traceback to stderr when a model's
    operator fails (the failure is raised, and reported in one line, by :func:`profile`)."""
    log = logging.getLogger("torch._subclasses.fake_tensor")
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        log.setLevel(level)


def _run_failed(name: str, exc: Exception, *, real: bool = False) -> GpucastError:
    """A step that failed on fake (or ``real``) tensors: the user's model or example batch is
    to blame (exit 2, the fix that fits), a built-in workload is a failure of gpucast (exit 1)."""
    what = f"running {name} on {'real' if real else 'fake'} tensors"
    if is_user_spec(name):
        return user_step_failed(what, exc)
    lines = str(exc).strip().splitlines()
    return GpucastError(
        f"profile: {what} failed: {type(exc).__name__}: {lines[0] if lines else ''}",
        fix="models with data-dependent shapes cannot be profiled statically; "
        "measure them with gpucast measure",
    )


def profile(
    workload: Workload, spec: WorkloadSpec, *, optimizer: str = "sgd", real: bool = False
) -> WorkloadProfile:
    """Profile an already-built :class:`Workload` at ``spec``'s batch size and precision, on
    fake tensors, or with ``real`` on real ones on the CPU (one real step, on a copy of the
    model: for a model whose control flow reads its tensors' values)."""
    if optimizer not in OPTIMIZERS:
        raise InvalidSpecError(
            "optimizer", f"must be one of {', '.join(OPTIMIZERS)}", got=optimizer
        )
    autocast_for(_FAKE_DEVICE, spec.precision)  # raises for a precision CPU autocast lacks
    recorder = _OpRecorder(flop_formulas.registry())
    notes: list[str] = []
    tensors: contextlib.AbstractContextManager[FakeTensorMode | None] = (
        contextlib.nullcontext() if real else FakeTensorMode(allow_non_fake_inputs=True)
    )
    with static_shape_rules(), _quiet_fake_tensor_log(), tensors as fake_mode:
        try:
            model = workload.build_model(_FAKE_DEVICE)  # a copy: nothing of the factory's runs
            if fake_mode is not None:
                model = _fake_model(model, fake_mode)
            inputs, target = workload.make_batch(spec.batch_size, _FAKE_DEVICE)
        except GpucastError:
            raise
        except Exception as exc:
            raise GpucastError(
                f"profile: building {workload.name} on {'real' if real else 'fake'} tensors "
                f"failed: {exc}",
                fix="check that the model builds on the meta device",
            ) from exc
        params = list(model.parameters())
        trainable = [p for p in params if p.requires_grad]
        buffers = list(model.buffers())
        batch_tensors = _unique(_tensors((inputs, target)))
        exclude = {_storage_key(t) for t in [*params, *buffers, *batch_tensors]}
        saved = _SavedTensors(exclude)
        try:
            model.train()
            with (
                _phase(recorder, "forward"),
                torch.autograd.graph.saved_tensors_hooks(saved.pack, saved.unpack),
                autocast_for(_FAKE_DEVICE, spec.precision),
            ):
                loss = workload.loss(model(*inputs), target)
            activations_bytes = saved.total_bytes
            with _phase(recorder, "backward"):
                if loss.requires_grad:
                    loss.backward()
            optimizer_state_bytes = 0
            if trainable:
                opt = make_optimizer(optimizer, trainable)
                # The first step creates the state (clones, zeros); record a steady-state one.
                opt.step()
                with _phase(recorder, "optimizer"):
                    opt.step()
                state = _unique([t for s in opt.state.values() for t in _tensors(dict(s))])
                optimizer_state_bytes = sum(tensor_bytes(t) for t in state)
            model.eval()
            with (
                torch.no_grad(),
                _without_fused_transformer_path(),
                _phase(recorder, "inference"),
                autocast_for(_FAKE_DEVICE, spec.precision),
            ):
                model(*inputs)
        except GpucastError:
            raise
        except Exception as exc:
            raise _run_failed(workload.name, exc, real=real) from exc

        weights_bytes = sum(tensor_bytes(t) for t in _unique([*params, *buffers]))
        gradient_bytes = sum(tensor_bytes(p) for p in trainable)
        inputs_bytes = sum(tensor_bytes(t) for t in batch_tensors)
        # what a request carries: the model's inputs, floating-point ones as elements (sent
        # at the serving precision; autocast leaves them fp32 here), the others as bytes
        model_inputs = _unique(_tensors(inputs))
        dense_floats = [t for t in model_inputs
                        if t.is_floating_point() and t.layout == torch.strided]  # fmt: skip
        float_elements = sum(tensor_bytes(t) // t.element_size() for t in dense_floats)
        other_bytes = sum(tensor_bytes(t) for t in model_inputs) - sum(
            tensor_bytes(t) for t in dense_floats
        )
        tensor_sizes = [tensor_bytes(p) for p in trainable]

    phases = tuple(
        recorder.phase_cost(p) for p in ("forward", "backward", "optimizer", "inference")
    )
    counts = {p.phase: p.flops for p in phases}
    if spec.precision != "fp32":
        notes.append(
            f"{spec.precision} profiled as torch.autocast mixed precision with CPU autocast's "
            "operator lists; CUDA's cast a few more ops"
        )
    if real:
        notes.append(
            "profiled on real tensors on the CPU, one step at this batch: the model reads a "
            "tensor's value (control flow on data), which fake tensors do not have; its FLOPs "
            "and memory are those of the path the factory's example batch took"
        )
    if recorder.uncounted:
        notes.append(
            "uncounted_ops do arithmetic that flop_counter does not count; "
            "approx_uncounted_flops estimates it at one FLOP per element"
        )
    return WorkloadProfile(
        workload=workload.name,
        batch_size=spec.batch_size,
        precision=spec.precision,
        parameters_total=sum(p.numel() for p in params),
        parameters_trainable=sum(p.numel() for p in trainable),
        parameter_tensors=len(trainable),
        parameter_tensor_mean_mib=(
            sum(tensor_sizes) / len(tensor_sizes) / MIB if tensor_sizes else 0.0
        ),
        parameter_tensor_max_mib=max(tensor_sizes, default=0) / MIB,
        gradient_bytes=gradient_bytes,
        forward_flops=counts.get("forward", 0),
        backward_flops=counts.get("backward", 0),
        inference_flops=counts.get("inference", 0),
        phases=phases,
        uncounted_ops=tuple(sorted(recorder.uncounted)),
        memory=MemoryEstimate(
            optimizer=optimizer,
            weights_bytes=weights_bytes,
            gradients_bytes=gradient_bytes,
            optimizer_state_bytes=optimizer_state_bytes,
            activations_bytes=activations_bytes,
            inputs_bytes=inputs_bytes,
            inference_working_bytes=recorder.largest_op_bytes["inference"],
            model_input_float_elements=float_elements,
            model_input_other_bytes=other_bytes,
        ),
        notes=tuple(notes),
    )
