"""User models given as module:factory or file.py:factory."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gpucast.domain.errors import InvalidSpecError
from gpucast.domain.workload import WorkloadSpec
from gpucast.workloads import get_workload
from gpucast.workloads.steps import make_step
from gpucast.workloads.user import resize_batch

HERE = Path(__file__).resolve().parent
FILE = HERE / "example_user_model.py"
CPU = torch.device("cpu")


def test_file_path_spec_builds_and_trains() -> None:
    workload = get_workload(f"{FILE}:build", hidden=5)
    assert workload.family == "user"
    step = make_step(workload, WorkloadSpec(name=workload.name, batch_size=5), "train", CPU)
    assert [t.shape[0] for t in step.inputs] == [5, 5]
    weights = step.model.out.weight.detach().clone()
    step()
    assert not torch.equal(weights, step.model.out.weight)


def test_dotted_module_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))
    workload = get_workload("example_user_model:build_with_loss")
    step = make_step(workload, WorkloadSpec(name=workload.name, batch_size=3), "train", CPU)
    step()
    inputs, _ = workload.make_batch(1, CPU)
    assert inputs[0].shape == (1, 6)


def test_tied_weights_stay_tied() -> None:
    workload = get_workload(f"{FILE}:tied")
    model = workload.build_model(CPU)
    assert sum(p.numel() for p in model.parameters()) == 50 * 16
    make_step(workload, WorkloadSpec(name="t", batch_size=7), "train", CPU)()


def test_resize_batch_repeats_and_slices() -> None:
    example = torch.arange(6).view(3, 2)
    assert resize_batch(example, 2).tolist() == [[0, 1], [2, 3]]
    grown = resize_batch(example, 7)
    assert grown.shape == (7, 2)
    assert grown[3:6].tolist() == example.tolist()


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("no_such_module_xyz:build", "cannot import module"),
        (f"{HERE / 'missing.py'}:build", "does not exist"),
        (f"{FILE}:nothing_here", "has no callable 'nothing_here'"),
        (f"{FILE}:not_a_pair", "must return"),
        (f"{FILE}:no_batch_dim", "batch dimension"),
        (f"{FILE}:", "module:factory"),
        ("bad module:build", "dotted Python module path"),
        # QA 39: predict train --workload run:6 said "must be module:factory"
        ("run:6", r"run:ID\) is read by predict train and plan train only.*predict train --w"),
    ],
)
def test_bad_specs_are_invalid_input(spec: str, match: str) -> None:
    with pytest.raises(InvalidSpecError, match=match) as info:
        get_workload(spec)
    assert info.value.exit_code == 2


def test_a_model_without_parameters_is_refused_for_training_naming_the_infer_verb(
    tmp_path: Path,
) -> None:
    """QA session 36: the fix said `use --mode infer`, a flag no verb has."""
    module = tmp_path / "noparams.py"
    module.write_text(
        "import torch\n\ndef build():\n    return torch.nn.ReLU(), torch.randn(4, 3)\n"
    )
    workload = get_workload(f"{module}:build")
    spec = WorkloadSpec(name=workload.name, batch_size=4)
    with pytest.raises(InvalidSpecError, match="has no trainable parameters") as info:
        make_step(workload, spec, "train", CPU)
    assert info.value.field == "workload"
    assert f"gpucast measure infer {workload.name}" in str(info.value)
    assert "--mode" not in str(info.value)
    make_step(workload, spec, "infer", CPU)()  # inference still runs


def test_an_option_the_factory_does_not_take_names_the_option_and_its_parameters(
    tmp_path: Path,
) -> None:
    """QA session 38: `-o depth=3` on build(features, hidden) read as a bug in the user's
    code ("raised TypeError ...; fix the user model"); it is the option that is wrong."""
    with pytest.raises(InvalidSpecError) as info:
        get_workload(f"{FILE}:build", depth=3)
    text = str(info.value)
    assert "option 'depth'" in text and "is not an option" in text
    assert "features, hidden" in text and "fix the user model" not in text
    assert info.value.exit_code == 2
    module = tmp_path / "anykw.py"  # a factory taking **kwargs takes any option
    module.write_text(
        "import torch\n\ndef build(**kw):\n    return torch.nn.Linear(3, 2), torch.randn(4, 3)\n"
    )
    assert get_workload(f"{module}:build", depth=3).family == "user"


_TYPED = """from __future__ import annotations
import torch

def build(width: int = 4, bias: bool = True, *, norm=False):
    layers = [torch.nn.Linear(width, width, bias=bias)]
    if norm:
        layers.append(torch.nn.LayerNorm(width))
    return torch.nn.Sequential(*layers), torch.randn(2, width)
"""


@pytest.mark.parametrize(
    ("typed", "params"),
    [
        ("bias=false", 16),
        ("bias=no", 16),
        ("bias=0", 16),
        ("bias=yes", 20),
        ("norm=true", 28),
        ("norm=off", 20),
        ("width=1e1", 110),
    ],
)
def test_a_user_factory_gets_its_options_as_its_parameters_types(
    tmp_path: Path, typed: str, params: int
) -> None:
    """QA session 38 (M F1): `-o bias=false` reached the factory as the text 'false' (true in
    Python), so the model kept its biases and was stored as `-o bias=false`; a parameter typed
    or defaulted bool takes the spellings built-in options take, an int one a whole 1e1."""
    from gpucast.domain.workload import parse_workload_options

    module = tmp_path / "typed.py"
    module.write_text(_TYPED)
    options = dict(parse_workload_options([typed]))
    model = get_workload(f"{module}:build", **options).build_model(CPU)
    assert sum(p.numel() for p in model.parameters()) == params


def test_a_user_models_options_are_stored_as_its_factory_takes_them(tmp_path: Path) -> None:
    """`-o width=1e2` was stored as `width=100.0` (and `bias=no` as the text `no`) while the
    factory built a 100-wide model without biases; stored now as the factory took them, an
    unannotated parameter's value as given (``-o`` parsed it)."""
    from gpucast.domain.workload import parse_workload_options
    from gpucast.inputs.workload import measured_name
    from gpucast.workloads import canonical_options, configuration_name

    module = tmp_path / "typed.py"
    module.write_text(_TYPED + "\ndef loose(width, **kw):\n    return build(int(width))\n")
    given = parse_workload_options(["width=1e2", "bias=no", "norm=yes"])
    stored = canonical_options(f"{module}:build", given)
    assert stored == (("width", 100), ("bias", False), ("norm", True))
    assert type(stored[0][1]) is int
    name = configuration_name(f"{module}:build", given)
    assert name == f"{module}:build -o bias=false -o norm=true -o width=100"
    assert measured_name(f"{module}:build", given) == name  # the lookup agrees
    loose = parse_workload_options(["width=1e2", "depth=2.5"])
    assert canonical_options(f"{module}:loose", loose) == (("width", 100.0), ("depth", 2.5))
    missing = (("width", 1.0),)  # a module that cannot be loaded: as given (the load says why)
    assert canonical_options(f"{tmp_path / 'nope.py'}:build", missing) == missing


def test_a_user_option_not_of_its_parameters_type_names_the_option(tmp_path: Path) -> None:
    module = tmp_path / "typed.py"
    module.write_text(_TYPED)
    # QA 39: `-o width=abc` reached the factory as text and the user's code was blamed
    for key, value, rule in (
        ("bias", "maybe", "true or false"),
        ("width", 2.5, "whole number"),
        ("width", "abc", "whole number"),
    ):
        with pytest.raises(InvalidSpecError) as info:
            get_workload(f"{module}:build", **{key: value})
        assert str(info.value).startswith(f"{key}: must be ") and rule in str(info.value)
        assert "fix the user model" not in str(info.value) and info.value.exit_code == 2


@pytest.mark.parametrize(
    ("name", "options", "fix"),
    [
        ("mlp", {"hidden": "abc"}, "; e.g. -o hidden=512,256,64"),
        ("lstm-lm", {"tied": "maybe"}, "; e.g. -o tied=false"),
    ],
)
def test_a_built_in_options_fix_is_an_option_as_typed(name: str, options: dict, fix: str) -> None:
    """QA 38 M F9: `-o hidden=abc` suggested `e.g. 512,256,64`, a bool `e.g. tied=false`:
    neither is what a user types after the flag."""
    with pytest.raises(InvalidSpecError) as info:
        get_workload(name, **options)
    assert str(info.value).endswith(fix), str(info.value)


def test_a_missing_factory_lists_the_modules_own_functions_first() -> None:
    """QA 41: the eight callables named were the module's classes (capitals sort first), and
    none of its factories; a longer list now ends in '...'."""
    many = Path(__file__).resolve().parents[1] / "profile" / "user_models.py"
    with pytest.raises(InvalidSpecError) as info:
        get_workload(f"{many}:nothing_here")
    assert info.value.fix is not None
    named = info.value.fix.removeprefix("callables there: ").split(", ")
    assert named[:2] == ["big_buffer", "encoder"] and named[-1] == "..."
    assert "ResidualCNN" not in named
