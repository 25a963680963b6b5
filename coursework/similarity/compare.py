"""Pairs and clusters of documents that share fingerprints beyond the boilerplate.

Boilerplate is everything in the starter, the reference solution and the public patterns
(every k-gram of them, not only their winnowed ones) plus whatever more than ``common_fraction``
of the class wrote (MOSS's ``-m``): the idioms the chapter teaches (``DistributedSampler(dataset)``,
``sampler.set_epoch``) are in every correct solution and prove nothing. The class is counted in
groups, not documents: a cluster of reported pairs is one voice (``common_prints``, repeated until
the clusters settle), so twelve copies of one file neither hide nor reveal a pair of honest
students. What remains is each document's own code.

A pair is reported for any of three reasons (``reasons`` in the result):

* ``fraction``: one side's own code is at least ``threshold`` inside the other, the other side's
  at least ``min_fraction``, and at least ``min_shared`` own tokens are shared (a whole copy,
  renamed, reordered, reformatted or sprinkled with dead code);
* ``contained``: one side is at least ``contained`` inside the other and at least ``min_block``
  own tokens are shared, however much code the other side added around it (padding, judged
  from the copied side);
* ``block``: one region (``regions.largest_region``) holds at least ``min_block`` own tokens,
  however small a part of either file it is (a pasted training loop or DDP set-up).

Measured on ``assignments/ddp_speedup/similarity`` (see its README): the largest region two of
45 independent solutions share is 53 own tokens (two CNN definitions written alike), pasted
blocks hold 73-90 and a padded copy 655, hence ``min_block`` 64.
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
from coursework.similarity.regions import largest_region, own_in, pair_segments


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
    min_block: int = 64  # own tokens in one region: a pasted block, whatever the fractions
    contained: float = 0.8  # one side this much inside the other (with min_block tokens): padding
    common_fraction: float = 0.2  # a fingerprint in more groups of the class than this is an idiom
    common_min: int = 10  # ... but never fewer groups than this (small classes)
    cut_rounds: int = 3  # rounds of "count each cluster once" before the cut settles
    max_pairs: int = 300  # reported pairs (the strongest), so a result row stays bounded
    max_segments: int = 60  # highlighted regions per pair

    @classmethod
    def from_dict(cls, raw: dict[str, Any] | None, kind: str = "code") -> "Settings":
        """Defaults for the kind, then the keys of ``raw`` that name a setting."""
        s = cls(k=10, window=4, min_shared=30, min_block=80) if kind == "annotations" else cls()
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
    students = [d.key for d in docs if not d.reference]
    group = {k: k for k in students}
    common: set[int] = set()
    scored: dict[tuple[str, str], dict | None] = {}
    for rnd in range(max(1, s.cut_rounds)):
        cut = common_prints(prep, group, s)
        if rnd and cut == common:
            break
        changed, common = cut ^ common, cut
        # a pair is scored again only where the new cut touches one of its documents
        stale = {d.key for d in docs if not changed.isdisjoint(prep[d.key].hashes)}
        scored = {ab: r for ab, r in scored.items() if ab[0] not in stale and ab[1] not in stale}
        pairs, candidates = _pairs(docs, prep, boiler | common, s, scored)
        group = {k: k for k in students}
        for g in clusters(pairs):  # a cluster of copies is one voice in the next round's cut
            for k in g["members"]:
                if k in group:
                    group[k] = g["members"][0]
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
                  "common_prints": len(common), "candidates": candidates,
                  "seconds": round(time.perf_counter() - t0, 3)},
    }


def common_prints(prep: dict[str, _Prepared], group: dict[str, str], s: Settings) -> set[int]:
    """Fingerprints in more than ``max(common_min, common_fraction x groups)`` groups of students,
    where a group is a cluster of reported pairs or one student: twelve copies of one file are one
    voice, so what counts as an idiom does not depend on how many copies the class holds."""
    holders: dict[int, set[str]] = defaultdict(set)
    for key, g in group.items():
        for h in prep[key].prints:
            holders[h].add(g)
    limit = max(s.common_min, s.common_fraction * len(set(group.values())))
    return {h for h, gs in holders.items() if len(gs) > limit}


def _pairs(docs: list[Doc], prep: dict[str, _Prepared], excluded: set[int], s: Settings,
           scored: dict[tuple[str, str], dict | None]) -> tuple[list[dict], int]:
    """The reported pairs under one cut, and how many candidate pairs were looked at; ``scored``
    keeps the results of an earlier cut that are still valid (it is updated)."""
    index: dict[int, list[str]] = defaultdict(list)
    for d in docs:
        p = prep[d.key]
        p.own = _own_mask(p.hashes, excluded, s.k, len(p.hashes) + s.k - 1 if p.hashes else 0)
        for h in p.prints - excluded:
            index[h].append(d.key)
    reference = {d.key for d in docs if d.reference}
    shared: Counter[tuple[str, str]] = Counter()
    for keys in index.values():
        for a, b in combinations(keys, 2):
            if not (a in reference and b in reference):
                shared[(a, b)] += 1
    # winnowing keeps at least one print in every window of k-grams, so a block of min_block
    # tokens leaves at least this many (the pasted blocks of the corpus leave 48-67)
    block_prints = max(2, (s.min_block - s.k + 1) // s.window)
    pairs = []
    for (a, b), n in shared.items():
        pa, pb = prep[a], prep[b]
        if n < 2 or (n < 0.5 * s.threshold * min(len(pa.prints), len(pb.prints)) and n < block_prints):
            continue  # cheap pre-filter on winnowed prints; the exact test follows
        if (a, b) not in scored:
            scored[(a, b)] = _score(a, b, pa, pb, excluded, s)
        pair = scored[(a, b)]
        if pair is not None:
            pairs.append(pair)
    return pairs, len(shared)


def _to_chars(pairs: list[dict], kind: str, text_of: Callable[[str], str], limit: int) -> None:
    """Token ranges to character ranges, for the reported pairs only (each text tokenized once,
    most-shared documents first, the cache dropped after)."""
    cache: dict[str, list] = {}
    for p in pairs:
        for key in (p["a"], p["b"]):
            if key not in cache:
                cache[key] = tokens_for(kind, text_of(key))
        ta, tb = cache[p["a"]], cache[p["b"]]

        def chars(i0: int, i1: int, j0: int, j1: int) -> list[int] | None:
            if not (i0 < i1 <= len(ta) and j0 < j1 <= len(tb)):
                return None
            return [ta[i0].start, ta[i1 - 1].end, tb[j0].start, tb[j1 - 1].end]

        p["segments"] = [c for c in (chars(*seg) for seg in sorted(p["segments"])[:limit]) if c]
        p["block"]["region"] = chars(*p["block"]["region"]) or []


def _score(a: str, b: str, pa: _Prepared, pb: _Prepared, excluded: set[int], s: Settings) -> dict | None:
    segs = pair_segments(pa.hashes, pb.hashes, excluded, s.k)
    if not segs:
        return None
    # only own tokens count: a run of shared k-grams may start or end inside the starter's code
    tok_a = own_in(pa.own, [(i0, i1) for i0, i1, _, _ in segs])
    tok_b = own_in(pb.own, [(j0, j1) for _, _, j0, j1 in segs])
    frac_a = tok_a / max(pa.own_tokens, 1)
    frac_b = tok_b / max(pb.own_tokens, 1)
    score = min(1.0, max(frac_a, frac_b))
    shared = min(tok_a, tok_b)
    block_tokens, region = largest_region(segs, pa.own, pb.own, s.k)
    reasons = []
    if score >= s.threshold and min(frac_a, frac_b) >= s.min_fraction and shared >= s.min_shared:
        reasons.append("fraction")
    if score >= s.contained and shared >= s.min_block:
        reasons.append("contained")  # the copied side is inside the other, however padded that one is
    if block_tokens >= s.min_block:
        reasons.append("block")  # one pasted region, however small a part of either file
    if not reasons:
        return None
    return {"a": a, "b": b, "score": round(score, 3), "frac_a": round(min(frac_a, 1.0), 3),
            "frac_b": round(min(frac_b, 1.0), 3), "shared_tokens": shared,
            "segments": [list(seg) for seg in segs],  # token ranges until ``_to_chars``
            "reasons": reasons, "block": {"tokens": block_tokens, "region": list(region)}}


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
