"""Variant seeds: reproducible from (student, question, attempt), different across each of them."""
from __future__ import annotations

import hashlib


def variant_seed(student: str | int, question_id: str, attempt: int, salt: str = "distgrade") -> int:
    """A 31-bit seed; the same inputs always give the same variant."""
    digest = hashlib.sha256(f"{salt}|{student}|{question_id}|{attempt}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF
