"""Variant seeds: reproducible from (student, quiz, question, attempt), different across each of
them, and secret: an HMAC under a key derived from the service's ``SECRET_KEY``.

The quiz is part of the message: a question of the graded quiz is also in the unlimited practice
bank, and without the quiz id practice attempt 1 showed exactly graded attempt 1's numbers and
option order (with its reference answer). Now no practice attempt and no earlier graded attempt
has the seed of a graded attempt, and without the key none can be computed from another.

With a public salt anyone who has read this repository could compute every student's numbers
and reference answers offline; with the key, only the service can. The same key always gives
the same seeds, so an attempt's variants stay put across restarts and processes.
"""
from __future__ import annotations

import hashlib
import hmac

_PURPOSE = b"distgrade quiz variant seed v1"


def seed_key(secret: str | bytes) -> bytes:
    """The seed key for a service secret (a derived key, so the session key itself is never reused)."""
    raw = secret.encode() if isinstance(secret, str) else bytes(secret)
    if not raw:
        raise ValueError("variant seeds need the service secret")
    return hmac.new(raw, _PURPOSE, hashlib.sha256).digest()


def variant_seed(student: str | int, question_id: str, attempt: int, *, key: bytes, quiz: str) -> int:
    """A 31-bit seed; the same inputs and key always give the same variant.

    ``quiz`` is required (keyword): a seed without it is the one every quiz shared.
    """
    digest = hmac.new(key, f"{student}|{quiz}|{question_id}|{attempt}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF
