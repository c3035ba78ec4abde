"""The one typed configuration of a run: defaults here, overrides from a TOML file or `--set`.

Each stage reads its own section. `[collections."layout:xla:default".gnn]` style tables override
any section for one collection; the per-collection defaults (core/collection_defaults.py: the GPU
scale of each collection) give way to any key set at top level. Unknown keys, wrongly typed values and values outside the range
declared next to the field (`value(default, min=..., choices=...)`) are errors, so a typo never
silently falls back to a default and a nonsense value never trains a model. The resolved config is saved next to every output.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import re
import tomllib
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tpurank.core.collection_defaults import DEFAULT_COLLECTIONS, collection_defaults
from tpurank.core.collections import COLLECTIONS
from tpurank.core.errors import TpurankError


def value(
    default: Any,
    *,
    min: float | None = None,  # shadows the builtin inside this function only
    max: float | None = None,
    above: float | None = None,
    below: float | None = None,
    choices: tuple[Any, ...] | None = None,
) -> Any:
    """A config field with its allowed values declared beside it, e.g. `lr: float = value(1e-3, above=0)`.

    Every key is checked when a config is built (file, `--set` and per-collection overrides alike),
    so a bad value is a one-line error before any stage starts.

    Args:
        default: the default value.
        min, max: inclusive bounds.
        above, below: exclusive bounds.
        choices: the only values allowed.
    """
    bounds = {"min": min, "max": max, "above": above, "below": below, "choices": choices}
    return field(default=default, metadata={k: v for k, v in bounds.items() if v is not None})


@dataclass
class PrepareConfig:
    # k-hop neighbourhood kept around configurable nodes (1st place used 1); -1 = the whole graph
    # (no pruning: what Graph Segment Training, gnn.segment_nodes, is for)
    hops: int = value(1, min=-1)
    collapse_removed: bool = False  # replace each run of pruned nodes by one summary node
    jobs: int = value(0, min=0)  # worker processes; 0 = one per CPU core
    # glob patterns of train graph IDs (`collection:name`) or names left out of training, e.g.
    # "layout:xla:*:unet*" (the 2nd place dropped layout:xla's unet graphs as corrupted); empty:
    # no measurement here says dropping them helps (our one real layout pair is unet)
    exclude: list[str] = field(default_factory=list)


@dataclass
class FeaturesConfig:
    # unique configs featurised per train graph (0 = all): bounds LightGBM's rows on the real data
    # (random files hold up to 100k configs) at a demo cost of < 0.01 tau
    max_configs_per_graph: int = value(1_000, min=0)
    # share of that cap given to the graph's fastest configs, the rest drawn at random
    fastest_share: float = value(0.25, min=0, max=1)
    # layout: configs x nodes featurised per numpy step (bounds memory)
    chunk_cells: int = value(2_000_000, min=1)
    # layout: whether convolutions and dots get their operands contraction-minor and their output
    # feature-minor, as the TPU's matrix unit reads and writes fastest (features/mxu.py)
    mxu_columns: bool = False


@dataclass
class LgbmConfig:
    objective: str = value("lambdarank", choices=("lambdarank", "rank_xendcg"))
    num_leaves: int = value(63, min=2)
    learning_rate: float = value(0.05, above=0)
    num_boost_round: int = value(1000, min=1)
    early_stopping_rounds: int = value(50, min=1)
    min_data_in_leaf: int = value(20, min=0)
    feature_fraction: float = value(0.8, above=0, max=1)
    bagging_fraction: float = value(0.8, above=0, max=1)
    # bigger graphs become random queries of at most this (LightGBM: 10,000)
    max_query_rows: int = value(2_000, min=1, max=10_000)
    # runtime rank within a graph mapped to 0..levels-1 (LightGBM label limit)
    relevance_levels: int = value(31, min=2, max=31)
    # gain of grade i: "linear" (i, whole order matters) or "exp" (2^i - 1, top)
    label_gain: str = value("linear", choices=("linear", "exp"))
    truncation_level: int = value(0, min=0)  # lambdarank: pairs with one of a query's top N get gradients;
    # 0 = 64 for tile, the whole query for layout (Kendall tau counts every pair; better valid tau on the demo data)
    threads: int = value(0, min=0)  # 0 = all cores


@dataclass
class GnnConfig:
    hidden: int = value(256, min=1)  # width of node embeddings (1st place: hidden_channels 256,256)
    layers: int = value(3, min=1)  # message-passing layers (both edge directions each)
    # neighbour aggregation, "sum" or "mean": sums keep fan-in (better layout tau on demo)
    aggr: str = value("sum", choices=("sum", "mean"))
    opcode_dim: int = value(16, min=1)  # opcode embedding width
    config_dim: int = value(8, min=1)  # embedding width of each of the 18 config values
    cross_config_attention: bool = False  # attention across the configs of one graph
    # "hinge" (pairwise margin), "listmle", or "auto": ListMLE for layout, hinge for tile
    loss: str = value("auto", choices=("auto", "hinge", "listmle"))
    # (demo valid, docs/models.md: ListMLE raised tau in all 4 layout collections; hinge scored tile better)
    margin: float = value(0.1, min=0)  # pairwise hinge margin
    configs_per_graph: int = value(64, min=2)  # configs sampled per graph per step
    graphs_per_batch: int = value(4, min=1)
    lr: float = value(1e-3, above=0)
    weight_decay: float = value(1e-4, min=0)
    # per-(config, node) dropout masks (1st place: dropout 0.2 over ~50k steps; at the CPU presets' few hundred
    # steps it cost 0.046 demo tau, docs/models.md: they set 0)
    dropout: float = value(0.2, min=0, below=1)
    # training length in optimizer steps; each collection has its own (core/collection_defaults.py: the 1st
    # place's 11.5k-52k at 4 graphs a step), which a top-level value replaces for all five
    max_steps: int = value(4_000, min=1)
    # also stop after this many minutes (0 = no limit); validates before stopping
    time_budget_min: float = value(0.0, min=0)
    # steps between validations; 0 = about one pass over the train configs, at most 200
    eval_every: int = value(0, min=0)
    patience: int = value(5, min=1)  # validations without gain before stopping...
    # ...but never before this share of the budget (steps or minutes): seeds differ by up to 0.1 tau on
    # the xla collections, so a short run of worse scores is noise (the 1st place never stopped early)
    min_train_share: float = value(0.5, min=0, max=1)
    heads: int = value(4, min=1)  # cross-config attention heads (must divide hidden)
    grad_clip: float = value(1.0, above=0)  # global gradient-norm clip
    # configs per valid graph scored for early stopping where no official subset is cached (official: 1000)
    eval_max_configs: int = value(1000, min=1)
    predict_chunk: int = value(256, min=1)  # configs scored per forward pass at validation/prediction
    bf16: bool = True  # mixed precision on CUDA: bf16 where supported, else fp16 + grad scaler; CPU: fp32
    # nodes per training pass; bigger steps run in micro-batches (~3 GB)
    max_batch_nodes: int = value(8_000, min=1)
    # recompute each layer's activations in backward (layout): the same numbers; on the full-scale xla
    # collection training peaks at 2.8 GB instead of 4.4 GB, for one more forward pass (docs/scale.md)
    checkpoint_layers: bool = True
    # Graph Segment Training (layout; docs/models.md, "Graph Segment Training"): cut each graph into contiguous
    # segments of at most this many nodes; a step backpropagates through `segments_per_step` of them and
    # takes the others' embeddings from a table of historical ones (0 = off: whole-graph training)
    segment_nodes: int = value(0, min=0)
    segments_per_step: int = value(1, min=1)  # segments of each graph trained (with gradients) per step
    stale_dropout: float = value(0.5, min=0, below=1)  # chance a historical segment embedding is left out
    finetune_steps: int = value(0, min=0)  # steps training only the prediction head on fresh embeddings
    history_mb: int = value(1024, min=1)  # memory bound of the historical-embedding table (oldest evicted)
    # --- the top solutions' recipe (docs/models.md, "The recipe of the top solutions")
    # linear learning-rate warm-up, then the cosine over the rest of the budget (per collection: 5% of its
    # steps, the 1st place's warmup_ratio)
    warmup_steps: int = value(400, min=0)
    # models trained with seeds seed, seed+1, ...; their predictions averaged after per-graph
    # normalisation (ensemble.normalize); seed k > 0 lives in models/gnn/<collection>/seed-k/ (1st place: 5 seeds)
    seeds: int = value(5, min=1)
    standardize: bool = True  # node features standardised with train-graph statistics (in the checkpoint)
    # layout: attention across the configs at every configurable node after every message-passing layer
    # (on for the default collections: core/collection_defaults.py)
    layer_attention: bool = False
    tile_all_configs: bool = False  # tile: every config of a graph in each step (configs_per_graph ignored)
    # layout: each config's minor dims against the TPU's (8, 128) tile and its MXU operand order at every
    # configurable node (the 5th place's per-dimension facts with the layout applied; gnn/tile_inputs.py)
    tile_features: bool = False
    # node inputs: shape, window and padding sizes against the 128-lane tile (the 3rd place's mod/div 128)
    dim_features: bool = False


@dataclass
class BaselineConfig:
    # the official early-join GraphSAGE baseline, as small as in the paper's code
    hidden: int = value(64, min=1)
    layers: int = value(3, min=1)
    margin: float = value(1.0, min=0)  # TF-Ranking's pairwise hinge, as used by the official trainer
    configs_per_graph: int = value(16, min=2)
    lr: float = value(1e-3, above=0)
    max_steps: int = value(2_000, min=1)  # training length in optimizer steps
    time_budget_min: float = value(0.0, min=0)  # also stop after this many minutes (0 = no limit)
    # steps between validations; 0 = about one pass over the train configs, at most 200
    eval_every: int = value(0, min=0)
    op_dim: int = value(64, min=1)  # opcode embedding width of the official EarlyJoinSAGE
    graphs_per_batch: int = value(8, min=1)  # the official --batch
    clip_norm: float = value(0.01, above=0)  # the official per-tensor gradient clip (--clip_norm)
    patience: int = value(5, min=1)  # validations without gain before stopping...
    min_train_share: float = value(0.5, min=0, max=1)  # ...but not before this share of the budget
    eval_max_configs: int = value(1000, min=1)
    # configs per pass (the baseline holds C copies of every node's features)
    predict_chunk: int = value(64, min=1)
    bf16: bool = True  # as gnn.bf16: mixed precision on CUDA only
    max_batch_nodes: int = value(8_000, min=1)  # nodes per training pass; bigger steps run as micro-batches


LEARNED_MODELS = ("lgbm", "gnn", "baseline")  # what an ensemble may combine, in training order


@dataclass
class EnsembleConfig:
    models: list[str] = field(default_factory=lambda: ["lgbm", "gnn"])
    # per-graph score normalisation before averaging: "rank" or "zscore"
    normalize: str = value("rank", choices=("rank", "zscore"))


@dataclass
class Config:
    """The whole run's config. Build it with `load_config` or `from_dict`: they resolve the per-collection
    defaults against the keys you set; `dataclasses.replace` on a section afterwards leaves the
    collections' own values (`collections`) in force wherever they exist."""

    seed: int = value(0, min=0)  # every random choice derives from this
    prepare: PrepareConfig = field(default_factory=PrepareConfig)
    features: FeaturesConfig = field(default_factory=FeaturesConfig)
    lgbm: LgbmConfig = field(default_factory=LgbmConfig)
    gnn: GnnConfig = field(default_factory=GnnConfig)
    baseline: BaselineConfig = field(default_factory=BaselineConfig)
    ensemble: EnsembleConfig = field(default_factory=EnsembleConfig)
    # per-collection overrides: {"layout:xla:default": {"gnn": {"cross_config_attention": True}}}; the
    # defaults (core/collection_defaults.py) give way to a key set at top level, the user's tables do not
    collections: dict[str, dict[str, Any]] = field(default_factory=lambda: copy.deepcopy(DEFAULT_COLLECTIONS))

    def for_collection(self, collection: str) -> Config:
        """This config with the collection's overrides applied (the overrides table dropped)."""
        base = to_dict(self)
        base.pop("collections")
        merged = _merge(base, self.collections.get(collection, {}), f"collections.{collection}")
        return _build(Config, {**merged, "collections": {}}, "")  # applied: no defaults re-added


def to_dict(cfg: Any) -> dict[str, Any]:
    return dataclasses.asdict(cfg)


def _merge(base: dict[str, Any], over: dict[str, Any], where: str) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v, f"{where}.{k}")
        else:
            out[k] = v
    return out


def _coerce(value: Any, typ: Any, where: str) -> Any:
    origin = typing.get_origin(typ)
    if dataclasses.is_dataclass(typ):
        if not isinstance(value, dict):
            raise TpurankError(f"config: {where} must be a table")
        return _build(typ, value, where)
    if origin is list:
        (inner,) = typing.get_args(typ)
        if not isinstance(value, list):
            raise TpurankError(f"config: {where} must be a list")
        return [_coerce(v, inner, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise TpurankError(f"config: {where} must be a table")
        return value
    if origin in (typing.Union, types.UnionType):
        return value
    if typ is bool:
        if not isinstance(value, bool):
            raise TpurankError(f"config: {where} must be true or false, got {value!r}")
        return value
    if typ is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if typ in (int, float, str) and not (isinstance(value, typ) and not isinstance(value, bool)):
        raise TpurankError(f"config: {where} must be {typ.__name__}, got {value!r}")
    if typ is float and not math.isfinite(value):  # inf or nan would train, and write, garbage
        raise TpurankError(f"config: {where} must be a finite number, got {value!r}")
    return value


def _build(cls: type, data: dict[str, Any], where: str) -> Any:
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        prefix = f"{where}." if where else ""
        raise TpurankError(f"config: unknown key {prefix}{unknown[0]} (known: {', '.join(sorted(known))})")
    kwargs = {k: _coerce(v, hints[k], f"{where}.{k}" if where else k) for k, v in data.items()}
    for f in dataclasses.fields(cls):
        if f.name in kwargs and f.metadata:
            check_value(kwargs[f.name], f.metadata, f"{where}.{f.name}" if where else f.name)
    return cls(**kwargs)


def check_value(v: Any, allowed: Mapping[str, Any], where: str) -> None:
    """Raise a one-line error when `v` breaks the range or choices declared with `value()`."""
    choices = allowed.get("choices")
    if choices is not None and v not in choices:
        raise TpurankError(f"config: {where} must be one of {', '.join(map(repr, choices))}, got {v!r}")
    tests = (
        ("min", lambda b: v >= b, ">="),
        ("max", lambda b: v <= b, "<="),
        ("above", lambda b: v > b, ">"),
        ("below", lambda b: v < b, "<"),
    )
    for key, ok, sign in tests:
        bound = allowed.get(key)
        if bound is not None and not ok(bound):
            raise TpurankError(f"config: {where} must be {sign} {bound:g}, got {v!r}")


def from_dict(data: dict[str, Any]) -> Config:
    """Build and validate a Config; its [collections] tables go over the per-collection defaults, which
    give way to every key `data` sets at top level (core/collection_defaults.py)."""
    over = data.get("collections", {})
    if not isinstance(over, dict):
        raise TpurankError("config: collections must be a table")
    data = {**data, "collections": _merge(collection_defaults(data), over, "collections")}
    cfg = _build(Config, data, "")
    check_pairs(cfg, "")
    for collection, over in cfg.collections.items():
        if collection not in COLLECTIONS:
            raise TpurankError(f"config: unknown collection {collection!r} in [collections]")
        # validate the override table against the schema now, not when first used
        base = to_dict(Config())
        base.pop("collections")
        where = f"collections.{collection}"
        check_pairs(_build(Config, _merge(base, over, where), where), where)
    return cfg


def check_pairs(cfg: Config, where: str) -> None:
    """The limits that tie two keys together (each key alone is checked by `value()`)."""
    at = f"{where}." if where else ""
    for section in ("gnn",):
        s = getattr(cfg, section)
        if s.hidden % s.heads:
            raise TpurankError(
                f"config: {at}{section}.heads ({s.heads}) must divide {at}{section}.hidden ({s.hidden}): "
                "each attention head takes an equal share of the width"
            )
    models = cfg.ensemble.models
    wrong = [m for m in models if m not in LEARNED_MODELS]
    if not models or wrong or len(set(models)) != len(models):
        raise TpurankError(
            f"config: {at}ensemble.models must list distinct models among {', '.join(LEARNED_MODELS)}"
            f" (the ensemble cannot be its own member), got {models!r}"
        )


def _parse_value(text: str) -> Any:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text  # a bare string


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply `section.key=value` strings (TOML values; bare words are strings)."""
    for item in overrides:
        if "=" not in item:
            raise TpurankError(f"config: override {item!r} must look like section.key=value")
        dotted, text = item.split("=", 1)
        keys = [k.strip('"') for k in re.findall(r'"[^"]*"|[^.]+', dotted.strip())]
        node = data
        for k in keys[:-1]:
            node = node.setdefault(k, {})
            if not isinstance(node, dict):
                raise TpurankError(f"config: {dotted} does not name a key inside a table")
        node[keys[-1]] = _parse_value(text.strip())
    return data


def read_toml(path: str | Path) -> dict[str, Any]:
    """A TOML config file as a table; every way it can fail is a one-line error naming the file."""
    path = Path(path)
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TpurankError(f"{path}: config file not found") from None
    except IsADirectoryError:
        raise TpurankError(f"{path}: is a folder, not a TOML config file") from None
    except OSError as e:
        raise TpurankError(f"{path}: cannot read the config file ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise TpurankError(f"{path}: not UTF-8 text at byte {e.start} (a TOML file is UTF-8)") from None
    except tomllib.TOMLDecodeError as e:
        raise TpurankError(f"{path}: not valid TOML ({e})") from None


def load_config(
    path: str | Path | None = None, overrides: list[str] | None = None, preset: str | Path | None = None
) -> Config:
    """Defaults, then a preset (e.g. configs/demo.toml), then the TOML file, then `--set`; validated.

    Args:
        path: the user's TOML file (`--config`).
        overrides: `section.key=value` strings (`--set`), applied last.
        preset: a TOML file applied under `path`, key by key (what `all` uses on small data).
    """
    data: dict[str, Any] = read_toml(preset) if preset is not None else {}
    if path is not None:
        data = _merge(data, read_toml(path), "")
    data = apply_overrides(data, overrides or [])
    return from_dict(data)
