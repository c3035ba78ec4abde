"""Synthetic vs real statistics, side by side (`tpurank compare-synth --real SAMPLE_ROOT`).

Both trees are read the same way (`tpurank.data.npz.load_graph`, configs as int8) and summarised per
file; the table shows medians and ranges so a sample of a handful of real files and a synthetic
tree of hundreds can be read side by side. Runtime statistics use train/valid files only (test
files have no runtimes).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from tpurank.core.paths import NPZ_SUBDIR
from tpurank.core.progress import tqdm
from tpurank.data.dataset import discover, require_npz_root
from tpurank.data.npz import load_graph
from tpurank.synth.hlo import OP
from tpurank.synth.realism import layout_runtime_stats, pb_tile_stats, realism_table, tile_runtime_stats
from tpurank.synth.stage import generate

VALUES = range(-1, 6)
TILE_PB = Path("pb") / "op_tuning_data.pb"  # the real sample's measured tile kernels


def file_stats(path: Path, collection: str, split: str) -> dict:
    """Per-file statistics (layout configs are loaded as int8 to bound memory)."""
    g = load_graph(path, config_dtype=np.int8)
    rec: dict = {"collection": collection, "split": split, "nodes": g.num_nodes, "configs": g.num_configs}
    rec["edges_per_node"] = len(g.edge_index) / max(1, g.num_nodes)
    has_rt = not g.is_test and g.num_configs > 1
    if g.kind == "tile":
        rt = g.config_runtime / g.config_runtime_normalizers
        rec["spread"] = float(rt.max() / rt.min()) if has_rt else np.nan
        if has_rt:
            rec["runtime"] = tile_runtime_stats(g.config_feat, g.config_runtime, g.config_runtime_normalizers)
        return rec
    ops = g.node_opcode[g.node_config_ids]
    rec["configurable"] = len(g.node_config_ids)
    for name in ("convolution", "dot", "reshape"):
        rec[f"op_{name}"] = int((ops == OP[name]).sum())
    feat = g.node_config_feat
    counts = np.bincount(feat.reshape(-1).astype(np.int64) + 1, minlength=7)
    for v in VALUES:
        rec[f"value_{v}"] = int(counts[v + 1])
    tensors = feat.reshape(g.num_configs, -1, 3, 6)
    rec["tensor_default"] = float((tensors == -1).all(axis=3).mean()) if feat.size else np.nan
    rows = np.ascontiguousarray(feat.reshape(g.num_configs, -1))
    _, inverse = np.unique(
        rows.view(np.dtype((np.void, max(1, rows.shape[1]) * rows.itemsize))), return_inverse=True
    )
    inverse = inverse.reshape(-1)
    unique = int(inverse.max()) + 1 if g.num_configs else 0
    rec["dup_share"] = 1.0 - unique / max(1, g.num_configs)
    rec["npz_bytes_per_value"] = path.stat().st_size / max(1, feat.size)  # compressibility, as shipped
    if feat.size:  # tensors tied to one decision: distinct column sequences / tensor columns
        codes = ((tensors.astype(np.int64) + 1) * 7 ** np.arange(6)).sum(axis=3).reshape(g.num_configs, -1)
        rec["distinct_columns"] = len(np.unique(codes.T, axis=0)) / codes.shape[1]
    rt = g.config_runtime.astype(np.float64)
    rec["spread"] = float(rt.max() / rt.min()) if has_rt else np.nan
    if has_rt:
        ids = g.node_config_ids
        rec["runtime"] = layout_runtime_stats(feat, rt, g.node_feat[ids], g.node_opcode[ids], inverse)
    return rec


def tree_stats(root: Path, progress: bool = True) -> list[dict]:
    npz = require_npz_root(root / NPZ_SUBDIR)
    files = discover(npz)
    return [
        file_stats(f.path, f.collection, f.split)
        for f in tqdm(files, desc=f"stats {root.name}", disable=not progress)
    ]


def runtime_records(recs: list[dict], pb: Path | None = None) -> list[dict]:
    """Per-file runtime statistics (`realism`) of a tree, plus the kernels of a tile protobuf
    (the real sample's `pb/op_tuning_data.pb`: 15 measured kernels) where given and present."""
    out = [
        {"collection": r["collection"], "split": r["split"], **r["runtime"]} for r in recs if "runtime" in r
    ]
    if pb is not None and pb.is_file():
        out += pb_tile_stats(pb)
    return out


def _med(values: list[float], fmt: str = "{:.0f}") -> str:
    v = np.array([x for x in values if x == x], dtype=np.float64)
    if not len(v):
        return "-"
    if len(v) == 1:
        return fmt.format(v[0])
    return f"{fmt.format(np.median(v))} ({fmt.format(v.min())}-{fmt.format(v.max())})"


def _share(recs: list[dict], keys: list[str]) -> str:
    tot = np.array([sum(r.get(k, 0) for r in recs) for k in keys], dtype=np.float64)
    if tot.sum() == 0:
        return "-"
    return " / ".join(f"{x:.2f}" for x in tot / tot.sum())


def summary_rows(recs: list[dict]) -> list[tuple[str, str]]:
    """(statistic, value) rows of one tree."""
    tile = [r for r in recs if r["collection"] == "tile:xla"]
    lay = [r for r in recs if r["collection"] != "tile:xla"]
    fam = {f: [r for r in lay if f":{f}:" in r["collection"]] for f in ("xla", "nlp")}
    srch = {
        s: [r for r in lay if r["collection"].endswith(s) and r["split"] != "test"]
        for s in ("default", "random")
    }
    vkeys = [f"value_{v}" for v in VALUES]
    okeys = ["op_convolution", "op_dot", "op_reshape"]
    rows = [
        (
            "tile files (train/valid/test)",
            "/".join(str(sum(r["split"] == s for r in tile)) for s in ("train", "valid", "test")),
        ),
        ("tile nodes", _med([r["nodes"] for r in tile])),
        ("tile configs", _med([r["configs"] for r in tile])),
        ("tile runtime max/min (train/valid)", _med([r["spread"] for r in tile], "{:.2f}")),
        (
            "layout files (train/valid/test)",
            "/".join(str(sum(r["split"] == s for r in lay)) for s in ("train", "valid", "test")),
        ),
        ("layout nodes, xla", _med([r["nodes"] for r in fam["xla"]])),
        ("layout nodes, nlp", _med([r["nodes"] for r in fam["nlp"]])),
        ("edges per node", _med([r["edges_per_node"] for r in lay], "{:.2f}")),
        ("configurable nodes", _med([r["configurable"] for r in lay])),
        ("configurable conv / dot / reshape, xla", _share(fam["xla"], okeys)),
        ("configurable conv / dot / reshape, nlp", _share(fam["nlp"], okeys)),
        ("configs per layout file", _med([r["configs"] for r in lay])),
        ("config values -1/0/1/2/3/4/5", _share(lay, vkeys)),
        ("tensors left at default (all -1)", _med([r["tensor_default"] for r in lay], "{:.2f}")),
        ("runtime max/min, default", _med([r["spread"] for r in srch["default"]], "{:.3f}")),
        ("runtime max/min, random", _med([r["spread"] for r in srch["random"]], "{:.3f}")),
        ("duplicate config share, default", _med([r["dup_share"] for r in srch["default"]], "{:.2f}")),
        ("duplicate config share, random", _med([r["dup_share"] for r in srch["random"]], "{:.2f}")),
        ("npz bytes per config value", _med([r["npz_bytes_per_value"] for r in lay], "{:.3f}")),
        (
            "distinct tensor columns / tensor columns",
            _med([r.get("distinct_columns", np.nan) for r in lay], "{:.2f}"),
        ),
    ]
    return rows


def compare(sample_root: Path, synth_root: Path | None, scale: str = "tiny", seed: int = 0) -> str:
    """Markdown tables of synthetic vs real statistics (medians, with ranges in brackets): the
    files' structure, then their runtimes and rankings with a distance per statistic
    (`realism.realism_table`) and a summary line.

    Args:
        sample_root: the real sample (holds npz_all/npz).
        synth_root: a synthetic tree; None (or an empty folder) generates `scale` into a temp folder.
        scale, seed: what to generate when no synthetic tree is given.
    """
    real_recs = tree_stats(sample_root)
    real_rt = runtime_records(real_recs, sample_root / TILE_PB)
    if synth_root is not None and (synth_root / NPZ_SUBDIR).is_dir():
        synth_recs = tree_stats(synth_root)
        label = str(synth_root)
    else:
        with tempfile.TemporaryDirectory(prefix="tpurank-synth-") as tmp:
            generate(Path(tmp), scale, seed, progress=True)
            synth_recs = tree_stats(Path(tmp))
        label = f"{scale} seed {seed}"
    synth, real = summary_rows(synth_recs), summary_rows(real_recs)
    lines = [f"| statistic | synthetic ({label}) | real ({sample_root.name}) |", "|---|---|---|"]
    lines += [f"| {name} | {s} | {r} |" for (name, s), (_, r) in zip(synth, real, strict=True)]
    lines += ["", realism_table(runtime_records(synth_recs), real_rt)]
    return "\n".join(lines)
