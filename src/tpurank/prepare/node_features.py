"""Turn the 140 raw node features into model-ready ones, and the train-only rule that drops columns.

Raw values reach ~1e9 (shape sums and products), so magnitudes are log-scaled. The node's own
layout (columns 134-139) is padded with 0 in the data, which is also dimension 0; it is re-padded
with -1 beyond the node's rank. Columns constant over every train node carry nothing and are
dropped; the rule is fitted on train files only (no peeking at valid/test) and saved as JSON.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tpurank.core.atomic import write_json
from tpurank.core.errors import TpurankError
from tpurank.data.npz import NODE_FEAT_DIM

SHAPE_DIMS = slice(21, 27)  # output shape dims 0-5, padded with 0 beyond the rank
LAYOUT_COLS = slice(134, 140)  # the node's own minor-to-major layout
RULE_FILE = "node_feature_rule.json"
RULE_VERSION = 1  # bump when transform() changes, so cached outputs are rebuilt


def node_rank(raw: np.ndarray) -> np.ndarray:
    """The rank of each node's output shape: position of the last non-zero shape dim, plus one."""
    nonzero = raw[:, SHAPE_DIMS] != 0
    return np.where(nonzero, np.arange(1, 7), 0).max(axis=1, initial=0)


def transform(raw: np.ndarray) -> np.ndarray:
    """All 140 columns transformed: sign(x) * log1p(|x|), layout columns re-padded with -1.

    Args:
        raw: float32 (n, 140) node features as stored.
    """
    raw = np.asarray(raw, dtype=np.float32)
    out = np.sign(raw) * np.log1p(np.abs(raw))
    layout = raw[:, LAYOUT_COLS].copy()
    layout[np.arange(6)[None, :] >= node_rank(raw)[:, None]] = -1.0
    out[:, LAYOUT_COLS] = layout
    return out.astype(np.float32, copy=False)


def model_features(raw: np.ndarray, keep: list[int]) -> np.ndarray:
    """The model-ready features: `transform` of raw (n, 140), columns `keep` (contiguous)."""
    return np.ascontiguousarray(transform(raw)[:, keep])


@dataclass
class FeatureRule:
    """Which transformed columns a model sees; fitted on train files only.

    Args:
        keep: indices (into the 140 transformed columns) kept, ascending.
        fitted_on: number of train files the rule was fitted on (0: nothing dropped).
        train_key: fingerprint of those train files (refit when it changes).
    """

    keep: list[int]
    fitted_on: int
    train_key: str

    def apply(self, raw: np.ndarray) -> np.ndarray:
        """Model-ready features (n, len(keep)) from raw (n, 140)."""
        return model_features(raw, self.keep)

    @property
    def digest(self) -> str:
        """Short hash of what changes outputs: the kept columns and the transform's version."""
        text = json.dumps({"keep": self.keep, "version": RULE_VERSION})
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def save(self, path: Path) -> None:
        write_json(
            path,
            {
                "keep": self.keep,
                "fitted_on": self.fitted_on,
                "train_key": self.train_key,
                "version": RULE_VERSION,
            },
        )

    @classmethod
    def load(cls, path: Path) -> FeatureRule | None:
        """The saved rule, or None if absent, unreadable or made by another transform version."""
        try:
            d = json.loads(Path(path).read_text())
            if d.get("version") != RULE_VERSION:
                return None
            return cls(
                keep=[int(i) for i in d["keep"]], fitted_on=int(d["fitted_on"]), train_key=d["train_key"]
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None


def column_range(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-column (min, max) of the transformed features of one file (what fitting accumulates)."""
    t = transform(raw)
    if len(t) == 0:
        return np.full(NODE_FEAT_DIM, np.inf, np.float32), np.full(NODE_FEAT_DIM, -np.inf, np.float32)
    return t.min(axis=0), t.max(axis=0)


def fit_rule(ranges: list[tuple[np.ndarray, np.ndarray]], train_key: str) -> FeatureRule:
    """Keep every column that is not constant over all train nodes.

    Args:
        ranges: `column_range` of each train file.
        train_key: fingerprint of the train files, stored with the rule.
    """
    if not ranges:
        return FeatureRule(keep=list(range(NODE_FEAT_DIM)), fitted_on=0, train_key=train_key)
    lo = np.min([r[0] for r in ranges], axis=0)
    hi = np.max([r[1] for r in ranges], axis=0)
    keep = np.flatnonzero(hi > lo).tolist()
    if not keep:
        raise TpurankError(f"node feature rule: every column is constant over the {len(ranges)} train files")
    return FeatureRule(keep=keep, fitted_on=len(ranges), train_key=train_key)
