"""Streamed npz writing in the dataset's exact format, for files too big to hold in memory.

`np.savez_compressed` needs every array in memory; a full-scale layout file's node_config_feat can
be 20 GB as float32. Here each zip member is written as it is produced: the `.npy` header first
(via `np.lib.format`), then row blocks, DEFLATE-compressed, with ZIP64 forced exactly as numpy does.
Members may be arrays, iterators of row blocks, or callables evaluated when their turn comes (so
config_runtime, known only after node_config_feat was streamed, can follow it as in the real files).
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from tpurank.core.atomic import atomic_path
from tpurank.core.errors import DataError

Source = np.ndarray | Iterable[np.ndarray] | Callable[[], np.ndarray]
COMPRESS_LEVEL = 1  # DEFLATE level for streamed members: same format, several times faster than 6


def _header(shape: tuple[int, ...], dtype: np.dtype) -> dict:
    return {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": tuple(shape)}


def write_npz_streaming(
    path: str | Path,
    members: list[tuple[str, tuple[int, ...], np.dtype, Source]],
    compresslevel: int = COMPRESS_LEVEL,
) -> None:
    """Write an npz member by member, atomically, holding at most one row block at a time.

    Args:
        path: the target .npz.
        members: (key, shape, dtype, source) in file order; an iterator source must yield
            C-ordered row blocks whose rows add up to shape[0].
        compresslevel: zlib level (the format is the same at any level).

    Raises:
        DataError: when a source yields the wrong number of rows or items.
    """
    path = Path(path)
    with (
        atomic_path(path, suffix=".npz") as tmp,
        zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, allowZip64=True, compresslevel=compresslevel) as zf,
    ):
        for key, shape, dtype, source in members:
            dtype = np.dtype(dtype)
            if callable(source):
                source = source()
            blocks = [source] if isinstance(source, np.ndarray) else source
            with zf.open(f"{key}.npy", "w", force_zip64=True) as fh:
                np.lib.format.write_array_header_1_0(fh, _header(shape, dtype))
                row_items = int(np.prod(shape[1:], dtype=np.int64)) if len(shape) > 1 else 1
                rows = 0
                for block in blocks:
                    block = np.ascontiguousarray(block, dtype=dtype)
                    if block.size % max(1, row_items):
                        raise DataError(path, f"{key}: block of {block.size} items is not whole rows")
                    rows += block.size // max(1, row_items) if len(shape) > 0 else 1
                    fh.write(block.tobytes())
                want = shape[0] if len(shape) > 0 else 1
                if rows != want:
                    raise DataError(path, f"{key}: wrote {rows} rows, expected {want}")
