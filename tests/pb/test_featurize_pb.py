"""featurize-pb: raw tuning protobufs -> the dataset's npz, checked against the real sample files."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from tpurank.cli import main
from tpurank.core.errors import DataError
from tpurank.core.paths import NPZ_SUBDIR
from tpurank.data.npz import load_graph
from tpurank.pb.convert import PbWarning, layout_graph, read_pb, tile_graphs
from tpurank.pb.featurize import featurize
from tpurank.pb.opcodes import OPCODE_IDS, opcode_id
from tpurank.pb.schema import ModuleTuningData, TuningData

UNET_NPZ = NPZ_SUBDIR / "layout/xla/default/valid/unet_3d.4x4.bf16.npz"
LAYOUT_PB = "pb/module_tuning_data_layout.pb"
TILE_PB = "pb/op_tuning_data.pb"


# ----------------------------------------------------------------------------- a hand-made module


def _inst(comp, iid, opcode, dims=(), operands=(), calls=(), layout=None, element_type=11):
    inst = comp.instructions.add(id=iid, name=f"{opcode}.{iid}", opcode=opcode)
    inst.shape.element_type = element_type
    inst.shape.dimensions.extend(dims)
    if layout is not None:
        inst.shape.layout.minor_to_major.extend(layout)
    inst.operand_ids.extend(operands)
    inst.called_computation_ids.extend(calls)
    return inst


def _module(msg_module) -> None:
    """Two computations: an add body (id 1) and a while-named entry (id 2) that calls it."""
    body = msg_module.computations.add(name="add_body", id=1, root_id=12)
    _inst(body, 10, "parameter", layout=[])
    _inst(body, 11, "parameter", layout=[])
    _inst(body, 12, "add", operands=[10, 11], layout=[])
    entry = msg_module.computations.add(name="while_entry", id=2, root_id=23)
    p = _inst(entry, 20, "parameter", dims=[4, 3], layout=[1, 0])
    p.parameter_number = 0
    _inst(entry, 21, "not-an-opcode", dims=[4, 3], operands=[20, 20], layout=[0, 1])
    red = _inst(entry, 22, "reduce-window", dims=[2, 3, 5], operands=[21], calls=[1], layout=[2, 0, 1])
    for size, stride in ((2, 1), (1, 2)):
        red.window.dimensions.add(size=size, stride=stride, window_dilation=1, base_dilation=1)
    red.window.dimensions[1].window_reversal = True
    _inst(entry, 23, "tuple", operands=[22, 21], element_type=13)


def _layout_message(runs: list[tuple[int, bool, bool]]) -> ModuleTuningData:
    """runs: (time ns, error, is_default); every run configures nodes 3 and 4."""
    m = ModuleTuningData(fingerprint=7)
    _module(m.module)
    m.config_index_to_node.extend([3, 4])
    for k, (time, error, default) in enumerate(runs):
        r = m.runs.add(error=error, is_default=default)
        r.profile.compute_time_ns = time
        for node in range(2):
            n = r.module_config.layout_config.nodes.add()
            n.tensors.add().dims.extend([k % 2, 1 - k % 2])  # output layout
            if node == 1:
                n.tensors.add()  # an input tensor left to the compiler: all -1
    return m


def _tile_message() -> TuningData:
    t = TuningData()
    good = t.modules.add(fingerprint=(1 << 64) - 0xABC)  # uint64 that is negative as int64
    _module(good.module)
    good.module.name = "fusion.1"
    for time, error, default, bounds in (
        (500, False, True, [1, 2]),
        (400, False, False, [2, 3]),
        (1, False, False, [9]),
        (300, True, False, [4]),
    ):
        r = good.runs.add(error=error, is_default=default)
        r.profile.compute_time_ns = time
        r.op_config.tile_size_config.output_bounds.extend(bounds)
        r.op_config.tile_size_config.input_bounds.extend([5, 6, 7])
    single = t.modules.add(fingerprint=1)  # one run only: the dataset skips it
    _module(single.module)
    single.runs.add(is_default=True).op_config.tile_size_config.output_bounds.append(1)
    return t


def test_opcode_ids_follow_the_dataset_list():
    assert sorted(OPCODE_IDS.values()) == list(range(1, 121))
    assert [opcode_id(o) for o in ("convolution", "dot", "fusion", "parameter", "reshape")] == [
        26,
        34,
        41,
        63,
        75,
    ]
    assert opcode_id("no-such-op") == 0


def test_graph_structure_and_features_of_a_hand_made_module(tmp_path):
    g = layout_graph(tmp_path / "x.pb", _layout_message([(100, False, True)]))
    # nodes: computations in order, instructions in order; unknown opcode -> 0
    assert g.node_opcode.tolist() == [63, 63, 2, 63, 0, 72, 100]
    # [user, operand] sorted; the duplicate operand counted once; reduce-window -> root of the body (node 2)
    assert g.edge_index.tolist() == [[2, 0], [2, 1], [4, 3], [5, 2], [5, 4], [6, 4], [6, 5]]
    assert g.node_splits.tolist() == [[0, 7]]  # "while_entry" ends the only segment; the body does not
    f = g.node_feat
    assert f.dtype == np.float32 and f.shape == (7, 140)
    assert f[:, 0].tolist() == [0, 0, 1, 0, 0, 0, 1]  # is_root
    assert f[0, 2 + 11] == 1 and f[6, 2 + 16] == 1  # F32 one-hot; TUPLE one-hot
    assert f[5, 21:29].tolist() == [2, 3, 5, 0, 0, 0, 10, 30]  # dims, sum, product
    assert f[0, 27:29].tolist() == [0, 1]  # a scalar: sum 0, product 1 (empty product)
    assert f[5, 37:45].tolist() == [2, 1, 0, 0, 0, 0, 3, 2]  # window sizes
    assert f[5, 45:53].tolist() == [1, 2, 0, 0, 0, 0, 3, 2]  # window strides
    assert f[5, 85:93].tolist() == [0, 1, 0, 0, 0, 0, 1, 1]  # reversal flags, true and false counts
    assert f[0, 44] == 1 and f[0, 92] == 0  # no window: product 1, no false flags
    assert f[5, 134:140].tolist() == [2, 0, 1, 0, 0, 0]  # layout padded with 0, as the dataset
    assert f[6, 134:140].tolist() == [0] * 6
    padded = layout_graph(tmp_path / "x.pb", _layout_message([(100, False, True)]), layout_pad=-1).node_feat
    assert padded[5, 134:140].tolist() == [2, 0, 1, -1, -1, -1]
    assert np.array_equal(padded[:, :134], f[:, :134])


def test_layout_configs_keep_valid_runs_padded_with_minus_one(tmp_path):
    msg = _layout_message([(100, False, True), (90, True, False), (80, False, False)])
    msg.runs.add(error=False).module_config.layout_config.nodes.add()  # no profile: dropped
    g = layout_graph(tmp_path / "x.pb", msg)
    assert g.config_runtime.tolist() == [100, 80]
    assert g.node_config_ids.tolist() == [3, 4]
    assert g.node_config_feat.shape == (2, 2, 18)
    assert g.node_config_feat[0, 0].tolist() == [0, 1] + [-1] * 16
    assert g.node_config_feat[0, 1].tolist() == [0, 1] + [-1] * 16  # second tensor present but empty
    assert g.node_config_feat[1, 0, :2].tolist() == [0, 1]  # run index 2 -> k % 2 == 0


def test_layout_run_timed_at_zero_is_left_out_with_a_warning(tmp_path):
    msg = _layout_message([(100, False, True), (0, False, False), (80, False, False)])
    with pytest.warns(PbWarning, match="left out 1 valid run"):
        g = layout_graph(tmp_path / "x.pb", msg)
    assert g.config_runtime.tolist() == [100, 80]


def test_no_valid_runs_gives_zero_configs_and_a_warning(tmp_path):
    src = tmp_path / "empty_runs.pb"
    src.write_bytes(_layout_message([(100, True, True)]).SerializeToString())
    with pytest.warns(PbWarning, match="no valid runs"):
        written = featurize(src, tmp_path / "out.npz")
    g = load_graph(written[0], "layout")
    assert g.num_configs == 0 and g.node_config_feat.shape == (0, 2, 18) and g.num_nodes == 7


def test_tile_rules_features_and_normalizers(tmp_path):
    with pytest.warns(PbWarning, match="skipped 1 of 2 modules"):
        graphs = tile_graphs(tmp_path / "t.pb", _tile_message())
    assert list(graphs) == ["t_-abc"]  # <pb stem>_<int64 fingerprint hex>, as the dataset's stems
    g = graphs["t_-abc"]
    assert g.config_runtime.tolist() == [500, 400]  # the 1 ns and the error run are dropped
    assert g.config_runtime_normalizers.tolist() == [500, 500]  # the default run's time
    # kernel (empty: product 0), output, input bounds: 6 values, sum, product each
    assert g.config_feat[1].tolist() == [0] * 8 + [2, 3, 0, 0, 0, 0, 5, 6] + [5, 6, 7, 0, 0, 0, 18, 210]


def test_missing_default_run_warns(tmp_path):
    t = _tile_message()
    del t.modules[1]  # keep only the usable module
    t.modules[0].runs[0].error = True  # the only default run fails: no normalizer
    with pytest.warns(PbWarning, match="no kept run is marked default"):
        graphs = tile_graphs(tmp_path / "t.pb", t)
    assert [g.num_configs for g in graphs.values()] == [0]
    with pytest.warns(PbWarning, match="no kept run is marked default"):
        g = layout_graph(tmp_path / "x.pb", _layout_message([(100, False, False)]))
    assert g.config_runtime.tolist() == [100]  # kept: the layout format has no normalizer


def test_bad_files_are_one_line_data_errors(tmp_path, capsys):
    whole = _layout_message([(100, False, True)]).SerializeToString()
    cases = {
        "truncated.pb": whole[: len(whole) // 2],
        "text.pb": b"this is not a protobuf at all\n",
        "empty.pb": b"",
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(DataError, match=name):
            read_pb(tmp_path / name)
    with pytest.raises(DataError, match="no such file"):
        read_pb(tmp_path / "missing.pb")
    with pytest.raises(DataError, match="not a TuningData"):
        (tmp_path / "layout.pb").write_bytes(whole)
        read_pb(tmp_path / "layout.pb", kind="tile")
    assert main(["featurize-pb", str(tmp_path / "truncated.pb"), str(tmp_path / "o.npz")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "truncated.pb" in err[0] and "Traceback" not in err[0]


def test_unwritable_output_is_a_one_line_error(tmp_path, capsys):
    src = tmp_path / "m.pb"
    src.write_bytes(_layout_message([(100, False, True)]).SerializeToString())
    (tmp_path / "a_file").write_text("")
    assert main(["featurize-pb", str(src), str(tmp_path / "a_file" / "out.npz")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "a_file" in err[0] and "error" in err[0]


def test_rerun_is_up_to_date_unless_forced_or_options_change(tmp_path):
    src = tmp_path / "m.pb"
    src.write_bytes(_layout_message([(100, False, True)]).SerializeToString())
    out = tmp_path / "m.npz"
    assert featurize(src, out) == [out]
    assert out.with_name(out.name + ".json").exists()
    assert featurize(src, out) is None
    assert featurize(src, out, force=True) == [out]
    assert featurize(src, out, pad=-1) == [out]  # another padding: rewritten
    assert load_graph(out).node_feat[5, 137] == -1


@pytest.mark.filterwarnings("ignore::tpurank.pb.convert.PbWarning")  # the single-run module: skipped
def test_new_input_content_at_the_same_path_is_rewritten(tmp_path):
    src, out = tmp_path / "t.pb", tmp_path / "tile"
    src.write_bytes(_tile_message().SerializeToString())
    first = featurize(src, out)
    assert len(first) == 1  # the single-run module is skipped, as the dataset does
    assert featurize(src, out) is None  # same path, same bytes: up to date
    key = json.loads((out / "featurize-pb.json").read_text())["key"]
    changed = _tile_message()
    changed.modules[0].runs[0].profile.compute_time_ns = 700  # other measurements, same path and name
    src.write_bytes(changed.SerializeToString())
    assert featurize(src, out) == first  # the key sees the content: rewritten
    assert json.loads((out / "featurize-pb.json").read_text())["key"] != key
    assert load_graph(first[0], "tile").config_runtime.max() == 700


# ----------------------------------------------------------------------------- the real sample


@pytest.fixture(scope="module")
def real_layout(sample_root, tmp_path_factory):
    out = tmp_path_factory.mktemp("pb") / "unet.npz"
    with warnings.catch_warnings():
        warnings.simplefilter("error", PbWarning)  # the real file must need no warning
        featurize(sample_root / LAYOUT_PB, out)
    return load_graph(out, "layout"), load_graph(sample_root / UNET_NPZ, "layout")


def test_real_layout_pb_reproduces_the_real_npz(real_layout):
    ours, real = real_layout
    a, b = ours.node_feat.view(np.uint32), real.node_feat.view(np.uint32)  # bit for bit
    assert a.shape == b.shape == (3163, 140)
    bad = [c for c in range(140) if not np.array_equal(a[:, c], b[:, c])]
    assert bad == [], f"node_feat columns differing from the real file: {bad}"
    for key in ("node_opcode", "edge_index", "node_config_ids", "node_splits"):
        assert np.array_equal(getattr(ours, key), getattr(real, key)), key
        assert getattr(ours, key).dtype == getattr(real, key).dtype, key


def test_real_layout_runs_are_rows_of_the_real_npz(sample_root, real_layout):
    ours, real = real_layout
    _, msg = read_pb(sample_root / LAYOUT_PB)
    valid = [r for r in msg.runs if not r.error and r.HasField("profile")]
    assert ours.num_configs == len(valid) == 112  # 122 runs, 10 with an error (the sample's notes)
    for i in range(ours.num_configs):
        same_time = np.nonzero(real.config_runtime == ours.config_runtime[i])[0]
        assert any(np.array_equal(ours.node_config_feat[i], real.node_config_feat[j]) for j in same_time), i


def test_real_tile_pb_gives_checked_files_with_spec_configs(sample_root, tmp_path):
    src = sample_root / TILE_PB
    written = featurize(src, tmp_path / "tile")
    assert len(written) == 15
    assert main(["check", str(tmp_path / "tile")]) == 0
    _, msg = read_pb(src)
    by_stem = {f"op_tuning_data_{np.uint64(m.fingerprint).view(np.int64):x}": m for m in msg.modules}
    total = 0
    for path in written:
        g = load_graph(path, "tile")
        runs = [r for r in by_stem[path.stem].runs if not r.error and r.profile.compute_time_ns > 1]
        default = next(r for r in runs if r.is_default).profile.compute_time_ns
        assert g.config_runtime.tolist() == [r.profile.compute_time_ns for r in runs]
        assert (g.config_runtime_normalizers == default).all()
        for row, r in zip(g.config_feat, runs, strict=True):
            t = r.op_config.tile_size_config
            want = []
            for bounds in (list(t.kernel_bounds), list(t.output_bounds), list(t.input_bounds)):
                want += (bounds + [0] * 6)[:6] + [sum(bounds), int(np.prod(bounds)) if bounds else 0]
            assert row.tolist() == want
        total += g.num_configs
    assert total == 754 - 2  # the sample's 754 runs less fusion.191's two failed ones
