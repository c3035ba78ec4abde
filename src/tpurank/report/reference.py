"""Kaggle leaderboard results on the REAL TpuGraphs data: the validation report's "Reference" block.

They are kept apart from the report's own table on purpose: they are test-set scores of other
people's models on the real data, where ours are validation scores (often on synthetic data).
Only what the public write-ups state is given (the competition's top solutions and the TpuGraphs
paper): an overall private-leaderboard score for the 1st place and a mean layout tau for
the official baseline. No per-collection breakdown is stated, so none is shown.
"""

from __future__ import annotations

from dataclasses import dataclass

LEADERBOARD = "https://www.kaggle.com/competitions/predict-ai-model-runtime/leaderboard"
FIRST_PLACE_CODE = "https://github.com/thanhhau097/google_fast_or_slow"
BASELINE_CODE = "https://github.com/google-research-datasets/tpu_graphs"
PAPER = "https://arxiv.org/abs/2308.13490"


@dataclass(frozen=True)
class Reference:
    """One stated result.

    Args:
        who: whose model.
        score: the score as the write-up states it (text: "about 0.30" keeps its vagueness).
        what: what the score measures.
        source: where it comes from (markdown links).
        overall: the score as a number when it is on the scale of our `overall` column, else None.
    """

    who: str
    score: str
    what: str
    source: str
    overall: float | None = None


_FIRST = (
    f"the 1st place's write-up and the [leaderboard]({LEADERBOARD}); solution code: "
    f"[{FIRST_PLACE_CODE.removeprefix('https://')}]({FIRST_PLACE_CODE})"
)
REFERENCES: tuple[Reference, ...] = (
    Reference(
        "1st place, best ensemble",
        "0.736",
        "private leaderboard, mean of the five collections",
        _FIRST,
        overall=0.736,
    ),
    Reference(
        "1st place, best single model",
        "0.714",
        "private leaderboard, mean of the five collections",
        _FIRST,
        overall=0.714,
    ),
    Reference(
        "official baseline",
        "about 0.30",
        "mean Kendall tau of the four layout collections (no tile or overall score stated)",
        f"[TpuGraphs paper]({PAPER}); code: [{BASELINE_CODE.removeprefix('https://')}]({BASELINE_CODE})",
    ),
)
TITLE = "## Reference: Kaggle leaderboard scores on the REAL data (not ours)"


def markdown(synthetic: bool) -> list[str]:
    """The report's Reference block: a heading, why it is not comparable, and one row per result.

    Args:
        synthetic: the report's own scores are on synthetic data (said again in the note).
    """
    ours = (
        "Our scores above are on SYNTHETIC data: they cannot be compared with these at all."
        if synthetic
        else "Our scores above are on the validation split, these on Kaggle's hidden test set: "
        "the same kind of score, never the same graphs."
    )
    lines = [
        TITLE,
        "",
        "Scores other teams reached on the real TpuGraphs data, as their public write-ups state them. "
        + ours,
        "",
        "| result | score | what the score is | source |",
        "|---|---|---|---|",
    ]
    lines += [f"| {r.who} | {r.score} | {r.what} | {r.source} |" for r in REFERENCES]
    return lines
