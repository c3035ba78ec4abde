"""The synthetic generator: real format, determinism, submission order, and a cost model that behaves."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import kendalltau

from tpurank.cli import main
from tpurank.core.collections import COLLECTIONS
from tpurank.core.paths import NPZ_SUBDIR
from tpurank.data.dataset import discover
from tpurank.data.npz import LAYOUT_KEYS, load_graph, validate_file
from tpurank.synth import generate, write_big_layout_graph
from tpurank.synth import layout_file as gen_mod
from tpurank.synth.cost_model import LayoutCostModel, measure, pad_table
from tpurank.synth.graph_families import layout_graph
from tpurank.synth.hlo import CONFIGURABLE_OPS, OP
from tpurank.synth.hlo_builder import Builder
from tpurank.synth.layout_configs import LayoutSpace, layout_candidates, spell_out
from tpurank.synth.stage import GENERATOR_VERSION

SPLIT_COUNTS = {"tile:xla": (12, 4, 4), "layout": (4, 2, 2)}


def _graphs(root: Path, collection: str, splits=("train", "valid")):
    return [(gf, load_graph(gf.path)) for gf in discover(root / NPZ_SUBDIR, [collection], splits)]


def test_tiny_tree_passes_check_and_has_every_collection(tiny_root: Path, capsys) -> None:
    assert main(["check", str(tiny_root)]) == 0
    files = discover(tiny_root / NPZ_SUBDIR)
    for c in COLLECTIONS:
        want = SPLIT_COUNTS["tile:xla" if c == "tile:xla" else "layout"]
        got = tuple(
            sum(1 for f in files if f.collection == c and f.split == s) for s in ("train", "valid", "test")
        )
        assert got == want, c
    for f in files:
        validate_file(f.path)  # raises on any format problem


def test_layout_files_match_tiny_spec(tiny_root: Path) -> None:
    for c in COLLECTIONS[1:]:
        for gf, g in _graphs(tiny_root, c, ("train", "valid", "test")):
            assert 60 <= g.num_nodes <= 420, (gf.stem, g.num_nodes)
            assert 5 <= len(g.node_config_ids) <= 30, (gf.stem, len(g.node_config_ids))
            assert 30 <= g.num_configs <= 150
            assert set(np.unique(g.node_opcode[g.node_config_ids])) <= set(CONFIGURABLE_OPS)
            assert (g.edge_index[:, 0] > g.edge_index[:, 1]).all()  # users after operands
            assert g.node_config_feat.min() >= -1 and g.node_config_feat.max() <= 5
            assert g.is_test == (gf.split == "test")
            # node_feat agrees with the graph: dims product column equals the product of dims
            dims = g.node_feat[:, 21:27]
            prod = np.prod(np.where(dims > 0, dims, 1), axis=1)
            has_dims = (dims > 0).any(axis=1)
            np.testing.assert_allclose(g.node_feat[has_dims, 28], prod[has_dims], rtol=1e-6)
            assert (g.node_opcode == OP["parameter"]).any()


def test_tile_files_normalizers_and_test_runtimes(tiny_root: Path) -> None:
    for gf, g in _graphs(tiny_root, "tile:xla", ("train", "valid", "test")):
        if gf.split == "test":
            assert not g.config_runtime.any() and (g.config_runtime_normalizers == 1).all()
        else:
            assert (g.config_runtime > 0).all()
            assert (g.config_runtime_normalizers == g.config_runtime[0]).all()  # row 0 = default tile
            tiles = g.config_feat[:, 8:14]
            np.testing.assert_allclose(g.config_feat[:, 14], tiles.sum(axis=1))


def test_deterministic_for_a_seed(tmp_path: Path) -> None:
    some = ["tile:xla", "layout:nlp:default"]
    generate(tmp_path / "a", "tiny", seed=3, collections=some, splits=["valid", "test"])
    generate(tmp_path / "b", "tiny", seed=3, collections=some, splits=["valid", "test"])
    generate(tmp_path / "c", "tiny", seed=4, collections=some, splits=["valid", "test"])
    files_a = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*.npz"))
    files_b = sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*.npz"))
    assert files_a == files_b and len(files_a) == 4 + 4 + 2 + 2
    for rel in files_a:
        ga, gb = np.load(tmp_path / "a" / rel), np.load(tmp_path / "b" / rel)
        for k in ga.files:
            np.testing.assert_array_equal(ga[k], gb[k])
    assert (tmp_path / "a/sample_submission.csv").read_text() == (
        tmp_path / "b/sample_submission.csv"
    ).read_text()
    assert (tmp_path / "a/sample_submission.csv").read_text() != (
        tmp_path / "c/sample_submission.csv"
    ).read_text()


# the arrays of the tiny tree (seed 0) under generator version 3: a faster generator writes the same
# data for a seed, or bumps GENERATOR_VERSION (synth/stage.py) and this fingerprint with it
TINY_FINGERPRINT = {3: "9994134b38deec82db25f40f7f7096664c3aac50669ee8b276d9e8c2bbf59e68"}


def array_fingerprint(root: Path) -> str:
    """sha256 over every npz's arrays (name, dtype, shape, bytes) and the sample submission: the
    data, not the zip's bytes (which follow the zlib build)."""
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.npz")):
        h.update(f.relative_to(root).as_posix().encode())
        with np.load(f) as z:
            for k in sorted(z.files):
                a = z[k]
                h.update(f"{k}{a.dtype}{a.shape}".encode())
                h.update(np.ascontiguousarray(a).tobytes())
    h.update((root / "sample_submission.csv").read_bytes())
    return h.hexdigest()


def test_the_generator_writes_the_same_data_for_a_seed_in_one_or_two_processes(
    tiny_root: Path, tmp_path: Path
) -> None:
    assert array_fingerprint(tiny_root) == TINY_FINGERPRINT[GENERATOR_VERSION]
    generate(tmp_path / "two", "tiny", seed=0, jobs=2)
    assert array_fingerprint(tmp_path / "two") == TINY_FINGERPRINT[GENERATOR_VERSION]


def test_sample_submission_lists_every_test_file_in_real_order(tiny_root: Path) -> None:
    lines = (tiny_root / "sample_submission.csv").read_text().splitlines()
    assert lines[0] == "ID,TopConfigs"
    rows = [line.split(",") for line in lines[1:]]
    ids = [r[0] for r in rows]
    tests = discover(tiny_root / NPZ_SUBDIR, splits=["test"])
    assert sorted(ids) == sorted(f.id for f in tests)
    order = [COLLECTIONS.index(i.rsplit(":", 1)[0]) for i in ids]
    assert order == sorted(order)  # tile, xla:default, xla:random, nlp:default, nlp:random
    for i, top in rows:
        if i.startswith("tile:"):
            assert top == "0;1;2;3;4"
        else:
            configs = load_graph(next(f.path for f in tests if f.id == i)).num_configs
            assert top == ";".join(str(k) for k in range(min(configs, 1000)))
    # layout default and random test sets hold the same graphs (like the real data)
    stems = {c: {f.stem for f in tests if f.collection == c} for c in COLLECTIONS}
    assert stems["layout:xla:default"] == stems["layout:xla:random"]
    for source in ("layout:xla", "layout:nlp"):  # listed in the same order, as in the real sample
        listed = {
            k: [i.rsplit(":", 1)[1] for i in ids if i.startswith(f"{source}:{k}:")]
            for k in ("default", "random")
        }
        assert listed["default"] == listed["random"] and listed["default"]
    assert all(len(s) == 32 for s in stems["layout:nlp:random"])


def _spread(g) -> float:
    return float(g.config_runtime.max() / g.config_runtime.min())


def _median_slowdown(g) -> float:
    return float(np.median(g.config_runtime) / g.config_runtime.min())


def test_default_collections_spread_less_than_random(tiny_root: Path) -> None:
    """A default search keeps most configs within a few percent of its best (real: the median
    config 0.007-0.3% slower), though a few probes may be far slower (real unet3d: 3x)."""
    for family in ("xla", "nlp"):
        d = [_spread(g) for _, g in _graphs(tiny_root, f"layout:{family}:default")]
        r = [_spread(g) for _, g in _graphs(tiny_root, f"layout:{family}:random")]
        middle = [_median_slowdown(g) for _, g in _graphs(tiny_root, f"layout:{family}:default")]
        assert np.median(middle) < 1.05, middle
        assert max(d) < 5.0, d  # probes are recorded only up to PROBE_MAX_SLOWDOWN (4x) the best
        assert np.median(r) > np.median(d) * 1.2, (d, r)


def test_duplicates_exist_and_agree_within_noise(tiny_root: Path) -> None:
    dup_groups = 0
    for c in COLLECTIONS[1:]:
        for _, g in _graphs(tiny_root, c):
            flat = g.node_config_feat.reshape(g.num_configs, -1)
            _, inverse, counts = np.unique(flat, axis=0, return_inverse=True, return_counts=True)
            for u in np.flatnonzero(counts > 1):
                rt = g.config_runtime[inverse.ravel() == u]
                assert rt.max() / rt.min() - 1 < 0.006, rt
                dup_groups += 1
    assert dup_groups >= 10


def _chain_graph() -> tuple:
    """param -> dot (configurable) -> 3 elementwise ops -> dot (configurable)."""
    b = Builder(np.random.default_rng(0), etype="f32")
    x = b.param((512, 384))
    y = b.dot(x, 384)
    y = b.chain(y, 3)
    z = b.dot(y, 256)
    return b.finish([z]), b


def test_cost_model_charges_forced_copies_and_padding() -> None:
    g, _ = _chain_graph()
    assert g.configurable[1].src == 0  # the second dot reads the first one's output
    model = LayoutCostModel(g)
    default = np.full((1, 2, 18), -1, dtype=np.int8)
    base = model.cost(default)[0]
    # first dot writes its output column-major (minor dim 0); the second dot keeps asking for
    # row-major: a forced copy of a 512x384 tensor, plus the elementwise chain in the new layout
    out_cm = default.copy()
    out_cm[0, 0, 0:2] = [0, 1]
    forced = out_cm.copy()
    forced[0, 1, 6:8] = [1, 0]
    follow = out_cm.copy()  # second dot's input left at default: takes the producer's layout, no copy
    costs = model.cost(np.concatenate([forced, follow]))
    assert costs[0] > costs[1] > 0
    copy_bytes = 512 * 384 * 4
    assert costs[0] - costs[1] >= copy_bytes / 800.0  # at least one pass over the tensor
    assert costs[1] != base
    # lanes: a 3-wide minor dim wastes 125/128 of every vector register; on the sublanes, 5/8
    assert pad_table((4096, 3), 4)[1, 0] == pytest.approx(128 / 3)
    assert pad_table((4096, 3), 4)[0, 1] == pytest.approx(8 / 3)
    assert pad_table((256, 128), 4)[1, 0] == 1.0
    # a reshape is a free bitcast in row-major layouts and a physical copy otherwise
    b = Builder(np.random.default_rng(0))
    r = b.reshape(b.param((4096, 3)), (3, 4096))
    m = LayoutCostModel(b.finish([r]))
    row_major, swapped = np.full((1, 1, 18), -1, np.int8), np.full((1, 1, 18), -1, np.int8)
    swapped[0, 0, 6:8] = [0, 1]
    assert m.cost(row_major)[0] == m.base
    assert m.cost(swapped)[0] > m.base + 4096 * 3 * 4 / 800.0


def test_cost_model_charges_merging_branches_in_different_layouts() -> None:
    b = Builder(np.random.default_rng(0), etype="f32")
    x = b.param((512, 384))
    s = b.add("add", (512, 256), [b.dot(x, 256), b.dot(x, 256)])  # two branches meet
    g = b.finish([b.chain(s, 4)])
    assert g.merges == [(0, 1, 512 * 256 * 4)]
    assert [c.chain for c in g.configurable] == [0, 0]  # the add is not either branch's own op
    model = LayoutCostModel(g)
    cfg = np.full((4, 2, 18), -1, dtype=np.int8)
    cfg[1, 0, 0:2] = cfg[1, 1, 0:2] = [0, 1]  # both column-major: they still match
    cfg[2, 0, 0:2] = [0, 1]  # only the first: the add must copy one branch
    cfg[3, 1, 0:2] = [0, 1]
    cost = model.cost(cfg)
    model.merge_a = model.merge_b = np.zeros(0, dtype=np.int64)  # the same graph without the merge rule
    unmerged = model.cost(cfg)
    np.testing.assert_allclose(cost[:2], unmerged[:2])  # matching layouts: nothing to copy
    copy = 512 * 256 * 4 * 2 / 800.0  # read + write at ~800 bytes/ns, no padding
    np.testing.assert_allclose(cost[2:] - unmerged[2:], copy)
    assert cost[3] == pytest.approx(cost[2])


def test_spelling_out_default_layouts_keeps_runtimes() -> None:
    rng = np.random.default_rng(3)
    g = layout_graph(rng, "xla", 150, 8)
    model = LayoutCostModel(g)
    cfg = LayoutSpace(g.configurable).random(rng, 200, p_default=0.5)
    spelled = spell_out(model, cfg, np.ones((model.n, 3), dtype=bool))
    tensors = spelled.reshape(200, model.n, 3, 6)
    ranks = np.stack(model.ranks, axis=1)  # (n, 3)
    assert ((tensors == -1).all(axis=3) == (ranks == 0)).all()  # every real tensor now named
    assert (spelled[cfg != -1] == cfg[cfg != -1]).all()  # explicit choices untouched
    np.testing.assert_allclose(model.cost(spelled), model.cost(cfg))


def test_layout_candidates_are_permutations_or_minor_pairs() -> None:
    assert layout_candidates(2).tolist() == [[0, 1, -1, -1, -1, -1], [1, 0, -1, -1, -1, -1]]
    assert len(layout_candidates(3)) == 6
    assert len(layout_candidates(4)) == 12 and (layout_candidates(4)[:, 2:] == -1).all()


def ridge(x: np.ndarray, y: np.ndarray, alpha: float = 1.0):
    """A ridge regression with an intercept (scikit-learn's `Ridge(alpha)`), fitted: its predict."""
    mx, my = x.mean(axis=0), y.mean()
    w = np.linalg.solve((x - mx).T @ (x - mx) + alpha * np.eye(x.shape[1]), (x - mx).T @ (y - my))
    return lambda z: (z - mx) @ w + my


@pytest.mark.parametrize("family", ["xla", "nlp"])
def test_runtimes_are_learnable_from_configs(family: str) -> None:
    """A ridge model on one-hot config values, fit on 1000 measured configs, ranks 1000 others."""
    rng = np.random.default_rng(7)
    g = layout_graph(rng, family, 200, 12)
    cfg = LayoutSpace(g.configurable).random(rng, 2000)
    y = np.log(measure(LayoutCostModel(g).cost(cfg), rng).astype(float))
    flat = cfg.reshape(len(cfg), -1).astype(int) + 1
    onehot = np.concatenate([(flat == v) for v in range(7)], axis=1).astype(float)
    tau = kendalltau(ridge(onehot[:1000], y[:1000])(onehot[1000:]), y[1000:]).statistic
    assert tau > 0.5, tau
    assert np.exp(y.max() - y.min()) > 1.2  # random layouts matter


def test_streamed_big_file_is_valid(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(gen_mod, "IN_MEMORY_BYTES", 0)  # force the streaming writer
    path = tmp_path / "big.npz"
    write_big_layout_graph(path, "layout:xla:random", nodes=300, configurable=20, configs=2500, seed=1)
    g = validate_file(path)
    assert g.num_configs == 2500 and g.node_config_feat.shape[1] == len(g.node_config_ids)
    with zipfile.ZipFile(path) as zf:
        assert [i.filename for i in zf.infolist()] == [f"{k}.npy" for k in LAYOUT_KEYS]
        assert all(i.compress_type == zipfile.ZIP_DEFLATED for i in zf.infolist())
    flat = np.load(path)["node_config_feat"].reshape(2500, -1)
    assert len(np.unique(flat, axis=0)) < 2500  # duplicates present


def test_synth_cli_writes_selected_collections(tmp_path: Path, capsys) -> None:
    out = tmp_path / "d"
    rc = main(
        [
            "synth",
            "--out",
            str(out),
            "--scale",
            "tiny",
            "--seed",
            "1",
            "--collections",
            "tile:xla",
            "--splits",
            "test",
        ]
    )
    assert rc == 0
    files = discover(out / NPZ_SUBDIR)
    assert {f.collection for f in files} == {"tile:xla"} and len(files) == 4
    assert len((out / "sample_submission.csv").read_text().splitlines()) == 5
    # same folder, another seed: refused with one line rather than mixing two datasets
    assert main(["synth", "--out", str(out), "--scale", "tiny", "--seed", "2"]) == 1
    assert "already holds" in capsys.readouterr().err


@pytest.mark.parametrize("bad", [["--scale", "huge"], ["--collections", "tile:tpu"], ["--splits", "dev"]])
def test_synth_cli_rejects_bad_arguments(tmp_path: Path, bad: list[str]) -> None:
    with pytest.raises(SystemExit):
        main(["synth", "--out", str(tmp_path), *bad])


def test_synth_cli_errors_are_one_line(tmp_path: Path, capsys) -> None:
    assert main(["synth", "--out", str(tmp_path / "x"), "--seed", "-1"]) == 1
    assert main(["compare-synth", "--real", str(tmp_path / "nowhere"), "--synthetic", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "seed must be" in err[0] and "no dataset here" in err[1]


def test_synth_refuses_to_write_into_a_real_dataset(tmp_path: Path, capsys) -> None:
    real = tmp_path / "real"
    (real / NPZ_SUBDIR).mkdir(parents=True)
    (real / "sample_submission.csv").write_text("ID,TopConfigs\n")
    assert main(["synth", "--out", str(real)]) == 1
    assert "did not write" in capsys.readouterr().err
    assert (real / "sample_submission.csv").read_text() == "ID,TopConfigs\n"
    assert not list((real / NPZ_SUBDIR).iterdir())


def test_compare_real_prints_both_columns(tiny_root: Path, sample_root: Path) -> None:
    from tpurank.synth.compare import compare

    out = compare(sample_root, tiny_root).splitlines()
    table = out[: out.index("")]
    assert table[0].startswith("| statistic | synthetic") and len(table) == 2 + 20
    row = {line.split(" | ")[0].strip("| "): line.split(" | ")[1:] for line in table[2:]}
    assert row["tile files (train/valid/test)"][0] == "12/4/4"
    assert row["tile files (train/valid/test)"][1].strip(" |") == "1/1/6"  # the real sample's files
    assert row["configurable conv / dot / reshape, nlp"][0].startswith("0.00 /")  # transformers: no conv


def test_synthetic_configs_tie_tensors_like_the_real_files(tiny_root: Path) -> None:
    """Tensors of one rank are tied in groups (as in the real files, where 2,544 tensor columns of an
    nlp graph hold 66 distinct sequences), so a config has far fewer distinct columns than tensors."""
    from tpurank.data.npz import load_graph

    for f in sorted((tiny_root / NPZ_SUBDIR / "layout/xla/random/train").glob("*.npz")):
        g = load_graph(f, config_dtype=np.int8)
        t = g.node_config_feat.reshape(g.num_configs, -1, 6)
        codes = ((t.astype(np.int64) + 1) * 7 ** np.arange(6)).sum(axis=2)
        used = codes[:, (codes != 0).any(axis=0)]  # tensors that exist
        assert len(np.unique(used.T, axis=0)) < 0.6 * used.shape[1], f


def test_parallel_generation_writes_the_same_bytes(tiny_root: Path, tmp_path: Path) -> None:
    from tpurank.synth import generate

    generate(tmp_path, scale="tiny", seed=0, collections=["layout:nlp:default"], jobs=2)
    ours = sorted((tmp_path / NPZ_SUBDIR / "layout/nlp/default").rglob("*.npz"))
    assert ours
    for f in ours:
        assert f.read_bytes() == (tiny_root / f.relative_to(tmp_path)).read_bytes(), f


def test_a_finished_tree_is_left_as_it_is(tmp_path: Path) -> None:
    """A rerun on a finished tree (every `./run.sh all` on the demo data) writes nothing, so its
    synth.json, which every stage reads, keeps its bytes: no step runs again because of it."""
    some = ["tile:xla"]
    generate(tmp_path, "tiny", seed=0, collections=some)
    marker = tmp_path / "synth.json"
    before = (marker.read_bytes(), marker.stat().st_mtime_ns)
    generate(tmp_path, "tiny", seed=0, collections=some)
    assert (marker.read_bytes(), marker.stat().st_mtime_ns) == before
