"""User models given as ``module:factory`` or ``path/to/file.py:factory``.

The factory is called with the workload options as keyword arguments and returns
``(model, example_batch)`` or ``(model, example_batch, loss_fn)``:

* ``example_batch``: a tensor or a tuple of tensors passed as ``model(*example_batch)``; every
  tensor's first dimension is the batch. Batches of any size are made by repeating or slicing
  the example along dimension 0.
* ``loss_fn(output) -> scalar`` (optional): the training loss. Without it the loss is the mean
  of the (first) floating-point output, which is enough to drive a real backward pass.

The model may be built on the CPU, a GPU or ``meta`` (no memory; its weights then start as
zeros when a step is measured). Every step runner, and the profiler, gets a copy made by
:func:`copy_module`, which clones each tensor in the active mode: under the profiler's fake
tensors that copy holds no memory, BatchNorm buffers and plain tensor attributes included.

The module is imported with :mod:`importlib` — only an explicit import of the path given;
nothing is evaluated or unpickled.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import inspect
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.workload import WorkloadOptions, current_folder_importable
from gpucast.workloads._options import boolean, reject_unknown
from gpucast.workloads.base import Batch, Workload

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MODULE_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
FIX = "give module.path:factory (importable) or path/to/file.py:factory"


def is_user_spec(name: str) -> bool:
    """Whether ``name`` names a user model (``module:factory``) rather than a built-in."""
    return ":" in name


def _import(module_part: str) -> Any:
    if module_part.endswith(".py"):
        path = Path(module_part).expanduser().resolve()
        if not path.is_file():
            raise InvalidSpecError("workload", f"module file {module_part} does not exist", fix=FIX)
        module_name = f"gpucast_user_{path.stem}_{abs(hash(str(path)))}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise InvalidSpecError("workload", f"cannot load {module_part} as Python", fix=FIX)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            del sys.modules[module_name]
            raise _user_code_failed(f"importing {module_part}", exc) from exc
        return module
    if not _MODULE_PATH.match(module_part):
        raise InvalidSpecError(
            "workload", "module must be a dotted Python module path", got=module_part, fix=FIX
        )
    with current_folder_importable():
        try:
            return importlib.import_module(module_part)
        except ModuleNotFoundError as exc:
            if exc.name is not None and module_part.startswith(exc.name):
                raise InvalidSpecError(
                    "workload",
                    f"cannot import module {module_part!r} ({exc.msg})",
                    fix="check the spelling, and run from its folder or put that folder on "
                    "PYTHONPATH; " + FIX,
                ) from None
            raise _user_code_failed(f"importing {module_part}", exc) from exc
        except Exception as exc:
            raise _user_code_failed(f"importing {module_part}", exc) from exc


def _exception_detail(exc: BaseException) -> str:
    """``Type: message`` of ``exc`` on one line (a SyntaxError with its file and line)."""
    if isinstance(exc, SyntaxError):
        where = f" ({exc.filename}, line {exc.lineno})" if exc.filename else ""
        return f"SyntaxError: {exc.msg}{where}"
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _user_code_failed(what: str, exc: BaseException) -> InvalidSpecError:
    """The one-line error for an exception raised by the user's own code (its module or its
    factory); ``--debug`` shows the traceback."""
    return InvalidSpecError(
        "workload",
        f"{what} raised {_exception_detail(exc)}",
        fix="fix the user model (`gpucast --debug ...` shows the traceback)",
    )


#: torch's exceptions for an operator whose result depends on a tensor's values, which fake
#: tensors (the profiler's) do not have: ``.item()``, ``if x.sum() > 0``, ``nonzero``
_DATA_DEPENDENT = (
    "DataDependentOutputException",
    "DynamicOutputShapeException",
    "GuardOnDataDependentSymNode",
)


def reads_tensor_values(exc: BaseException | None) -> bool:
    """Whether ``exc`` is fake tensors' refusal of an operator that reads a tensor's value."""
    return exc is not None and type(exc).__name__ in _DATA_DEPENDENT


_MISSING_ARGUMENT = re.compile(r"missing \d+ required (keyword-only |positional )?argument")


def user_step_failed(what: str, exc: BaseException) -> InvalidSpecError:
    """The one-line error for a user model's step (forward, loss, backward) that raised:
    the user's model, example batch or loss is at fault (exit 2, not gpucast's failure),
    ``what`` names the step, and the fix is the one that fits the exception -- QA 41: the
    measuring verbs exited 1 (a traceback for any exception but a Runtime-, Value- or
    TypeError), and the profile's fix was the same paragraph for every failure."""
    detail = _exception_detail(exc)
    if reads_tensor_values(exc):
        fix = (
            "the model reads a tensor's value (.item(), `if x.sum() > 0`, nonzero), which the "
            "profile's fake tensors do not have: time it instead (gpucast measure train|infer)"
        )
    elif isinstance(exc, TypeError) and _MISSING_ARGUMENT.search(str(exc)):
        fix = (
            "the model is called as model(*example_batch): return every input it needs in the "
            "example batch, and give it keyword arguments in the factory (wrap it in a module "
            "whose forward(x) calls model(x, key=value))"
        )
    else:
        fix = (
            "fix the model, its example batch or its loss (model(*example_batch) gets the "
            "inputs only; a loss goes third, loss_fn(output) -> scalar); `gpucast --debug ...` "
            "shows the traceback"
        )
    return InvalidSpecError("workload", f"{what} failed: {detail}", fix=fix)


def _factory_parameters(factory: Any) -> list[inspect.Parameter] | None:
    """The factory's parameters (string annotations evaluated where they can be), ``None``
    where Python cannot read its signature."""
    for evaluate in (True, False):
        try:
            return list(inspect.signature(factory, eval_str=evaluate).parameters.values())
        except (TypeError, ValueError, NameError, SyntaxError, AttributeError):
            continue
    return None


def _as_parameter_type(parameter: inspect.Parameter, value: Any) -> Any:
    """``value`` (as ``-o`` parsed it: an int, a float or text) as the type the factory's
    parameter is annotated or defaulted to: ``bias=false`` is ``False`` for ``bias: bool``
    (the text ``'false'`` is true in Python), ``width=1e2`` is ``100`` for ``width: int``."""
    kind = parameter.annotation
    if kind is inspect.Parameter.empty or not isinstance(kind, type | str):
        kind = type(parameter.default)
    name = kind if isinstance(kind, str) else getattr(kind, "__name__", "")
    if name == "bool":
        return boolean(parameter.name, value)
    if name in ("int", "float") and isinstance(value, str):  # QA 39: it reached the factory
        example = parameter.default
        if isinstance(example, bool) or not isinstance(example, int | float):
            example = 1
        raise InvalidSpecError(
            parameter.name,
            "must be a whole number" if name == "int" else "must be a number",
            got=value,
            fix=f"e.g. -o {parameter.name}={example}",
        )
    if name == "int" and isinstance(value, float) and not isinstance(value, bool):
        if not value.is_integer():
            raise InvalidSpecError(
                parameter.name,
                "must be a whole number",
                got=value,
                fix=f"e.g. -o {parameter.name}={round(value)}",
            )
        return int(value)
    return value


def _typed_options(name: str, factory: Any, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` as the factory's parameters take them (:func:`_as_parameter_type`), after
    refusing a ``-o KEY=VALUE`` the factory has no parameter for, naming the ones it has, as
    a built-in's options are (the TypeError it would raise read as a bug in the user's code).
    A factory taking ``**kwargs`` takes any; one whose signature Python cannot read gets
    ``options`` as given."""
    params = _factory_parameters(factory)
    if params is None:
        return options
    named = {
        p.name: p
        for p in params
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }
    if not any(p.kind is p.VAR_KEYWORD for p in params):
        reject_unknown(name, options, list(named))
    return {
        key: _as_parameter_type(named[key], value) if key in named else value
        for key, value in options.items()
    }


def _as_batch_tuple(example: Any) -> tuple[torch.Tensor, ...]:
    tensors = (example,) if isinstance(example, torch.Tensor) else example
    if (
        not isinstance(tensors, tuple | list)
        or not tensors
        or not all(isinstance(t, torch.Tensor) and t.dim() >= 1 for t in tensors)
    ):
        raise InvalidSpecError(
            "workload factory",
            "example batch must be a tensor or a tuple of tensors with a batch dimension",
            got=type(example).__name__,
            fix="return (model, torch.randn(batch, ...)) from the factory",
        )
    sizes = {t.shape[0] for t in tensors}
    if len(sizes) != 1:
        raise InvalidSpecError(
            "workload factory",
            "example tensors must share the first (batch) dimension",
            got=sorted(sizes),
        )
    return tuple(tensors)


def resize_batch(tensor: torch.Tensor, batch_size: int) -> torch.Tensor:
    """Repeat or slice ``tensor`` along dimension 0 to ``batch_size`` rows."""
    rows = tensor.shape[0]
    if rows >= batch_size:
        return tensor[:batch_size]
    repeats = -(-batch_size // rows)
    return tensor.repeat(repeats, *([1] * (tensor.dim() - 1)))[:batch_size]


def _tensor_attributes(module: nn.Module) -> list[torch.Tensor]:
    """The tensors a module holds: parameters, buffers and plain tensor attributes."""
    held = [*module._parameters.values(), *module._buffers.values()]
    held.extend(v for v in vars(module).values() if isinstance(v, torch.Tensor))
    return [t for t in held if t is not None]


def _materialise(tensor: torch.Tensor, device: torch.device, *, clone: bool) -> torch.Tensor:
    """A copy of ``tensor`` (``clone``), else ``tensor`` moved to ``device``.

    A tensor on ``meta`` (a model or example built there to keep a big model out of memory)
    has no values: it becomes zeros on ``device`` (a fake tensor when profiling).
    """
    if tensor.is_meta and device.type != "meta":
        return torch.zeros_like(tensor, device=device)
    return tensor.detach().clone() if clone else tensor.to(device)


def copy_module(model: nn.Module, device: torch.device) -> nn.Module:
    """A deep copy of ``model`` whose tensors are copied with ``clone``, tying kept.

    ``copy.deepcopy`` copies a plain tensor (a buffer such as BatchNorm's ``running_mean`` or
    ``num_batches_tracked``) through its storage, which under ``FakeTensorMode`` allocates a
    real CPU storage and then fails to attach it to the fake tensor ("Attempted to set the
    storage of a tensor on device meta to a storage on different device cpu": issue #22).
    ``clone`` follows the active mode instead: a real copy normally, a fake tensor (no memory)
    when profiling. Each tensor is copied once (shared ones stay shared; gradients are not
    copied), on its own device, except tensors on ``meta``, which become zeros on ``device``.
    """
    memo: dict[int, Any] = {}
    with torch.no_grad():
        for module in model.modules():
            for tensor in _tensor_attributes(module):
                if id(tensor) in memo:
                    continue
                copied = _materialise(tensor, device, clone=True)
                if isinstance(tensor, nn.Parameter):
                    if type(tensor) is not nn.Parameter:
                        continue  # e.g. lazy modules' UninitializedParameter: deepcopy's own
                    copied = nn.Parameter(copied, requires_grad=tensor.requires_grad)
                elif tensor.requires_grad:
                    copied.requires_grad_()
                memo[id(tensor)] = copied
    return copy.deepcopy(model, memo)


def _default_loss(output: Any, _target: Any) -> torch.Tensor:
    candidates = (
        [output]
        if isinstance(output, torch.Tensor)
        else list(output.values() if isinstance(output, dict) else output)
    )
    for value in candidates:
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            return value.float().mean()
    raise InvalidSpecError(
        "workload factory",
        "model output has no floating-point tensor to train on",
        fix="return (model, batch, loss_fn) with loss_fn(output) -> scalar tensor",
    )


def _factory(name: str) -> Any:
    """The factory ``module:factory`` names (its module imported)."""
    module_part, _, factory_name = name.rpartition(":")
    if module_part.strip() == "run" and factory_name.strip().isdigit():  # QA 39
        raise InvalidSpecError(
            "workload",
            "a stored run (run:ID) is read by predict train and plan train only",
            got=name,
            fix="name the workload itself (gpucast runs show ID names it, with its -o), or "
            f"gpucast predict train --workload {name.strip()}",
        )
    if not module_part or not _IDENTIFIER.match(factory_name):
        raise InvalidSpecError("workload", "must be module:factory", got=name, fix=FIX)
    module = _import(module_part)
    factory = module.__dict__.get(factory_name)
    if not callable(factory):
        # the module's own functions first: the factories (QA 41: its classes, sorted first
        # by case, took the eight places)
        public = sorted(
            (k for k, v in module.__dict__.items() if callable(v) and not k.startswith("_")),
            key=lambda k: (not _own_function(module, module.__dict__[k]), k),
        )
        raise InvalidSpecError(
            "workload",
            f"module {module_part!r} has no callable {factory_name!r}",
            fix=f"callables there: {', '.join(public[:8]) or 'none'}"
            + (", ..." if len(public) > 8 else ""),
        )
    return factory


def _own_function(module: Any, value: Any) -> bool:
    """Whether ``value`` is a function defined in ``module`` (not a class, not imported)."""
    return inspect.isfunction(value) and value.__module__ == module.__name__


def user_option_defaults(name: str) -> dict[str, Any]:
    """The keyword parameters ``module:factory`` declares with a default, by name, without
    calling it (its module imported): what ``-o`` may set, as an error's example."""
    params = _factory_parameters(_factory(name)) or []
    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return {p.name: p.default for p in params if p.kind in keyword and p.default is not p.empty}


def typed_user_options(name: str, options: WorkloadOptions) -> WorkloadOptions:
    """``options`` as ``module:factory``'s parameters take them (``width=1e2`` is ``100`` for
    ``width: int``, ``bias=no`` is ``False`` for ``bias: bool``; an unannotated parameter's
    value as ``-o`` parsed it), in their order, without calling the factory: what a run is
    stored under, so that it names the model the factory built."""
    typed = _typed_options(name, _factory(name), dict(options))
    return tuple((key, typed[key]) for key, _ in options)


def load_user_workload(name: str, /, **options: Any) -> Workload:
    """Import ``module:factory``, call ``factory(**options)`` and adapt it to a Workload."""
    module_part, _, factory_name = name.rpartition(":")
    factory = _factory(name)
    options = _typed_options(name, factory, options)
    try:
        result = factory(**options)
    except Exception as exc:
        raise _user_code_failed(f"calling {factory_name}() of {module_part}", exc) from exc
    if not isinstance(result, tuple) or len(result) not in (2, 3):
        raise InvalidSpecError(
            "workload factory",
            "must return (model, example_batch) or (model, example_batch, loss_fn)",
            got=type(result).__name__,
        )
    model, example = result[0], _as_batch_tuple(result[1])
    if not isinstance(model, nn.Module):
        raise InvalidSpecError(
            "workload factory", "first return value must be an nn.Module", got=type(model).__name__
        )
    user_loss: Callable[[Any], torch.Tensor] | None = result[2] if len(result) == 3 else None
    if user_loss is not None and not callable(user_loss):
        raise InvalidSpecError(
            "workload factory", "loss_fn must be callable", got=type(user_loss).__name__
        )

    def build_model(device: torch.device) -> nn.Module:
        # A copy, so that moving it (to a GPU, to ``meta``) never alters the factory's model and
        # every step runner starts from the same weights.
        instance = copy_module(model, device)
        tensors = [*instance.parameters(), *instance.buffers()]
        if any(t.device != device for t in tensors):
            instance = instance.to(device)
        return instance

    def make_batch(batch_size: int, device: torch.device) -> Batch:
        # resized on ``device``: on ``meta`` a batch of any size allocates nothing (the check
        # that a measured batch fits the device makes one there)
        inputs = tuple(
            resize_batch(_materialise(t, device, clone=False), batch_size) for t in example
        )
        return inputs, None

    def loss(output: Any, target: Any) -> torch.Tensor:
        return user_loss(output) if user_loss is not None else _default_loss(output, target)

    return Workload(
        name=name,
        family="user",
        sample_unit="samples",
        build_model=build_model,
        make_batch=make_batch,
        loss=loss,
        description=f"user model {name}",
    )
