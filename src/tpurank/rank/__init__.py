"""Rank a user's own programs: the trained models as a cost model beside an autotuner (`tpurank rank`,
`Ranker`)."""

from tpurank.rank.ranker import Ranker
from tpurank.rank.ranking import Ranking

__all__ = ["Ranker", "Ranking"]
