"""Edge lists: skipped self-loops and out-of-range ids are counted; malformed lines fail."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.inputs.graph import _parse_fast, _parse_lines, read_edge_list


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "edges.txt"
    path.write_text(text)
    return path


def test_counts_what_it_skips(tmp_path: Path) -> None:
    path = _write(tmp_path, "# a graph\n0 1\n1,2\n2 2\n3 9\n\n4\t0  # tab\n")
    edges = read_edge_list(path, nodes=5)
    assert edges.src.tolist() == [0, 1, 4] and edges.dst.tolist() == [1, 2, 0]
    assert (edges.self_loops_skipped, edges.out_of_range_skipped) == (1, 1)
    # QA 37: "1 edges with node ids >= 5 skipped"
    assert edges.notes() == ["1 self-loop skipped", "1 edge with node ids >= 5 skipped"]
    kept = read_edge_list(path, allow_self_loops=True)
    assert kept.nodes == 10 and len(kept.src) == 5 and kept.self_loops_skipped == 0


def test_bad_files(tmp_path: Path) -> None:
    with pytest.raises(DataFormatError, match="line 2"):
        read_edge_list(_write(tmp_path, "0 1\n0 -1\n"))
    with pytest.raises(DataFormatError, match="no edges"):
        read_edge_list(_write(tmp_path, "# nothing\n\n"))
    with pytest.raises(InvalidSpecError, match="no edge is left"):
        read_edge_list(_write(tmp_path, "3 3\n7 8\n"), nodes=5)
    with pytest.raises(InvalidSpecError, match="edge-list: file not found"):
        read_edge_list(tmp_path / "missing.txt")


@pytest.mark.parametrize(
    ("text", "line"),
    [("0 1\n1 2\n3\n", 3), ("0 1\n+5 2\n", 2), ("0 1\n\n1.5 2\n", 3), ("0 1\n1 2x\n", 2),
     ("# c - d\n0 1\n-0 1\n", 3), ("0 1\n" * 5 + "a b\n", 6)],
)  # fmt: skip
def test_a_bad_line_is_named_whichever_parser_meets_it(
    tmp_path: Path, text: str, line: int
) -> None:
    with pytest.raises(DataFormatError, match=f"line {line}: expected two node ids >= 0"):
        read_edge_list(_write(tmp_path, text))


def test_the_c_parser_reads_what_the_line_parser_reads() -> None:
    """Comments, commas, tabs, blank lines, extra columns and CRLF: the same pairs."""
    rng = np.random.default_rng(1)
    pairs = rng.integers(0, 1000, (500, 2))
    seps = [" ", ",", "\t", "  ", ", "]
    lines = [
        f"{a}{seps[i % 5]}{b}" + (" 0.5" if i % 7 == 0 else "") + (" # w" if i % 11 == 0 else "")
        for i, (a, b) in enumerate(pairs)
    ]
    text = "# header\r\n" + "\r\n\n".join(lines) + "\n"
    fast = _parse_fast(text)
    assert fast is not None and fast.tolist() == pairs.tolist()
    assert _parse_lines(text, "edges.txt").tolist() == pairs.tolist()
    assert _parse_fast("0 1\n0 -1\n") is None and _parse_fast("# none\n") is None


def test_a_stray_id_that_inflates_the_graph_is_a_warning(tmp_path: Path) -> None:
    body = "".join(f"{i} {(i * 7 + 1) % 1000}\n" for i in range(1000))
    stray = read_edge_list(_write(tmp_path, body + "3 200000\n"))
    assert stray.nodes == 200_001 and stray.distinct_ids == 1001
    assert stray.warnings() == [
        "200,001 nodes inferred from the largest id (200,000), but only 1,001 distinct ids "
        "appear: a stray id? give --nodes N (edges with ids >= N are skipped and counted)"
    ]
    assert read_edge_list(_write(tmp_path, body)).warnings() == []  # ids 0..999, all seen
    given = read_edge_list(_write(tmp_path, body + "3 200000\n"), nodes=300_000)
    assert given.warnings() == [] and given.distinct_ids is None  # --nodes: the user's count


def test_an_id_too_large_for_degree_arrays_is_one_error(tmp_path: Path) -> None:
    """A typo'd id (12 digits) once sized a 745 GiB bincount (a MemoryError traceback), and
    one beyond int64 overflowed numpy: both are one error, before anything is allocated."""
    with pytest.raises(
        InvalidSpecError, match=r"edge-list: spans 100,000,000,000 node ids.*--nodes N"
    ):
        read_edge_list(_write(tmp_path, "0 1\n1 2\n99999999999 0\n"))
    with pytest.raises(InvalidSpecError, match=r"nodes: spans 100,000,000,000 node ids"):
        read_edge_list(_write(tmp_path, "0 1\n1 2\n"), nodes=10**11)
    with pytest.raises(DataFormatError, match="line 3: node id 99999999999999999999999 is not"):
        read_edge_list(_write(tmp_path, "0 1\n1 2\n99999999999999999999999 0\n"))
    kept = read_edge_list(_write(tmp_path, "0 1\n1 2\n99999999999 0\n"), nodes=3)
    assert kept.nodes == 3 and kept.out_of_range_skipped == 1  # --nodes skips the stray id


def test_weights_are_a_note_and_percent_comments_are_skipped(tmp_path: Path) -> None:
    """QA 37 G #13: a third (weight) column was silently ignored; ``%`` comments (KONECT,
    Matrix Market) were refused while ``#`` ones were read."""
    weighted = _write(tmp_path, "% weighted\n0 1 0.5\n1 2 2.0\n")
    edges = read_edge_list(weighted)
    assert edges.src.tolist() == [0, 1] and edges.dst.tolist() == [1, 2]
    assert edges.notes() == [
        f"{weighted}: columns after the two node ids (edge weights?) are ignored: the cost "
        "counts edges, not their weights"
    ]
    plain = read_edge_list(_write(tmp_path, "# two ids # 3 4\n0 1  % 7\n1,2,\n"))
    assert plain.notes() == [] and plain.src.tolist() == [0, 1]
    deep = read_edge_list(_write(tmp_path, "0 1\r\n" * 50 + "1\t2\t1.5\r\n"))
    assert deep.extra_columns_in is not None and len(deep.src) == 51  # one line of 51
    # a bad line is still named by the line parser, with % comments stripped there too
    with pytest.raises(DataFormatError, match="line 3: expected two node ids"):
        read_edge_list(_write(tmp_path, "% c\n0 1 % x\n1 x\n"))


def test_a_matrix_market_size_line_is_not_an_edge(tmp_path: Path) -> None:
    text = "%%MatrixMarket matrix coordinate pattern general\n% c\n3 3 2\n1 2\n2 3\n"
    edges = read_edge_list(_write(tmp_path, text))
    assert edges.src.tolist() == [1, 2] and edges.dst.tolist() == [2, 3]
    assert edges.self_loops_skipped == 0 and edges.notes() == []


def test_repeated_edges_are_kept_and_counted(tmp_path: Path) -> None:
    """QA 39: ``0 1`` three times read as 2 nodes and 3 edges with nothing said, where
    ``--nodes 2 --edges 3`` is refused (at most 2 directed edges without repeats)."""
    edges = read_edge_list(_write(tmp_path, "0 1\n0 1\n1 0\n0 1\n2 2\n"))
    assert len(edges.src) == 4 and edges.repeated == 2  # 1 -> 0 is another edge
    assert edges.notes()[:1] == ["1 self-loop skipped"]
    assert edges.notes()[1].startswith("2 edges repeating an earlier one kept (a multigraph")
    assert read_edge_list(_write(tmp_path, "0 1\n1 0\n")).notes() == []
