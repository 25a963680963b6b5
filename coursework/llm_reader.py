"""Placeholder: replaced by the language-model reader (step 3)."""
from __future__ import annotations

READER = "llm"


def from_environment():
    return None
