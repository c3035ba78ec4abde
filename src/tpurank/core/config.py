"""The one typed configuration of a run: defaults here, overrides from a TOML file or `--set`.

Each stage reads its own section. `[collections."layout:xla:default".gnn]` style tables override
any section for one collection; the per-collection defaults (core/collection_defaults.py: the GPU
scale of each collection) give way to any key set at top level. Unknown keys, wrongly typed values and values outside the range
declared next to the field (`value(default, min=..., choices=...)`, checked by core/config_schema.py) are errors, so a typo never
silently falls back to a default and a nonsense value never trains a model. The resolved config is saved next to every output.
A Config is built from settings, and checked, by core/config_build.py.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from tpurank.core.collection_defaults import DEFAULT_COLLECTIONS
from tpurank.core.config_schema import build_checked, merge_tables, type_hints, value


@dataclass
class PrepareConfig:
    hops: int = value(
        1,
        min=-1,
        doc="k-hop neighbourhood kept around configurable nodes (1st place: 1); -1 = whole graphs (for gnn.segment_nodes)",
    )
    collapse_removed: bool = value(
        False,
        doc="replace each run of pruned nodes by one summary node, so paths between configurable nodes survive",
    )
    jobs: int = value(0, min=0, doc="worker processes; 0 = one per CPU core (none under 32 MiB of npz)")
    # the 2nd place dropped layout:xla's unet graphs as corrupted; the default drops nothing, as no
    # measurement here says it helps (our one real layout pair is unet)
    exclude: list[str] = value(
        [],
        doc='train graph IDs (`collection:name`) or names left out of training, as globs: "layout:xla:*:unet*"',
    )


@dataclass
class FeaturesConfig:
    # the cost in tau of the cap: docs/models.md, "Defaults and their evidence"
    max_configs_per_graph: int = value(
        1_000, min=0, doc="unique configs featurised per train graph (0 = all): random files hold up to 100k"
    )
    fastest_share: float = value(
        0.25,
        min=0,
        max=1,
        doc="share of that cap given to a graph's fastest configs; the rest drawn at random",
    )
    chunk_cells: int = value(
        2_000_000, min=1, doc="layout: configs x nodes featurised per numpy step (bounds memory)"
    )
    # whether convolutions and dots get their operands contraction-minor and their output feature-minor
    mxu_columns: bool = value(
        False,
        doc="layout: columns for the operand order the TPU's matrix unit (MXU) reads fastest (features/mxu.py)",
    )


@dataclass
class LgbmConfig:
    objective: str = value(
        "lambdarank", choices=("lambdarank", "rank_xendcg"), doc="LightGBM's ranking loss within each graph"
    )
    num_leaves: int = value(63, min=2, doc="leaves per tree: how much each tree can fit")
    learning_rate: float = value(0.05, above=0, doc="shrinkage of each tree: smaller needs more rounds")
    num_boost_round: int = value(1000, min=1, doc="most boosting rounds; early stopping usually ends sooner")
    early_stopping_rounds: int = value(50, min=1, doc="rounds without a better valid score before stopping")
    min_data_in_leaf: int = value(
        20, min=0, doc="fewest rows in a leaf, so a leaf does not fit one graph's noise"
    )
    feature_fraction: float = value(
        0.8, above=0, max=1, doc="share of columns each tree sees (decorrelates trees)"
    )
    bagging_fraction: float = value(
        0.8, above=0, max=1, doc="share of rows each tree sees (decorrelates trees)"
    )
    max_query_rows: int = value(
        2_000, min=1, max=10_000, doc="bigger graphs become random queries of at most this (LightGBM: 10,000)"
    )
    relevance_levels: int = value(
        31,
        min=2,
        max=31,
        doc="runtime rank within a graph mapped to 0..levels-1 (LightGBM's label limit: 31)",
    )
    label_gain: str = value(
        "linear",
        choices=("linear", "exp"),
        doc="gain of grade i: linear (i: the whole order) or exp (2^i - 1: the top)",
    )
    # layout trains on every pair as Kendall tau counts every pair (better valid tau on the demo data)
    truncation_level: int = value(
        0,
        min=0,
        doc="lambdarank: only pairs with one of a query's top N train; 0 = 64 for tile, all for layout",
    )
    threads: int = value(
        0, min=0, doc="LightGBM threads; 0 = the cores free when it starts, at most $OMP_NUM_THREADS"
    )


@dataclass
class GnnConfig:
    hidden: int = value(256, min=1, doc="width of node embeddings (1st place: hidden_channels 256,256)")
    layers: int = value(3, min=1, doc="message-passing layers, each over both edge directions")
    aggr: str = value(
        "mean",
        choices=("sum", "mean"),
        doc="neighbour aggregation; mean ranked the real layout pair better than sum (docs/models.md)",
    )
    opcode_dim: int = value(16, min=1, doc="opcode embedding width")
    config_dim: int = value(8, min=1, doc="embedding width of each of the 18 config values")
    cross_config_attention: bool = value(
        False, doc="attention across the configs of one graph before scoring, so each score sees the others"
    )
    # the evidence for auto: docs/models.md, "Defaults and their evidence"
    loss: str = value(
        "auto",
        choices=("auto", "hinge", "listmle"),
        doc="hinge (pairwise margin), listmle, or auto: ListMLE for layout, hinge for tile (each scored better)",
    )
    margin: float = value(0.1, min=0, doc="pairwise hinge margin")
    configs_per_graph: int = value(64, min=2, doc="configs sampled per graph per step")
    graphs_per_batch: int = value(4, min=1, doc="graphs per optimizer step")
    lr: float = value(
        1e-3, above=0, doc="peak AdamW learning rate (after the warm-up, before the cosine decay)"
    )
    weight_decay: float = value(1e-4, min=0, doc="AdamW weight decay")
    # the CPU profile and the demo preset train a few hundred steps, where dropout cost tau (docs/models.md):
    # they set 0
    dropout: float = value(
        0.2, min=0, below=1, doc="per-(config, node) dropout (1st place: 0.2 over ~50k steps)"
    )
    # the 1st place's 11.5k-52k at 4 graphs a step
    max_steps: int = value(
        4_000,
        min=1,
        doc="training length in optimizer steps; per-collection defaults differ, a top-level value sets all five",
    )
    time_budget_min: float = value(
        0.0,
        min=0,
        doc="a cap in minutes (0 = none); the steps it pays are planned before training; validates before stopping",
    )
    eval_every: int = value(
        0, min=0, doc="steps between validations; 0 = about one pass over the train configs, at most 200"
    )
    patience: int = value(5, min=1, doc="validations without a better score before stopping early")
    # seeds differ a lot on the xla collections, so a short run of worse scores is noise (the 1st place
    # never stopped early)
    min_train_share: float = value(
        0.5, min=0, max=1, doc="no early stop before this share of the planned steps"
    )
    heads: int = value(4, min=1, doc="attention heads, each an equal share of the width (must divide hidden)")
    # not baseline.clip_norm: that one clips each tensor on its own, as the official trainer's
    # --clip_norm does; this one clips the norm of all gradients together
    grad_clip: float = value(
        1.0,
        above=0,
        doc="clip of the norm of all gradients together, so one bad batch cannot wreck training (not per tensor)",
    )
    eval_max_configs: int = value(
        1000, min=1, doc="configs per valid graph scored where no official subset is cached (official: 1000)"
    )
    predict_chunk: int = value(256, min=1, doc="configs scored per forward pass in validation and prediction")
    bf16: bool = value(
        True, doc="mixed precision on CUDA: bf16 where supported, else fp16 with a scaler; CPU: fp32"
    )
    max_batch_nodes: int = value(
        8_000, min=1, doc="nodes per training pass; bigger steps run as micro-batches (bounds memory)"
    )
    # the memory it saves: docs/scale.md
    checkpoint_layers: bool = value(
        True, doc="recompute each layer's activations in backward: the same numbers in less memory, slower"
    )
    # a pass below it keeps its activations (8 MB a state tensor, ~0.1 GB over 3 layers at most): the
    # demo's and small graphs' passes skip the recomputation's cost; the memory it saves: docs/scale.md
    checkpoint_min_states: int = value(
        2_000_000,
        min=0,
        doc="gnn.checkpoint_layers recomputes only passes of at least this many configs x nodes x hidden states",
    )
    # Graph Segment Training (docs/models.md, "Graph Segment Training"): cut each graph into contiguous
    # segments; a step backpropagates through `segments_per_step` of them and takes the others'
    # embeddings from a table of historical ones
    segment_nodes: int = value(
        0, min=0, doc="layout: Graph Segment Training (GST) on segments of at most this many nodes (0 = off)"
    )
    segments_per_step: int = value(1, min=1, doc="segments of each graph trained (with gradients) per step")
    stale_dropout: float = value(
        0.5, min=0, below=1, doc="chance a historical segment embedding is left out (the paper's code: 0.5)"
    )
    finetune_steps: int = value(
        0, min=0, doc="steps training only the prediction head on fresh segment embeddings after GST"
    )
    history_mb: int = value(
        1024, min=1, doc="memory bound of the historical-embedding table (the oldest evicted)"
    )
    # --- the top solutions' recipe (docs/models.md, "The recipe of the top solutions")
    # per collection: 5% of its steps, the 1st place's warmup_ratio
    warmup_steps: int = value(
        400, min=0, doc="linear learning-rate warm-up, then a cosine decay over the rest of the budget"
    )
    # seed k > 0 lives in models/gnn/<collection>/seed-k/
    seeds: int = value(
        5, min=1, doc="models trained per collection (seed, seed+1, ...), averaged (1st place: 5 seeds)"
    )
    standardize: bool = value(
        True, doc="centre and scale node features with train-graph statistics (kept in the checkpoint)"
    )
    # a model trained elsewhere (e.g. on the synthetic tree) as the start: docs/models.md, "Starting from
    # another model"
    init_from: str = value(
        "", doc="a gnn model.pt whose weights start the training (same network; '' = a new one)"
    )
    # on for the default collections (core/collection_defaults.py)
    layer_attention: bool = value(
        False, doc="layout: attention across configs at every configurable node after every layer"
    )
    tile_all_configs: bool = value(
        False, doc="tile: every config of a graph in each step (configs_per_graph ignored)"
    )
    # the 5th place's per-dimension facts with the layout applied (gnn/nets/tile_inputs.py)
    tile_features: bool = value(
        False,
        doc="layout: each config's minor dims against the TPU's (8, 128) tile and its MXU operand order",
    )
    dim_features: bool = value(
        False, doc="node inputs: shape, window and padding sizes against the 128-lane tile (3rd place)"
    )


@dataclass
class BaselineConfig:
    # the official early-join GraphSAGE baseline, as small as in the paper's code
    hidden: int = value(
        64, min=1, doc="width of node embeddings of the official baseline (as in the paper's code)"
    )
    layers: int = value(3, min=1, doc="GraphSAGE layers of the official baseline")
    margin: float = value(1.0, min=0, doc="TF-Ranking's pairwise hinge margin, as in the official trainer")
    configs_per_graph: int = value(16, min=2, doc="configs sampled per graph per step")
    lr: float = value(1e-3, above=0, doc="learning rate")
    max_steps: int = value(2_000, min=1, doc="training length in optimizer steps")
    time_budget_min: float = value(
        0.0, min=0, doc="a cap in minutes (0 = none); the steps it pays are planned before training"
    )
    eval_every: int = value(
        0, min=0, doc="steps between validations; 0 = about one pass over the train configs, at most 200"
    )
    # the same setting as gnn.opcode_dim (one name for one meaning); configs and checkpoints written
    # before the rename said op_dim (RENAMED below)
    opcode_dim: int = value(
        64,
        min=1,
        doc="opcode embedding width of the official EarlyJoinSAGE (gnn.opcode_dim for the baseline)",
    )
    graphs_per_batch: int = value(8, min=1, doc="graphs per optimizer step (the official --batch)")
    # not gnn.grad_clip (the global norm): each gradient tensor clipped on its own, named after the
    # official trainer's --clip_norm, whose value and behaviour it keeps
    clip_norm: float = value(
        0.01,
        above=0,
        doc="each gradient tensor clipped to this norm on its own: the official trainer's --clip_norm, named as it",
    )
    patience: int = value(5, min=1, doc="validations without a better score before stopping early")
    min_train_share: float = value(
        0.5, min=0, max=1, doc="no early stop before this share of the planned steps"
    )
    eval_max_configs: int = value(
        1000, min=1, doc="configs per valid graph scored where no official subset is cached (official: 1000)"
    )
    predict_chunk: int = value(
        64, min=1, doc="configs scored per forward pass (the baseline holds a copy of every node per config)"
    )
    bf16: bool = value(True, doc="as gnn.bf16: mixed precision on CUDA only")
    max_batch_nodes: int = value(
        8_000, min=1, doc="nodes per training pass; bigger steps run as micro-batches (bounds memory)"
    )


# keys renamed since configs were first written, old -> new (same meaning, same values). A config a
# user writes with an old key is refused in one line naming the new one (core/config_files.py); a
# config tpurank saved (a model's sidecar, a models dataset's config.toml) reads under the new name
# (core/config_build.py `with_new_names`), so models trained before a rename keep working
RENAMED = {"baseline.op_dim": "baseline.opcode_dim"}

PROFILE_NAMES = ("cpu", "kaggle-t4", "gpu")  # core/profiles.py: configs/profile-<name>.toml


@dataclass
class EnsembleConfig:
    # the evidence for the defaults: docs/models.md, "The ensemble"
    models: list[str] = value(["lgbm", "gnn"], doc="members averaged: distinct, among lgbm, gnn and baseline")
    normalize: str = value(
        "rank",
        choices=("rank", "zscore"),
        doc="per-graph score normalisation before averaging (tile: zscore)",
    )


@dataclass
class BudgetConfig:
    # `all --budget` (tpurank.run.plan): the least it gives one seed of a neural model; a budget that
    # cannot pay it trains fewer seeds, or is refused before any work with the smallest that fits
    min_share_min: float = value(
        1.0, above=0, doc="the least minutes `all --budget` gives one seed of a neural model per collection"
    )
    # the demo preset sets one: the first run is bounded by its own budget, not the profile's hours
    default_min: float = value(
        0.0, min=0, doc="the whole run's minutes when `all` is given no --budget (0 = the profile's default)"
    )
    # need: the real data's split (tpurank.run.plan); steps: every collection the same share of its
    # step cap, each ending on its steps where the budget allows (the demo: caps it reaches)
    split: str = value(
        "need",
        choices=("need", "steps"),
        doc="neural time over collections: by the 1st place's need, or by each one's expected time to max_steps",
    )


@dataclass
class Config:
    """The whole run's config. Build it with `load_config` or `from_dict`: they resolve the per-collection
    defaults against the keys you set; `dataclasses.replace` on a section afterwards leaves the
    collections' own values (`collections`) in force wherever they exist."""

    seed: int = value(0, min=0, doc="every random choice derives from it, so a run can be repeated")
    # each configs/profile-<name>.toml sets this key
    profile: str = value(
        "gpu",
        choices=PROFILE_NAMES,
        doc="the profile these values started from (`--profile`, else picked by the device), saved with each model",
    )
    prepare: PrepareConfig = field(default_factory=PrepareConfig)
    features: FeaturesConfig = field(default_factory=FeaturesConfig)
    lgbm: LgbmConfig = field(default_factory=LgbmConfig)
    gnn: GnnConfig = field(default_factory=GnnConfig)
    baseline: BaselineConfig = field(default_factory=BaselineConfig)
    ensemble: EnsembleConfig = field(default_factory=EnsembleConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    # {"layout:xla:default": {"gnn": {"cross_config_attention": True}}}; the defaults
    # (core/collection_defaults.py) give way to a key set at top level, the user's tables do not
    collections: dict[str, dict[str, Any]] = value(
        DEFAULT_COLLECTIONS, doc="per-collection values of any key, over the per-collection defaults"
    )

    def for_collection(self, collection: str) -> Config:
        """This config with the collection's overrides applied (the overrides table dropped)."""
        base = to_dict(self)
        base.pop("collections")
        merged = merge_tables(base, self.collections.get(collection, {}), f"collections.{collection}")
        return build_checked(Config, {**merged, "collections": {}}, "")  # applied: no defaults re-added


def to_dict(cfg: Any) -> dict[str, Any]:
    """`dataclasses.asdict(cfg)` for a config's values (sections, lists, tables, scalars), without its
    deepcopy of every scalar: configs are turned into tables for each collection, sidecar and step
    key, and asdict was most of that time."""
    return _plain(cfg)


def _plain(v: Any) -> Any:
    if isinstance(v, str | int | float | type(None)):  # bool is an int
        return v
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: _plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {_plain(k): _plain(x) for k, x in v.items()}
    return copy.deepcopy(v)  # anything else (a tuple, say) as asdict copies it


def config_fields(cls: type = Config, prefix: str = "") -> dict[str, dataclasses.Field[Any]]:
    """Every key of the config ("seed", "gnn.lr", ..., "collections") and its dataclass field, in order:
    the field's metadata holds what `value()` declared (doc, range, choices)."""
    out: dict[str, dataclasses.Field[Any]] = {}
    hints = type_hints(cls)
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            out.update(config_fields(hints[f.name], f"{prefix}{f.name}."))
        else:
            out[f"{prefix}{f.name}"] = f
    return out


def field_docs() -> dict[str, str]:
    """ "section.key" (and "seed", "profile", "collections") -> its one-line doc, as `value(doc=...)` gave it."""
    return {key: f.metadata.get("doc", "") for key, f in config_fields().items()}
