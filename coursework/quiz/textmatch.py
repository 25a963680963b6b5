"""Reading short answers, shared by the quiz rubric and homework 2's annotations.

Only language structure lives here (how sentences and clauses end, what negates, which
constructions give a trade its direction: ``lexicon.json``); concept words are data in each
question folder or in homework 2's catalogue.

* ``normalise``: NFKC (full-width punctuation and letters become ASCII), lower case, one space,
  enumerations written as ``ZeRO 1/2/3`` or ``Z1-Z3`` spelled out so each stage is a subject.
* ``spell_fix``: a Latin word of 6+ letters one edit (or one swap of neighbours) away from a
  word of the vocabulary is read as that word ("paralell", "paramters"), except when only the
  last letter differs ("samples" is not "sampler").
* ``split``: sentences (``。;!?`` newline, ". ") of clauses (``,``, ``、``, but / 而 / 但 ...).
  A colon does not cut: "Throughput: data parallelism" is one claim.
* ``Term``: one synonym as a regex (spaces, hyphens, underscores optional; Latin words start at
  a word boundary and never match inside a dotted name such as ``sampler.set_epoch``).
* ``negated``: a negator shortly before the term in its clause ("not the sampler", "不是容量"),
  or right after it ("参数不切", "parameters are not sharded").
* ``trade_spans``: the parts of a clause that are given up and gained ("trades A for B",
  "用 A 换 B", "at the cost of A").
"""
from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

LEXICON_PATH = Path(__file__).with_name("lexicon.json")
_SENTENCE_SPLIT = re.compile(r"[。;!?\n]+|\.(?:\s+|$)")
_CLAUSE_SPLIT = re.compile(r"[,、]+|\s+(?:and|but|whereas|while|whilst|however|though|although|yet|so)\s+"
                           r"|而是|而|但是|但|然而|不过|却|然后|并且|同时|所以|因此")
_ENUM = re.compile(r"(?<![a-z])(zero|z|stage)[\s\-_]?([0-3])((?:\s*[/,]\s*[0-3])+)(?![0-9])")
_RANGE = re.compile(r"(?<![a-z])(z|zero)[\s\-_]?([0-3])\s*[-~到至]\s*(?:z|zero)?[\s\-_]?([0-3])(?![0-9])")
_WORD = re.compile(r"[a-z]{6,}")


@lru_cache(maxsize=1)
def lexicon() -> dict:
    return json.loads(LEXICON_PATH.read_text("utf-8"))


def normalise(text: str) -> str:
    """Lower case, ASCII punctuation, single spaces, enumerated stages spelled out."""
    text = unicodedata.normalize("NFKC", text).lower().replace("’", "'").replace("‘", "'")
    text = re.sub(r"[ \t\r\f\v]+", " ", text)

    def enum(m: re.Match[str]) -> str:
        nums = [m.group(2)] + re.findall(r"[0-3]", m.group(3))
        return " / ".join(f"{m.group(1)} {n}" for n in nums)

    def span(m: re.Match[str]) -> str:
        a, b = int(m.group(2)), int(m.group(3))
        return " / ".join(f"{m.group(1)} {n}" for n in range(a, b + 1)) if a < b else m.group(0)

    return _ENUM.sub(enum, _RANGE.sub(span, text))


def _osa_le1(a: str, b: str) -> bool:
    """Optimal string alignment distance <= 1 (one insert, delete, substitute or neighbour swap)."""
    if a == b:
        return True
    la, lb = len(a), len(b)
    if abs(la - lb) > 1:
        return False
    i = 0
    while i < min(la, lb) and a[i] == b[i]:
        i += 1
    if la == lb:
        if a[i + 1:] == b[i + 1:]:
            return True
        return i + 1 < la and a[i] == b[i + 1] and a[i + 1] == b[i] and a[i + 2:] == b[i + 2:]
    return (a[i + 1:] == b[i:]) if la > lb else (a[i:] == b[i + 1:])


@lru_cache(maxsize=256)
def _index(vocab: frozenset[str]) -> dict[str, tuple[str, ...]]:
    out: dict[str, list[str]] = {}
    for w in vocab:
        out.setdefault(w[0], []).append(w)
    return {k: tuple(sorted(v)) for k, v in out.items()}


def vocabulary(terms: list[str]) -> frozenset[str]:
    """The Latin words of 6+ letters in a list of synonyms: what typos are corrected towards."""
    return frozenset(w for t in terms for w in _WORD.findall(t.lower()))


def spell_fix(text: str, vocab: frozenset[str]) -> tuple[str, int]:
    """``text`` with near-miss Latin words replaced by vocabulary words; and how many were fixed."""
    index = _index(vocab)
    fixed = 0

    def fix(m: re.Match[str]) -> str:
        nonlocal fixed
        w = m.group(0)
        if w in vocab:
            return w
        for v in index.get(w[0], ()):
            if len(v) == len(w) and v[:-1] == w[:-1]:
                continue  # only the last letter differs: a different word (samples / sampler)
            if _osa_le1(w, v):
                if not (w.startswith(v) or v.startswith(w)):  # an inflection is no typo
                    fixed += 1
                return v
        return w

    return _WORD.sub(fix, text), fixed


@dataclass
class Clause:
    text: str
    sentence: int


def split(text: str) -> list[list[str]]:
    """Sentences as lists of clause strings (already normalised text)."""
    return [clauses for clauses, _ in split_marked(text)]


def split_marked(text: str) -> list[tuple[list[str], bool]]:
    """Sentences as (clauses, follows_semicolon): after a ";" a clause without a subject may
    still continue the previous one ("model parallel is not for speed; it is for memory")."""
    out = []
    pos = 0
    for m in list(_SENTENCE_SPLIT.finditer(text)) + [None]:
        end = m.start() if m else len(text)
        sentence = text[pos:end]
        clauses = [c.strip() for c in _CLAUSE_SPLIT.split(sentence) if c and c.strip()]
        if clauses:
            out.append((clauses, pos > 0 and text[pos - 1] == ";"))
        if m:
            pos = m.end()
    return out


class Term:
    """One synonym, compiled; ``a+b`` means every part, in any order, in the same text."""

    def __init__(self, term: str):
        self.raw = term
        texts = [p.strip() for p in normalise(term).split("+") if p.strip()]
        self.parts = [self._compile(p) for p in texts]
        # The first word of the first part, as typed: the first part matches only where this
        # string occurs, so a text without it has no hit (a plain substring test, before any regex).
        self.first_word = texts[0].split()[0] if texts else ""

    @staticmethod
    def _compile(part: str) -> re.Pattern[str]:
        words = [re.escape(w) for w in part.split()]
        body = r"[\s\-_]*".join(words)
        if part[:1].isascii() and part[:1].isalnum():
            body = r"(?<![a-z0-9_])" + body
        if part[-1:].isascii() and part[-1:].isalnum():
            body += r"(?!\.[a-z_])"  # not the start of a dotted name: sampler.set_epoch
        return re.compile(body)


@lru_cache(maxsize=8192)
def term(raw: str) -> Term:
    return Term(raw)


@lru_cache(maxsize=1)
def _negation_patterns() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str], re.Pattern[str], int, int, int]:
    lex = lexicon()
    en = sorted(lex["negators"]["en"], key=len, reverse=True)
    neg_en = re.compile(r"(?<![a-z])(?:" + "|".join(re.escape(w) for w in en if w != "n't") + r")(?![a-z])|n't")
    neg_zh = re.compile("|".join(re.escape(w) for w in lex["negators"]["zh"]))
    neutral = sorted(lex["neutral"]["en"] + lex["neutral"]["zh"], key=len, reverse=True)
    neutral_re = re.compile("|".join(re.escape(w) for w in neutral))
    post_en = re.compile(lex["post_negation_en"])
    w = lex["pre_negation_window"]
    return neg_en, neg_zh, neutral_re, post_en, w["zh"], w["en_words"], lex["post_negation_zh_window"]


def _blank_neutral(text: str) -> str:
    neutral_re = _negation_patterns()[2]
    return neutral_re.sub(lambda m: "_" * len(m.group(0)), text)


def negated_before(clause: str, start: int) -> bool:
    """A negator shortly before ``start`` in the clause ("not the sampler", "不是容量")."""
    neg_en, neg_zh, _, _, zh_win, en_words, _ = _negation_patterns()
    before = _blank_neutral(clause[:start])
    if neg_zh.search(before[-zh_win:]):
        return True
    words = re.findall(r"[a-z']+", before)[-en_words:]
    return bool(neg_en.search(" ".join(words)))


def negated_after(clause: str, end: int) -> bool:
    """A negator right after the term ("参数不切", "parameters are not sharded")."""
    _, neg_zh, _, post_en, _, _, zh_win = _negation_patterns()
    after = _blank_neutral(clause[end:])
    m = post_en.match(after)
    if m:
        rest = after[m.end():].lstrip()
        return not re.match(r"(?:need|needs|require|requires|have to|has to|matter|only|just)(?![a-z])", rest)
    return bool(neg_zh.search(after.lstrip()[:zh_win]))


@dataclass
class Hit:
    start: int
    end: int
    negated: bool


def hits(t: Term, clause: str, post: bool = True) -> list[Hit]:
    """Every mention of a term in a clause, with its polarity (``a+b``: the first part's place)."""
    if len(t.parts) == 1:
        out = []
        for m in t.parts[0].finditer(clause):
            neg = negated_before(clause, m.start()) or (post and negated_after(clause, m.end()))
            out.append(Hit(m.start(), m.end(), neg))
        return out
    found = []
    for p in t.parts:
        ms = [m for m in p.finditer(clause)]
        if not ms:
            return []
        pos = [m for m in ms if not negated_before(clause, m.start())]
        found.append((pos or ms)[0])
        if not pos:
            return [Hit(found[0].start(), found[-1].end(), True)]
    return [Hit(min(m.start() for m in found), max(m.end() for m in found), False)]


@lru_cache(maxsize=1)
def _trade_patterns() -> dict[str, list[re.Pattern[str]]]:
    return {k: [re.compile(p) for p in v] for k, v in lexicon()["trade"].items()}


def trade_spans(clause: str) -> list[tuple[int, int, str]]:
    """(start, end, "give" | "get") parts of a clause that states a trade."""
    pats = _trade_patterns()
    for p in pats["both"]:
        m = p.search(clause)
        if m and m.group("give").strip() and (m.group("get") or "").strip():
            return [(m.start("give"), m.end("give"), "give"), (m.start("get"), m.end("get"), "get")]
    out = []
    for role in ("give", "get"):
        for p in pats[role]:
            m = p.search(clause)
            if m:
                out.append((m.start(role), m.end(role), role))
                break
    return out


@lru_cache(maxsize=1)
def _hedge_pattern() -> re.Pattern[str] | None:
    """Every English hedge as a whole word, in one pattern (the lexicon does not change while a
    process runs): it matches where any single hedge's own pattern would, so one search does."""
    words = lexicon()["hedges"]["en"]
    return re.compile(r"(?<![a-z])(?:" + "|".join(re.escape(w) for w in words) + r")(?![a-z])") if words else None


def hedged(text: str) -> bool:
    """A hedge ("maybe", "可能") or a question mark in the (normalised) text."""
    pattern = _hedge_pattern()
    return bool(pattern and pattern.search(text)) or any(w in text for w in lexicon()["hedges"]["zh"]) or "?" in text


@lru_cache(maxsize=1)
def _pattern_of(key: str) -> re.Pattern[str] | None:
    """The lexicon's patterns under ``key`` (both languages) as one pattern."""
    parts = [p for lang in ("en", "zh") for p in lexicon().get(key, {}).get(lang, [])]
    return re.compile("|".join(f"(?:{p})" for p in parts)) if parts else None


def framed(text: str) -> bool:
    """Is a claim framed as false ("it is not true that ...", "说……是错的") in the (normalised)
    text? Which words the frame covers is a guess, so neither reader decides such a text alone."""
    pattern = _pattern_of("frames")
    return bool(pattern and pattern.search(text))


def analogy(text: str) -> bool:
    """Does the (normalised) text explain by an analogy ("like a jar of coins", "好比……")?"""
    pattern = _pattern_of("analogies")
    return bool(pattern and pattern.search(text))
