"""tpurank.features.io: a feature table reads back as pandas reads it, in one copy of its columns."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from tpurank.core.paths import Paths
from tpurank.features import io


def test_read_table_gives_the_frame_pandas_reads(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    df = pd.DataFrame(
        {
            "graph": [f"tile:xla:g{i % 7}" for i in range(300)],
            "row": np.arange(300, dtype=np.int32),
            "runtime": rng.random(300),
            "f0": rng.random(300).astype(np.float32),
            "f1": rng.random(300).astype(np.float32),
        }
    )
    paths = Paths(data=tmp_path / "data", out=tmp_path / "out")
    path = io.table_path(paths, "tile:xla", "train")
    path.parent.mkdir(parents=True)
    df.to_parquet(path, index=False)
    got = io.read_table(paths, "tile:xla", "train")
    pd.testing.assert_frame_equal(got, pd.read_parquet(path), check_exact=True)
    pd.testing.assert_frame_equal(io.read_table(paths, "tile:xla", "train", columns=["f1"]), df[["f1"]])
