"""``help(Request)`` lists each field's help, the text ``--help`` shows, from one ``option()``
(session 39: a request class's help showed only its signature; the pattern, on one verb)."""

from __future__ import annotations

import pydoc

from gpucast.app.predict import PredictTrainRequest
from gpucast.domain.options import fields_of


def test_help_on_the_request_lists_every_field_with_its_flag_default_and_help() -> None:
    text = pydoc.render_doc(PredictTrainRequest, renderer=pydoc.plaintext)
    for f in fields_of(PredictTrainRequest):
        default = "required" if f.required else f"default {f.default!r}"
        assert f"{f.name} (--{f.flag}; {default}):" in text, f.name
        assert f.info.help in text, f.name
    assert text.index("A workload, batch and GPU") < text.index("batch_size (--batch-size")


def test_the_cli_flags_help_is_the_same_text() -> None:
    from gpucast.cli._command import request_parameters

    helps = {p.name: p.default.help for p in request_parameters(PredictTrainRequest)}
    doc = PredictTrainRequest.__doc__ or ""
    for f in fields_of(PredictTrainRequest):
        assert f.info.help in doc
        assert helps[f.name].replace("\\[", "[").startswith(f.info.help), f.name


def test_a_field_with_a_default_factory_shows_its_value() -> None:
    from dataclasses import dataclass, field

    from gpucast.domain.options import documented, option

    @documented
    @dataclass(frozen=True, kw_only=True)
    class Request:
        """A request."""

        gpus: tuple[str, ...] = field(
            default_factory=lambda: ("T4",), metadata=option(help="the GPUs").metadata
        )

    assert "gpus (--gpus; default ('T4',)):" in (Request.__doc__ or "")


def test_every_request_class_with_options_documents_them() -> None:
    """Every request dataclass whose fields are options (the verbs' requests) lists them in
    ``help()`` (session 39 put the pattern on PredictTrainRequest only, then on every one)."""
    import dataclasses
    import importlib
    import pkgutil

    import gpucast.app
    import gpucast.domain
    from gpucast.domain.options import META_KEY

    seen = 0
    for package in (gpucast.app, gpucast.domain):
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            for name, value in vars(module).items():
                if not (name.endswith("Request") and dataclasses.is_dataclass(value)):
                    continue
                if value.__module__ != module.__name__:
                    continue  # a re-export: checked where it is defined
                fields = dataclasses.fields(value)
                if not any(META_KEY in f.metadata for f in fields):
                    continue
                seen += 1
                assert "Fields (each keyword" in (value.__doc__ or ""), value.__qualname__
    assert seen >= 40
