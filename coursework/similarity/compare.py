"""Pairs and clusters of documents that share fingerprints beyond the boilerplate.

Boilerplate is everything in the starter and the reference solution (every k-gram of them, not
only their winnowed ones) plus whatever more than ``common_fraction`` of the class wrote (MOSS's
``-m``): the idioms the chapter teaches (``DistributedSampler(dataset)``, ``sampler.set_epoch``)
are in every correct solution and prove nothing. What remains is each document's own code.

A pair is scored by how much of the own code of either side the other contains (the larger of
the two fractions: a copy padded with dead code still contains all of its source), and reported
when that is at least ``threshold``, the smaller fraction at least ``min_fraction`` and the shared
own code at least ``min_shared`` tokens (measured on the samples: disguised copies share 420-910
own tokens at fractions of 0.58-1.0; among 30 independent solutions the largest fraction, 0.64,
came with 82 shared tokens and 0.17 on the other side).
Clusters are the connected groups of reported pairs (three students who copied one source are
one cluster). Documents of earlier terms (``reference``) are compared with students only.
"""
from __future__ import annotations

import time
from array import array
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from itertools import combinations
from typing import Any, Callable, Iterable

from coursework.similarity.fingerprint import kgram_hashes, tokens_for, winnow


@dataclass
class Doc:
    """One document: ``key`` names it in the result (``sub:12``, ``ref:2025/a.py``)."""

    key: str
    text: str
    label: str = ""
    reference: bool = False  # an earlier term's submission: compared with students only


@dataclass
class Settings:
    """The knobs, overridable per assignment (``assignment.json`` ``"similarity"``)."""

    k: int = 12  # tokens per k-gram
    window: int = 6  # winnowing window: a shared run of k + window - 1 tokens is always seen
    threshold: float = 0.5  # fraction of one side's own code found in the other
    min_shared: int = 60  # own tokens shared; below this a pair proves nothing (a few idiomatic lines)
    min_fraction: float = 0.25  # ... and the other side's fraction too: a pair where one side is a
    # small, starter-like script and the other merely contains its few own lines is not reported
    common_fraction: float = 0.2  # a fingerprint in more documents than this is an idiom
    common_min: int = 10  # ... but never fewer documents than this (small classes, big clusters)
    max_pairs: int = 300  # reported pairs (the strongest), so a result row stays bounded
    max_segments: int = 60  # highlighted regions per pair

    @classmethod
    def from_dict(cls, raw: dict[str, Any] | None, kind: str = "code") -> "Settings":
        """Defaults for the kind, then the keys of ``raw`` that name a setting."""
        s = cls(k=10, window=4, min_shared=30) if kind == "annotations" else cls()
        for name, value in (raw or {}).items():
            if name in s.__dataclass_fields__ and isinstance(value, (int, float)) and not isinstance(value, bool):
                setattr(s, name, type(getattr(s, name))(value))
        return s


@dataclass
class _Prepared:
    """What is kept of a document while the class is compared: its k-gram hashes (8 bytes per
    token), its fingerprints and which tokens are its own; not its text or tokens (memory)."""

    hashes: array
    prints: set[int] = field(default_factory=set)
    own: bytearray = field(default_factory=bytearray)

    @property
    def own_tokens(self) -> int:
        return sum(self.own)


def _own_mask(hashes: list[int], excluded: set[int], k: int, n: int) -> bytearray:
    """1 for each of the ``n`` tokens that lies in no excluded k-gram: the document's own code."""
    own = bytearray(b"\x01") * n
    reach = 0
    for i, h in enumerate(hashes):
        if h in excluded:
            for t in range(max(i, reach), i + k):
                own[t] = 0
            reach = i + k
    return own


def compare(docs: Iterable[Doc], boilerplate: list[str], kind: str = "code",
            settings: Settings | None = None, reload: Callable[[str], str] | None = None) -> dict[str, Any]:
    """Compare every student document with every other (and with the reference corpus).

    ``docs`` may be a generator: each text is read once and dropped; the texts of reported pairs
    are read again through ``reload(key)`` for their regions (without it, texts are kept)."""
    s = settings or Settings()
    t0 = time.perf_counter()
    boiler: set[int] = set()
    for text in boilerplate:
        boiler.update(kgram_hashes(tokens_for(kind, text), s.k))
    prep: dict[str, _Prepared] = {}
    kept: dict[str, str] = {}
    meta: list[Doc] = []
    for d in docs:
        hashes = array("Q", kgram_hashes(tokens_for(kind, d.text), s.k))
        prep[d.key] = _Prepared(hashes, set(winnow(list(hashes), s.window)) - boiler)
        if reload is None:
            kept[d.key] = d.text
        meta.append(Doc(d.key, "", d.label, d.reference))
    docs = meta
    text_of = reload or kept.__getitem__
    students = [d for d in docs if not d.reference]
    df = Counter(h for d in students for h in prep[d.key].prints)
    limit = max(s.common_min, s.common_fraction * len(students))
    common = {h for h, c in df.items() if c > limit}
    excluded = boiler | common
    index: dict[int, list[str]] = defaultdict(list)
    for d in docs:
        p = prep[d.key]
        p.prints -= common
        p.own = _own_mask(p.hashes, excluded, s.k, len(p.hashes) + s.k - 1 if p.hashes else 0)
        for h in p.prints:
            index[h].append(d.key)
    reference = {d.key for d in docs if d.reference}
    shared: Counter[tuple[str, str]] = Counter()
    for keys in index.values():
        for a, b in combinations(keys, 2):
            if not (a in reference and b in reference):
                shared[(a, b)] += 1
    pairs = []
    for (a, b), n in shared.items():
        pa, pb = prep[a], prep[b]
        if n < 2 or n < 0.5 * s.threshold * min(len(pa.prints), len(pb.prints)):
            continue  # cheap pre-filter on winnowed prints; the exact test follows
        pair = _score(a, b, pa, pb, excluded, s)
        if pair is not None:
            pairs.append(pair)
    pairs.sort(key=lambda p: (-p["shared_tokens"], -p["score"]))
    groups = clusters(pairs)  # over every pair, before the list is cut: a cluster stays whole
    found = len(pairs)
    pairs = pairs[:s.max_pairs]
    for g in groups:
        g["pairs_total"] = len(g["pairs"])
        g["pairs"] = [n for n in g["pairs"] if n < s.max_pairs]
    _to_chars(pairs, kind, text_of, s.max_segments)
    named = {k for g in groups for k in g["members"]}
    return {
        "kind": kind, "settings": asdict(s),
        "docs": {d.key: {"label": d.label, "reference": d.reference, "own_tokens": prep[d.key].own_tokens}
                 for d in docs if d.key in named},
        "pairs": pairs, "clusters": groups,
        "stats": {"documents": len(docs), "students": len(students), "pairs_found": found,
                  "boilerplate_prints": len(boiler),
                  "common_prints": len(common), "candidates": len(shared),
                  "seconds": round(time.perf_counter() - t0, 3)},
    }


def _to_chars(pairs: list[dict], kind: str, text_of: Callable[[str], str], limit: int) -> None:
    """Token ranges to character ranges, for the reported pairs only (each text tokenized once,
    most-shared documents first, the cache dropped after)."""
    cache: dict[str, list] = {}
    for p in pairs:
        for key in (p["a"], p["b"]):
            if key not in cache:
                cache[key] = tokens_for(kind, text_of(key))
        ta, tb = cache[p["a"]], cache[p["b"]]
        p["segments"] = [[ta[i0].start, ta[i1 - 1].end, tb[j0].start, tb[j1 - 1].end]
                         for i0, i1, j0, j1 in sorted(p["segments"])[:limit] if i1 <= len(ta) and j1 <= len(tb)]


def _score(a: str, b: str, pa: _Prepared, pb: _Prepared, excluded: set[int], s: Settings) -> dict | None:
    segs = pair_segments(pa.hashes, pb.hashes, excluded, s.k)
    if not segs:
        return None
    # only own tokens count: a run of shared k-grams may start or end inside the starter's code
    tok_a = _own_in(pa.own, [(i0, i1) for i0, i1, _, _ in segs])
    tok_b = _own_in(pb.own, [(j0, j1) for _, _, j0, j1 in segs])
    frac_a = tok_a / max(pa.own_tokens, 1)
    frac_b = tok_b / max(pb.own_tokens, 1)
    score = min(1.0, max(frac_a, frac_b))
    if score < s.threshold or min(frac_a, frac_b) < s.min_fraction or min(tok_a, tok_b) < s.min_shared:
        return None
    chars = [list(seg) for seg in segs]  # token ranges until ``_to_chars``
    return {"a": a, "b": b, "score": round(score, 3), "frac_a": round(min(frac_a, 1.0), 3),
            "frac_b": round(min(frac_b, 1.0), 3), "shared_tokens": min(tok_a, tok_b), "segments": chars}


def _own_in(own: bytearray, ranges: list[tuple[int, int]]) -> int:
    """Own tokens inside the union of token ranges."""
    hit = bytearray(len(own))
    for start, end in ranges:
        hit[start:end] = own[start:end]
    return sum(hit)


def pair_segments(ha: "array | list[int]", hb: "array | list[int]", excluded: set[int], k: int) -> list[tuple[int, int, int, int]]:
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
    taken: list[tuple[int, int, int, int]] = []
    used_a: list[tuple[int, int]] = []
    used_b: list[tuple[int, int]] = []
    for i0, i1, j0, j1, _ in runs:
        # overlap is judged on the k-gram starts: two runs of one alignment split by boilerplate
        # share their last k - 1 tokens and are both kept
        a, b = (i0, i1 + 1), (j0, j1 + 1)
        if any(a[0] < e and s < a[1] for s, e in used_a) or any(b[0] < e and s < b[1] for s, e in used_b):
            continue
        taken.append((i0, i1 + k, j0, j1 + k))
        used_a.append(a)
        used_b.append(b)
    return taken


def clusters(pairs: list[dict]) -> list[dict[str, Any]]:
    """Connected groups of reported pairs, the largest (then the strongest) first."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for p in pairs:
        parent[root(p["a"])] = root(p["b"])
    groups: dict[str, dict[str, Any]] = {}
    for n, p in enumerate(pairs):
        g = groups.setdefault(root(p["a"]), {"members": set(), "pairs": [], "score": 0.0})
        g["members"].update((p["a"], p["b"]))
        g["pairs"].append(n)
        g["score"] = max(g["score"], p["score"])
    out = [{"members": sorted(g["members"]), "pairs": g["pairs"], "score": g["score"]} for g in groups.values()]
    out.sort(key=lambda g: (-len(g["members"]), -g["score"]))
    return out
