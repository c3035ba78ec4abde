"""The measured-runtimes CSV of `rank --measured` (tpurank.rank.measured): a spreadsheet's save (a
UTF-8 byte-order mark, CRLF line ends) and runtimes in exponent form read as the plain file."""

from __future__ import annotations

from pathlib import Path

import pytest

from tpurank.core.errors import DataError
from tpurank.rank.measured import read_measured

BOM = b"\xef\xbb\xbf"
PLAIN = {
    "one graph": "config,runtime_ns\n0,1500000\n7,2250000.5\n3,980000\n",
    "graph column": "graph,config,runtime_ns\nk0,0,1500000\nk1,0,2250000.5\nk1,4,980000\n",
}
# the same runtimes as a spreadsheet may write them
EXPONENT = {
    "one graph": "config,runtime_ns\n0,1.5e6\n7,2.2500005E6\n3,9.8e+05\n",
    "graph column": "graph,config,runtime_ns\nk0,0,1.5e6\nk1,0,2.2500005E6\nk1,4,9.8e+05\n",
}


def _spreadsheet(text: str) -> bytes:
    return BOM + text.replace("\n", "\r\n").encode()


def _read(tmp_path: Path, name: str, data: bytes) -> tuple:
    f = tmp_path / name
    f.write_bytes(data)
    m = read_measured(f)
    return m.graph, m.config, m.runtime


@pytest.mark.parametrize("case", sorted(PLAIN))
def test_a_spreadsheet_save_reads_as_the_plain_file(tmp_path: Path, case: str) -> None:
    plain = _read(tmp_path, "plain.csv", PLAIN[case].encode())
    assert plain[2] == (1500000.0, 2250000.5, 980000.0)
    assert _read(tmp_path, "saved.csv", _spreadsheet(PLAIN[case])) == plain
    assert _read(tmp_path, "exponent.csv", _spreadsheet(EXPONENT[case])) == plain


def test_a_byte_order_mark_is_no_part_of_the_header_but_a_wrong_header_still_is_one_line(
    tmp_path: Path,
) -> None:
    f = tmp_path / "m.csv"
    f.write_bytes(_spreadsheet("config,runtime\n0,1.5e6\n"))
    with pytest.raises(DataError, match=r"header 'config,runtime', expected config,runtime_ns or "):
        read_measured(f)
