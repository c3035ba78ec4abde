"""The one typed configuration of a run: defaults here, overrides from a TOML file or `--set`.

Each stage reads its own section. `[collections."layout:xla:default".gnn]` style tables override
any section for one collection. Unknown keys and wrongly typed values are errors, so a typo never
silently falls back to a default. The resolved config is saved next to every output.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tpurank.dataset import COLLECTIONS
from tpurank.errors import TpurankError


@dataclass
class PrepareConfig:
    hops: int = 1  # k-hop neighbourhood kept around configurable nodes (1st place used 1)
    collapse_removed: bool = False  # replace each run of pruned nodes by one summary node
    jobs: int = 0  # worker processes; 0 = one per CPU core


@dataclass
class FeaturesConfig:
    max_configs_per_graph: int = 0  # cap on unique configs featurised per train graph; 0 = all
    chunk_cells: int = 2_000_000  # layout: configs x nodes featurised per numpy step (bounds memory)


@dataclass
class LgbmConfig:
    objective: str = "lambdarank"  # or "rank_xendcg"
    num_leaves: int = 63
    learning_rate: float = 0.05
    num_boost_round: int = 1000
    early_stopping_rounds: int = 50
    min_data_in_leaf: int = 20
    feature_fraction: float = 0.8
    bagging_fraction: float = 0.8
    max_query_rows: int = 2_000  # bigger graphs become random queries of at most this (LightGBM: 10,000)
    relevance_levels: int = 31  # runtime rank within a graph mapped to 0..levels-1 (LightGBM label limit)
    label_gain: str = "linear"  # gain of grade i: "linear" (i, whole order matters) or "exp" (2^i - 1, top)
    truncation_level: int = 0  # lambdarank: pairs with one of a query's top N get gradients; 0 = 64 for tile,
    # the whole query for layout (Kendall tau counts every pair; better valid tau on the demo data)
    threads: int = 0  # 0 = all cores


@dataclass
class GnnConfig:
    hidden: int = 64  # width of node embeddings
    layers: int = 3  # message-passing layers (both edge directions each)
    aggr: str = "sum"  # neighbour aggregation, "sum" or "mean": sums keep fan-in (better layout tau on demo)
    opcode_dim: int = 16  # opcode embedding width
    config_dim: int = 8  # embedding width of each of the 18 config values
    cross_config_attention: bool = False  # attention across the configs of one graph
    loss: str = "auto"  # "hinge" (pairwise margin), "listmle", or "auto": ListMLE for layout, hinge for tile
    # (demo valid, README "Benchmark": ListMLE raised tau in all 4 layout collections; hinge scored tile better)
    margin: float = 0.1  # pairwise hinge margin
    configs_per_graph: int = 64  # configs sampled per graph per step
    graphs_per_batch: int = 4
    lr: float = 1e-3
    weight_decay: float = 1e-4
    dropout: float = 0.0  # per-(config, node) dropout masks add noise between the configs being ranked
    epochs: int = 20
    patience: int = 5  # epochs without validation gain before stopping
    max_steps_per_epoch: int = 200
    heads: int = 4  # cross-config attention heads (must divide hidden)
    grad_clip: float = 1.0  # global gradient-norm clip
    eval_max_configs: int = 1000  # configs per valid graph scored for early stopping (official eval: 1000)
    predict_chunk: int = 256  # configs scored per forward pass at validation/prediction
    bf16: bool = True  # mixed precision on CUDA: bf16 where supported, else fp16 + grad scaler; CPU: fp32
    max_batch_nodes: int = 8_000  # nodes per training pass; bigger steps run in micro-batches (~3 GB)


@dataclass
class BaselineConfig:
    hidden: int = 64  # the official early-join GraphSAGE baseline, as small as in the paper's code
    layers: int = 3
    margin: float = 1.0  # TF-Ranking's pairwise hinge, as used by the official trainer
    configs_per_graph: int = 16
    lr: float = 1e-3
    epochs: int = 10
    max_steps_per_epoch: int = 200
    op_dim: int = 64  # opcode embedding width of the official EarlyJoinSAGE
    graphs_per_batch: int = 8  # the official --batch
    clip_norm: float = 0.01  # the official per-tensor gradient clip (--clip_norm)
    patience: int = 5  # epochs without validation gain before stopping
    eval_max_configs: int = 1000
    predict_chunk: int = 64  # configs per pass (the baseline holds C copies of every node's features)
    bf16: bool = True  # as gnn.bf16: mixed precision on CUDA only
    max_batch_nodes: int = 8_000  # nodes per training pass; bigger steps run as micro-batches


@dataclass
class EnsembleConfig:
    models: list[str] = field(default_factory=lambda: ["lgbm", "gnn"])
    normalize: str = "rank"  # per-graph score normalisation before averaging: "rank" or "zscore"


@dataclass
class Config:
    seed: int = 0  # every random choice derives from this
    prepare: PrepareConfig = field(default_factory=PrepareConfig)
    features: FeaturesConfig = field(default_factory=FeaturesConfig)
    lgbm: LgbmConfig = field(default_factory=LgbmConfig)
    gnn: GnnConfig = field(default_factory=GnnConfig)
    baseline: BaselineConfig = field(default_factory=BaselineConfig)
    ensemble: EnsembleConfig = field(default_factory=EnsembleConfig)
    # per-collection overrides: {"layout:xla:default": {"gnn": {"cross_config_attention": True}}}
    collections: dict[str, dict[str, Any]] = field(default_factory=dict)

    def for_collection(self, collection: str) -> Config:
        """This config with the collection's overrides applied (the overrides table dropped)."""
        base = to_dict(self)
        base.pop("collections")
        merged = _merge(base, self.collections.get(collection, {}), f"collections.{collection}")
        return from_dict(merged)


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
    return value


def _build(cls: type, data: dict[str, Any], where: str) -> Any:
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        prefix = f"{where}." if where else ""
        raise TpurankError(f"config: unknown key {prefix}{unknown[0]} (known: {', '.join(sorted(known))})")
    kwargs = {k: _coerce(v, hints[k], f"{where}.{k}" if where else k) for k, v in data.items()}
    return cls(**kwargs)


def from_dict(data: dict[str, Any]) -> Config:
    cfg = _build(Config, data, "")
    for collection, over in cfg.collections.items():
        if collection not in COLLECTIONS:
            raise TpurankError(f"config: unknown collection {collection!r} in [collections]")
        # validate the override table against the schema now, not when first used
        base = to_dict(Config())
        base.pop("collections")
        _build(Config, _merge(base, over, f"collections.{collection}"), f"collections.{collection}")
    return cfg


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


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> Config:
    """Defaults, then the TOML file (if any), then `--set` overrides; validated."""
    data: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        try:
            data = tomllib.loads(path.read_text())
        except FileNotFoundError:
            raise TpurankError(f"{path}: config file not found") from None
        except tomllib.TOMLDecodeError as e:
            raise TpurankError(f"{path}: not valid TOML ({e})") from None
    data = apply_overrides(data, overrides or [])
    return from_dict(data)
