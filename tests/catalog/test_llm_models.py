"""Published LLM shapes: every derived parameter count within 1% of the published one."""

from __future__ import annotations

import pytest

from gpucast.catalog import llm_model, load_llm_models
from gpucast.catalog.llm import parse_llm_models
from gpucast.domain.errors import DataFormatError, UnknownModelError
from gpucast.domain.llm import TransformerSpec

NAMES = (
    "llama-2-7b",
    "llama-2-13b",
    "llama-2-70b",
    "llama-3-8b",
    "llama-3-70b",
    "gpt-3-175b",
    "mixtral-8x7b",
    "mistral-7b",
    "qwen2-7b",
    "qwen2-72b",
    "gpt-j-6b",
)


def test_every_requested_model_is_there_with_source_and_date() -> None:
    models = {m.name: m for m in load_llm_models()}
    assert set(NAMES) <= set(models)
    for m in models.values():
        assert m.source_url.startswith("https://")
        assert m.as_of is not None and m.as_of.isoformat() in {"2026-12-02", "2026-12-06"}
        assert m.published_params is not None


@pytest.mark.parametrize("model", load_llm_models(), ids=lambda m: m.name)
def test_derived_parameter_count_matches_the_published_one(model: TransformerSpec) -> None:
    assert model.published_params is not None
    assert model.total_params == pytest.approx(model.published_params, rel=0.01)
    if model.published_active_params is not None:
        assert model.active_params == pytest.approx(model.published_active_params, rel=0.01)


@pytest.mark.parametrize(
    ("name", "total", "active"),
    [
        ("llama-2-7b", 6.74e9, 6.74e9),
        ("llama-2-70b", 68.98e9, 68.98e9),
        ("llama-3-8b", 8.03e9, 8.03e9),
        ("llama-3-70b", 70.55e9, 70.55e9),
        ("gpt-3-175b", 175e9, 175e9),
        ("mixtral-8x7b", 46.7e9, 12.9e9),
    ],
)
def test_headline_counts(name: str, total: float, active: float) -> None:
    m = llm_model(name)
    assert m.total_params == pytest.approx(total, rel=0.01)
    assert m.active_params == pytest.approx(active, rel=0.01)


def test_exact_count_of_llama_2_7b() -> None:
    # embedding + 32 x (4 h^2 attention + 3 h f SwiGLU + 2 h RMSNorm) + h + untied LM head
    m = llm_model("llama-2-7b")
    h, f, v = 4096, 11008, 32000
    assert m.total_params == v * h + 32 * (4 * h * h + 3 * h * f + 2 * h) + h + v * h
    assert m.total_params == 6_738_415_616


def test_gqa_and_tied_embeddings_enter_the_count() -> None:
    l70 = llm_model("llama-2-70b")
    assert l70.kv_dim == 8 * 128 and l70.attention_matmul_params == 2 * 8192**2 + 2 * 8192 * 1024
    gpt3 = llm_model("gpt-3-175b")
    assert gpt3.lm_head_params == 0  # tied
    assert gpt3.matmul_params_per_token > gpt3.layers * 12 * gpt3.hidden**2  # + the LM head


def test_lookup_is_case_and_dash_insensitive() -> None:
    assert llm_model("Llama 2 70B").name == "llama-2-70b"
    assert llm_model("MIXTRAL_8X7B").name == "mixtral-8x7b"


def test_unknown_model_lists_close_matches() -> None:
    with pytest.raises(UnknownModelError) as info:
        llm_model("llama-2-65b")
    assert "llama-2-7b" in str(info.value) or "llama-2-70b" in str(info.value)
    assert info.value.exit_code == 2


def _csv(**overrides: str) -> str:
    from gpucast.catalog.llm import LLM_COLUMNS

    row = {
        "name": "tiny",
        "kind": "decoder",
        "layers": "2",
        "hidden": "64",
        "heads": "4",
        "kv_heads": "2",
        "head_dim": "16",
        "ffn_hidden": "128",
        "vocab": "100",
        "max_context": "256",
        "activation": "silu",
        "gated_mlp": "true",
        "n_experts": "1",
        "experts_per_token": "1",
        "tied_embeddings": "false",
        "norm": "rmsnorm",
        "position": "rope",
        "attention_bias": "none",
        "mlp_bias": "false",
        "lm_head_bias": "false",
        "parallel_block": "false",
        "published_params": "",
        "published_active_params": "",
        "source_url": "https://example.org",
        "as_of": "2026-12-02",
    }
    row.update(overrides)
    return ",".join(LLM_COLUMNS) + "\n" + ",".join(row[c] for c in LLM_COLUMNS) + "\n"


def test_parse_small_file() -> None:
    (spec,) = parse_llm_models(_csv(), "x.csv")
    h, f, v, kv = 64, 128, 100, 32
    assert spec.total_params == v * h + 2 * (2 * h * h + 2 * h * kv + 3 * h * f + 2 * h) + h + v * h


@pytest.mark.parametrize(
    ("column", "value", "text"),
    [
        ("gated_mlp", "maybe", "not a boolean"),
        ("norm", "batchnorm", "must be one of"),
        ("kv_heads", "3", "must divide the 4 attention heads"),
        ("layers", "0", "must be a whole number >= 1"),
        ("as_of", "yesterday", "not a date"),
    ],
)
def test_bad_cells_name_line_and_column(column: str, value: str, text: str) -> None:
    with pytest.raises(DataFormatError) as info:
        parse_llm_models(_csv(**{column: value}), "x.csv")
    assert text in str(info.value)
    assert "x.csv, line 2" in str(info.value)


def test_the_optional_pre_training_length_column() -> None:
    """A file without `pretrain_seq_len` (a user's, written before it) still reads: the
    training default is the context; given, it must lie within the context."""
    (plain,) = parse_llm_models(_csv(), "x.csv")
    assert plain.pretrain_seq_len is None and plain.training_seq_len == 256
    text = _csv().splitlines()
    with_column = f"{text[0]},pretrain_seq_len\n{text[1]},128\n"
    (spec,) = parse_llm_models(with_column, "x.csv")
    assert spec.pretrain_seq_len == 128 and spec.training_seq_len == 128
    with pytest.raises(DataFormatError, match=r"x\.csv, line 2.*pretrain_seq_len: must be an "
                       r"integer from 1 to max_context \(256\)"):  # fmt: skip
        parse_llm_models(f"{text[0]},pretrain_seq_len\n{text[1]},512\n", "x.csv")
