"""A fitted ensemble's `weights.json`: its name and its checked reading, apart from the model's
numerics so that a report, `rank` and the models dataset read it without loading them."""

from __future__ import annotations

import json
import math
from pathlib import Path

from tpurank.core.errors import TpurankError, command

WEIGHTS_FILE = "weights.json"


def read_weights(wfile: Path) -> dict:
    """A fitted ensemble's weights.json, checked: members (known model names), one finite weight
    each, and a normalization.

    Raises:
        TpurankError: naming the file and what is wrong with it.
    """
    refit = f"refit it: {command('train --model ensemble')}"
    try:
        rec = json.loads(wfile.read_text())
    except (OSError, ValueError) as e:
        raise TpurankError(f"{wfile}: not JSON ({e}); {refit}") from None
    members = rec.get("members") if isinstance(rec, dict) else None
    weights = rec.get("weights") if isinstance(rec, dict) else None
    named = isinstance(members, list) and members and all(isinstance(m, str) and m for m in members)
    if not named or "ensemble" in members:
        raise TpurankError(f"{wfile}: 'members' must list the models it combines; {refit}")
    ok = isinstance(weights, list) and len(weights) == len(members)
    if not ok or not all(isinstance(w, int | float) and math.isfinite(w) for w in weights):
        raise TpurankError(f"{wfile}: 'weights' must hold one finite number per member; {refit}")
    if rec.get("normalize") not in ("rank", "zscore"):
        raise TpurankError(f"{wfile}: 'normalize' must be rank or zscore; {refit}")
    return rec
