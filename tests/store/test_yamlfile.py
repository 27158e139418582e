"""The one YAML reader: what ``yaml.safe_load`` builds, but a key given twice is an error."""

from __future__ import annotations

import pytest
import yaml

from gpucast.domain.errors import DataFormatError
from gpucast.store.yamlfile import compose_yaml, load_yaml


@pytest.mark.parametrize(
    "text",
    [
        "",
        "gpu: H100\ngpus_per_node: 8\n",
        "a: {x: 1, y: [1, 2]}\nb: [{x: 1}, {x: 2}]\n",
        "1: int\n'1': str\n",  # an int key and a str key are two keys, as in safe_load
        "base: &b {x: 1, y: 2}\nc:\n  <<: *b\n  x: 5\n",  # a merge may be overridden
        "c: &c {z: 1}\nb: &b\n  <<: *c\n  z: 2\nd:\n  <<: *b\n  z: 3\n",  # nested merges too
        "- a\n- a\n",  # a list may repeat values
    ],
)
def test_what_safe_load_builds(text: str) -> None:
    assert load_yaml(text, "f.yaml") == yaml.safe_load(text)


@pytest.mark.parametrize(
    ("text", "key", "where"),
    [
        ("gpu: H100\ngpus_per_node: 8\nnodes: 1\ngpu: A100\n", "'gpu'", "(lines 1 and 4)"),
        ("a:\n  x: 1\n  y: 2\n  x: 3\n", "'x'", "(lines 2 and 4)"),
        ("- {x: 1}\n- x: 1\n  x: 2\n", "'x'", "(lines 2 and 3)"),
        ("8: a\n0x8: b\n", "8", "(lines 1 and 2)"),  # the same int, spelled two ways
        ("{a: 1, a: 2}\n", "'a'", "on line 1"),
        ("base: &b {x: 1}\nc:\n  <<: *b\n  y: 1\n  y: 2\n", "'y'", "(lines 4 and 5)"),
    ],
)
def test_a_key_given_twice_is_one_line_naming_key_and_lines(
    text: str, key: str, where: str
) -> None:
    for read in (load_yaml, compose_yaml):
        with pytest.raises(DataFormatError) as caught:
            read(text, "dup.yaml")
        message = str(caught.value)
        assert message.startswith("dup.yaml, line ")
        assert f"key {key} is given twice {where}; YAML would silently keep the last" in message
        assert caught.value.fix == f"keep one {key} line and delete the other"
        assert "\n" not in message
        assert caught.value.exit_code == 2


def test_syntax_errors_name_the_line() -> None:
    with pytest.raises(DataFormatError, match=r"^f\.yaml, line 2: not valid YAML \(expected"):
        load_yaml("a: [1\n", "f.yaml")
    with pytest.raises(DataFormatError, match=r"not valid YAML \(found unhashable key\)"):
        load_yaml("? [1]\n: a\n", "f.yaml")


def test_compose_gives_the_node_tree() -> None:
    node = compose_yaml("a: 1\nb: [2]\n", "f.yaml")
    assert isinstance(node, yaml.MappingNode)
    assert [(k.value, k.start_mark.line) for k, _ in node.value] == [("a", 0), ("b", 1)]
    assert compose_yaml("", "f.yaml") is None
