"""How many answers of a large review group a teacher reads before the rest settle.

A group holds answers the reader read alike; a teacher may confirm its suggestion on a random
sample and let the rest take the same decision. The sample is sized so that, if more than
``TOLERATED`` (10%) of the group would have been decided differently, the sample holds at least
one such answer with probability at least ``CONFIDENCE`` (95%): for a sample drawn with
replacement that is ``ceil(ln(1 - 0.95) / ln(1 - 0.10)) = 29`` answers, whatever the group size
(drawn without replacement, as here, the guarantee is a little stronger). Groups of up to
``READ_ALL_UP_TO`` (29) answers are read whole: a sample would be the group. The sample is drawn
from the group key, so a reload shows the same answers.
"""
from __future__ import annotations

import math
import random
from typing import Sequence, TypeVar

T = TypeVar("T")
TOLERATED = 0.10
CONFIDENCE = 0.95
SAMPLE_SIZE = math.ceil(math.log(1 - CONFIDENCE) / math.log(1 - TOLERATED))  # 29
READ_ALL_UP_TO = SAMPLE_SIZE


def sample_size(n: int) -> int:
    """Answers to read in a group of ``n`` before the rest may settle (``n`` itself for small groups)."""
    return n if n <= READ_ALL_UP_TO else SAMPLE_SIZE


def sample(items: Sequence[T], key: str) -> list[T]:
    """The answers a teacher reads for a group of ``items``: all of a small group, else a random
    ``SAMPLE_SIZE`` of them drawn from ``key`` (stable across reloads), in their listed order."""
    k = sample_size(len(items))
    if k >= len(items):
        return list(items)
    chosen = set(random.Random(key).sample(range(len(items)), k))
    return [x for i, x in enumerate(items) if i in chosen]
