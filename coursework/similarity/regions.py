"""Where two documents match: aligned segments, and the largest region they form.

A segment is a run of shared k-grams along one diagonal (token ranges ``(a0, a1, b0, b1)``).
A region is a chain of segments that follow each other on both sides with at most ``k`` own
tokens between them (and at most ``4 k`` tokens of any kind, about as many on each side): a
pasted block in which a line was changed, or which lines of the starter interrupt, is one region.
A region's size is counted in own tokens (beyond the boilerplate),
the smaller of the two sides, so a block made of the starter's lines weighs nothing.
"""
from __future__ import annotations

from array import array
from collections import defaultdict

Segment = tuple[int, int, int, int]


def own_in(own: bytearray, ranges: list[tuple[int, int]]) -> int:
    """Own tokens inside the union of token ranges."""
    hit = bytearray(len(own))
    for start, end in ranges:
        hit[start:end] = own[start:end]
    return sum(hit)


def pair_segments(ha: "array | list[int]", hb: "array | list[int]", excluded: set[int], k: int) -> list[Segment]:
    """Matched regions of two documents as token ranges ``(a0, a1, b0, b1)``: runs of shared
    k-grams along one diagonal, the longest first, none overlapping another on either side."""
    where_b: dict[int, list[int]] = defaultdict(list)
    for j, h in enumerate(hb):
        if h not in excluded and len(where_b[h]) < 4:
            where_b[h].append(j)
    matches = sorted((i - j, i, j) for i, h in enumerate(ha) if h not in excluded for j in where_b.get(h, ()))
    runs: list[list[int]] = []
    for diag, i, j in matches:
        last = runs[-1] if runs else None
        if last and last[4] == diag and i == last[1] + 1:
            last[1] = i
            last[3] = j
        else:
            runs.append([i, i, j, j, diag])
    runs.sort(key=lambda r: r[0] - r[1])  # longest first
    taken: list[Segment] = []
    used_a, used_b = bytearray(len(ha) + 1), bytearray(len(hb) + 1)  # k-gram starts already taken
    for i0, i1, j0, j1, _ in runs:
        # overlap is judged on the k-gram starts: two runs of one alignment split by boilerplate
        # share their last k - 1 tokens and are both kept
        if used_a.find(1, i0, i1 + 1) >= 0 or used_b.find(1, j0, j1 + 1) >= 0:
            continue
        taken.append((i0, i1 + k, j0, j1 + k))
        used_a[i0:i1 + 1] = b"\x01" * (i1 + 1 - i0)
        used_b[j0:j1 + 1] = b"\x01" * (j1 + 1 - j0)
    return taken


def largest_region(segs: list[Segment], own_a: bytearray, own_b: bytearray, k: int) -> tuple[int, Segment]:
    """The region with the most own tokens, as ``(own tokens, (a0, a1, b0, b1))``; (0, ...) if none."""
    best: tuple[int, Segment] = (0, (0, 0, 0, 0))
    chain: list[Segment] = []

    def close() -> None:
        nonlocal best
        if chain:
            n = min(own_in(own_a, [(c[0], c[1]) for c in chain]), own_in(own_b, [(c[2], c[3]) for c in chain]))
            if n > best[0]:
                best = (n, (chain[0][0], max(c[1] for c in chain), min(c[2] for c in chain), max(c[3] for c in chain)))

    for seg in sorted(segs):
        last = chain[-1] if chain else None
        if last and _follows(last, seg, own_a, own_b, k):
            chain.append(seg)
            continue
        close()
        chain = [seg]
    close()
    return best


def _follows(last: Segment, seg: Segment, own_a: bytearray, own_b: bytearray, k: int) -> bool:
    """Whether ``seg`` continues the block that ``last`` ends: next on both sides, with little
    between them that is the students' own (boilerplate between them does not break a block)."""
    gap_a, gap_b = seg[0] - last[1], seg[2] - last[3]
    if not (-k <= gap_a <= 4 * k and -k <= gap_b <= 4 * k and abs(gap_a - gap_b) <= k):
        return False
    return (own_in(own_a, [(last[1], seg[0])]) if gap_a > 0 else 0) <= k and \
        (own_in(own_b, [(last[3], seg[2])]) if gap_b > 0 else 0) <= k
