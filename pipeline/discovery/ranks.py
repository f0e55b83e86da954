"""Ranks stated before parsing (`--rank FILE=N` options), and the one-line reason of a rank claimed twice."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from tracehouse.pipeline.discovery.locations import StoreUnavailable, location

# How a reason names the ranks a user states: the same text is stored (ingest_errors) and read by
# command-line and Python users alike, so it names the option of both.
RANK_OPTION = "--rank (Python: ranks=)"
RANK_OPTION_FORM = "--rank FILE=N (Python: ranks={FILE: N})"


def rank_claim_reason(study: str, run_id: str, rank: int, others: str) -> str:
    """The one-line reason a file fails when other files claim the same rank of its run."""
    return f"rank {rank} of run {study}/{run_id} is also claimed by {others}"


def parse_rank_options(values: Iterable[str]) -> dict[str, int]:
    """`FILE=N` strings into a mapping; raises ValueError naming the bad one."""
    ranks: dict[str, int] = {}
    for value in values:
        name, sep, number = value.rpartition("=")
        if not sep or not name or not number.strip().isdigit():
            raise ValueError(f"--rank {value!r}: expected FILE=N with N a non-negative integer")
        if ranks.get(name, int(number)) != int(number):
            raise ValueError(f"--rank {name!r} given twice, as {ranks[name]} and {int(number)}")
        ranks[name] = int(number)
    return ranks


def _named(key: str) -> Path | None:
    """The file a `--rank` key names (a local path or a store's URL); None for a store not installed."""
    try:
        return location(key)
    except StoreUnavailable:
        return None


class RankOptions:
    """`--rank FILE=N` entries, matched by path (as given or absolute) or, failing that, by file name."""

    def __init__(self, ranks: Mapping[str, int], files: list[Path]) -> None:
        self.ranks = dict(ranks)
        self.used: set[str] = set()
        names: dict[str, list[Path]] = {}
        for f in files:
            names.setdefault(f.name, []).append(f)
        self.names = names

    def rank_of(self, path: Path) -> int | None:
        for key, rank in self.ranks.items():
            if _named(key) == path or (key == path.name and len(self.names.get(key, [])) == 1):
                self.used.add(key)
                return rank
        return None

    def unused(self) -> list[tuple[str, str]]:
        return [
            (key, f"{RANK_OPTION} names no trace file being ingested")
            for key in self.ranks
            if key not in self.used
        ]
