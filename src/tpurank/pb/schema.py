"""Protobuf message classes for the raw TpuGraphs files, built in Python (no TensorFlow, no protoc).

Only the fields the featurizer reads are declared; every other field of a real file is kept as an
unknown field and ignored. Field numbers are those of `tpu_graphs/proto/tuning.proto` and XLA's
public `xla/service/hlo.proto` and `xla/xla_data.proto`. Enum fields (element_type) are declared as
int32, which has the same wire format. The descriptors live in a private pool, so they never clash
with XLA protos that another library (TensorFlow, JAX) registers in the default pool.
"""

from __future__ import annotations

from google.protobuf import descriptor_pool, message_factory
from google.protobuf.descriptor_pb2 import FieldDescriptorProto, FileDescriptorProto

_T = FieldDescriptorProto
_SCALARS = {
    "int64": _T.TYPE_INT64,
    "int32": _T.TYPE_INT32,
    "uint64": _T.TYPE_UINT64,
    "bool": _T.TYPE_BOOL,
    "string": _T.TYPE_STRING,
}

# message -> [(field name, number, type, repeated)]; a type not in _SCALARS names a message.
_XLA: dict[str, list[tuple[str, int, str, bool]]] = {
    "LayoutProto": [("minor_to_major", 1, "int64", True)],
    "ShapeProto": [
        ("element_type", 2, "int32", False),
        ("dimensions", 3, "int64", True),
        ("tuple_shapes", 4, "ShapeProto", True),
        ("layout", 5, "LayoutProto", False),
    ],
    "WindowDimension": [
        ("size", 1, "int64", False),
        ("stride", 2, "int64", False),
        ("padding_low", 3, "int64", False),
        ("padding_high", 4, "int64", False),
        ("window_dilation", 5, "int64", False),
        ("base_dilation", 6, "int64", False),
        ("window_reversal", 7, "bool", False),
    ],
    "Window": [("dimensions", 1, "WindowDimension", True)],
    "ConvolutionDimensionNumbers": [
        ("kernel_input_feature_dimension", 3, "int64", False),
        ("kernel_output_feature_dimension", 4, "int64", False),
        ("kernel_spatial_dimensions", 6, "int64", True),
        ("input_batch_dimension", 7, "int64", False),
        ("input_feature_dimension", 8, "int64", False),
        ("output_batch_dimension", 9, "int64", False),
        ("output_feature_dimension", 10, "int64", False),
        ("input_spatial_dimensions", 11, "int64", True),
        ("output_spatial_dimensions", 12, "int64", True),
    ],
    "PaddingConfigDimension": [
        ("edge_padding_low", 1, "int64", False),
        ("edge_padding_high", 2, "int64", False),
        ("interior_padding", 3, "int64", False),
    ],
    "PaddingConfig": [("dimensions", 1, "PaddingConfigDimension", True)],
    "SliceDimensions": [
        ("start", 1, "int64", False),
        ("limit", 2, "int64", False),
        ("stride", 3, "int64", False),
    ],
    "HloInstructionProto": [
        ("name", 1, "string", False),
        ("opcode", 2, "string", False),
        ("shape", 3, "ShapeProto", False),
        ("parameter_number", 9, "int64", False),
        ("dimensions", 14, "int64", True),
        ("window", 15, "Window", False),
        ("convolution_dimension_numbers", 16, "ConvolutionDimensionNumbers", False),
        ("slice_dimensions", 17, "SliceDimensions", True),
        ("dynamic_slice_sizes", 20, "int64", True),
        ("padding_config", 21, "PaddingConfig", False),
        ("id", 35, "int64", False),
        ("operand_ids", 36, "int64", True),
        ("called_computation_ids", 38, "int64", True),
        ("feature_group_count", 50, "int64", False),
        ("batch_group_count", 58, "int64", False),
        ("is_stable", 60, "bool", False),
    ],
    "HloComputationProto": [
        ("name", 1, "string", False),
        ("instructions", 2, "HloInstructionProto", True),
        ("id", 5, "int64", False),
        ("root_id", 6, "int64", False),
    ],
    "HloModuleProto": [
        ("name", 1, "string", False),
        ("entry_computation_name", 2, "string", False),
        ("computations", 3, "HloComputationProto", True),
        ("id", 5, "int64", False),
        ("entry_computation_id", 6, "int64", False),
    ],
    "ExecutionProfile": [("compute_time_ns", 4, "int64", False)],
}

_TPU_GRAPHS: dict[str, list[tuple[str, int, str, bool]]] = {
    "TileSizeConfig": [
        ("kernel_bounds", 1, "int64", True),
        ("output_bounds", 2, "int64", True),
        ("input_bounds", 3, "int64", True),
        ("iteration_bounds", 4, "int64", True),
    ],
    "HloOpConfig": [("tile_size_config", 1, "TileSizeConfig", False)],
    "TensorLayoutConfig": [("dims", 1, "int32", True)],
    "NodeLayoutConfig": [("tensors", 1, "TensorLayoutConfig", True)],
    "LayoutConfig": [("nodes", 1, "NodeLayoutConfig", True)],
    "HloModuleConfig": [("layout_config", 1, "LayoutConfig", False)],
    "ConfigProfile": [
        ("op_config", 1, "HloOpConfig", False),
        ("module_config", 2, "HloModuleConfig", False),
        ("error", 3, "bool", False),
        ("profile", 4, ".xla.ExecutionProfile", False),
        ("is_default", 5, "bool", False),
    ],
    "ModuleTuningData": [
        ("module", 1, ".xla.HloModuleProto", False),
        ("fingerprint", 2, "uint64", False),
        ("runs", 3, "ConfigProfile", True),
        ("config_index_to_node", 4, "uint64", True),
    ],
    "TuningData": [("modules", 1, "ModuleTuningData", True)],
}

_ONEOF = {"ConfigProfile": ("config", ("op_config", "module_config"))}


def _file(name: str, package: str, messages: dict, deps: list[str]) -> FileDescriptorProto:
    # proto2 syntax: every singular message field has presence (HasField), as in the real schema.
    fdp = FileDescriptorProto(name=name, package=package, syntax="proto2", dependency=deps)
    for msg_name, fields in messages.items():
        msg = fdp.message_type.add(name=msg_name)
        oneof = _ONEOF.get(msg_name)
        if oneof:
            msg.oneof_decl.add(name=oneof[0])
        for fname, number, ftype, repeated in fields:
            f = msg.field.add(name=fname, number=number)
            f.label = _T.LABEL_REPEATED if repeated else _T.LABEL_OPTIONAL
            if ftype in _SCALARS:
                f.type = _SCALARS[ftype]
                if repeated and ftype != "string":
                    f.options.packed = True  # proto3 writers pack repeated scalars; both forms parse
            else:
                f.type = _T.TYPE_MESSAGE
                f.type_name = ftype if ftype.startswith(".") else f".{package}.{ftype}"
            if oneof and fname in oneof[1]:
                f.oneof_index = 0
    return fdp


def _build() -> dict[str, type]:
    pool = descriptor_pool.DescriptorPool()
    pool.Add(_file("tpurank/xla.proto", "xla", _XLA, []))
    pool.Add(_file("tpurank/tuning.proto", "tpu_graphs", _TPU_GRAPHS, ["tpurank/xla.proto"]))
    names = [f"xla.{m}" for m in _XLA] + [f"tpu_graphs.{m}" for m in _TPU_GRAPHS]
    return {n.split(".")[1]: message_factory.GetMessageClass(pool.FindMessageTypeByName(n)) for n in names}


_CLASSES = _build()
ModuleTuningData = _CLASSES["ModuleTuningData"]
TuningData = _CLASSES["TuningData"]
HloModuleProto = _CLASSES["HloModuleProto"]
ConfigProfile = _CLASSES["ConfigProfile"]
