"""One home per check, found from its id: ``@CHECKS.check("sampler.disjoint")`` beside the check's code.

A grader builds a ``Context`` once and asks its registry for the finding of every id listed
in ``assignment.json``'s ``checks`` (the one list of ids); ``missing`` names ids without code
and code without an id, which a unit test keeps empty. Where a registry says what each check rests
on (``rests_on``: id -> words), every finding of that check carries it in its evidence.
"""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Context:
    """What a check may look at: the runs, the assignment's data and this host's reference speed."""

    cfg: dict[str, Any]
    run1: Any = None
    run_n: Any = None
    epochs: int = 0
    ref: dict[str, Any] | None = None
    mode: str = "cpu"
    extra: dict[str, Any] = field(default_factory=dict)


class Registry(dict):
    """check id -> function(Context) -> Finding."""

    def __init__(self) -> None:
        super().__init__()
        self.rests_on: dict[str, Any] = {}

    def check(self, check_id: str) -> Callable[[Callable], Callable]:
        def register(fn: Callable) -> Callable:
            if check_id in self:
                raise ValueError(f"two checks registered as {check_id}")

            @functools.wraps(fn)
            def sourced(ctx: Context) -> Any:
                finding = fn(ctx)
                if check_id not in self.rests_on:
                    return finding
                # a copy: some findings are shared constants
                return dataclasses.replace(finding, evidence={**finding.evidence, "rests_on": self.rests_on[check_id]})

            self[check_id] = sourced
            return fn
        return register

    def missing(self, ids: Iterable[str]) -> tuple[list[str], list[str]]:
        """(ids in assignment.json with no code, registered ids not in assignment.json)."""
        ids = list(ids)
        return [i for i in ids if i not in self], [i for i in self if i not in ids]
