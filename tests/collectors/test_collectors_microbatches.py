"""The default number of pipeline microbatches: 2 per stage, raised to a count that divides the
per-replica batch, so `--strategy pp` at any depth works with the default batch."""

from __future__ import annotations

import pytest
from tracehouse.collectors.spec import RunSpec, default_microbatches


@pytest.mark.parametrize(
    ("batch", "pp", "want"),
    [(8, 1, 2), (8, 2, 4), (8, 3, 8), (8, 4, 8), (24, 3, 6), (24, 4, 8), (12, 5, 12), (4, 4, 4), (6, 4, 6)],
)
def test_default_microbatches(batch: int, pp: int, want: int) -> None:
    got = default_microbatches(batch, pp)
    assert got == want and batch % got == 0 and got >= min(2 * pp, batch)


def brute_force(batch: int, pp: int) -> int:
    """Every count from 1 to the batch: the smallest divisor at least 2 x pp, else the batch."""
    return min((n for n in range(1, batch + 1) if batch % n == 0 and n >= 2 * pp), default=batch)


@pytest.mark.parametrize("batch", range(1, 49))
def test_default_microbatches_brute_force(batch: int) -> None:
    assert [default_microbatches(batch, pp) for pp in range(1, 9)] == [
        brute_force(batch, pp) for pp in range(1, 9)
    ]


def test_pp3_with_the_default_batch_is_accepted() -> None:
    """Before: 6 microbatches for a batch of 8 was refused ("not divisible by 6 microbatches")."""
    spec = RunSpec(study="s", model="small", strategy="pp", world_size=3, steps=5, global_batch=8, seq_len=32)
    assert (spec.pp, spec.microbatches) == (3, 8)


def test_explicit_microbatches_that_do_not_divide_are_refused() -> None:
    with pytest.raises(ValueError, match="per-replica batch 8 is not divisible by 6 microbatches"):
        RunSpec(
            study="s",
            model="small",
            strategy="pp",
            world_size=3,
            steps=3,
            global_batch=8,
            seq_len=32,
            microbatches=6,
        )
