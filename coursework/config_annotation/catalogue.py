"""The catalogue of graded fields: loaded from ``assignments/config_annotation/catalogue.yaml``.

Content is data: vocabulary, concepts and field rules live in the YAML file; this module only
loads it, checks that it is consistent, and answers questions about it (which dialect a config
is written in, which rule applies to a field with a given value, which keys are valid).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from coursework.settings import assignments_dir

DEFAULT_PATH = assignments_dir() / "config_annotation" / "catalogue.yaml"
WORD_KINDS = ("negators", "neutral", "reducers", "exclusive", "contrast", "compare")
# Keys that identify a dialect; the first dialect with a hit wins.
DIALECT_MARKERS = {
    "deepspeed": ("zero_optimization", "train_batch_size", "train_micro_batch_size_per_gpu", "zero_optimisation"),
    "llamafactory": ("fsdp", "fsdp_config", "deepspeed", "per_device_train_batch_size", "distributed_type",
                     "model_name_or_path", "finetuning_type", "num_processes"),
}


@dataclass
class Rule:
    """What an annotation of one field (with its current value) must state."""

    concept: str
    require: list[str]
    forbid: list[list[str]] = field(default_factory=list)
    elsewhere: list[str] = field(default_factory=list)
    own: list[str] = field(default_factory=list)
    hypothetical: list[str] = field(default_factory=list)  # a sentence naming one ("true would ...") claims nothing
    value: Any = None  # the field's value the rule was chosen for
    key: str = ""  # the field's path ("zero_optimization.reduce_bucket_size"), for "restates the key"


@dataclass
class Catalogue:
    """The parsed catalogue plus a compiled word matcher."""

    raw: dict[str, Any]
    path: Path

    @property
    def concepts(self) -> dict[str, Any]:
        return self.raw["concepts"]

    @property
    def groups(self) -> dict[str, list[str]]:
        return self.raw.get("groups", {})

    def fields(self, dialect: str) -> dict[str, Any]:
        return self.raw["fields"].get(dialect, {})

    def known_keys(self, dialect: str) -> set[str]:
        """Every valid key path of a dialect: graded fields, their absorbed leaves, known extras."""
        keys = set(self.raw.get("known", {}).get(dialect, []))
        for path, spec in self.fields(dialect).items():
            keys.add(path)
            keys.update(f"{path}.{leaf}" for leaf in spec.get("absorbs", []))
            parts = path.split(".")
            keys.update(".".join(parts[:i]) for i in range(1, len(parts)))
        return keys

    def rule(self, dialect: str, path: str, value: Any) -> Rule | None:
        """The rule for ``path`` given its value, or None if the field is not graded."""
        rule = self._rule(dialect, path, value)
        if rule is not None:
            rule.value, rule.key = value, path
        return rule

    def _rule(self, dialect: str, path: str, value: Any) -> Rule | None:
        spec = self.fields(dialect).get(path)
        if spec is None or spec.get("block_only"):
            return None
        concept = spec["concept"]
        c = self.concepts[concept]
        # a concept's own ``forbid`` holds for every field and value of it ("bf16 needs loss scaling")
        base = Rule(concept=concept, require=list(c.get("require", [])), forbid=list(c.get("forbid", [])),
                    elsewhere=list(spec.get("elsewhere", [])), own=list(spec.get("own", [])))
        if "by_value" in spec:
            key = value_key(value)
            if spec.get("names_stage"):
                key = deepspeed_file_key(value) or key
            picked = {value_key(k): v for k, v in spec["by_value"].items()}.get(key)
            if picked is None:
                return base
            # ``replace_forbid``: the concept's own forbids describe its other setting ("overlap saves no
            # memory" is wrong for true, right for false), so this value's list replaces them
            forbid = list(picked.get("forbid", [])) if picked.get("replace_forbid") else base.forbid + picked.get("forbid", [])
            return Rule(concept=concept, require=list(picked.get("require", base.require)),
                        forbid=forbid, elsewhere=picked.get("elsewhere", []),
                        own=picked.get("own", []), hypothetical=picked.get("hypothetical", []))
        if "by_token" in spec:
            tokens = [t for t in re.split(r"[\s,]+", str(value).lower()) if t]
            merged = Rule(concept=concept, require=[], forbid=list(base.forbid))
            for tok in tokens:
                part = spec["by_token"].get(tok)
                if part is None:
                    continue
                merged.require += part.get("require", [])
                merged.forbid += part.get("forbid", [])
                merged.elsewhere += part.get("elsewhere", [])
                merged.own += part.get("own", [])
            if not merged.require:
                merged.require = base.require
            return merged
        return base

    def field_value(self, dialect: str, path: str, value: Any) -> Any:
        """The value a rule is chosen by: ``bf16: {enabled: true}`` is judged as ``true``."""
        spec = self.fields(dialect).get(path, {})
        key = spec.get("value_from")
        if key and isinstance(value, dict):
            return value.get(key, "none" if key == "device" else None)
        return value

    def facet_words(self, facet: str, lang: str) -> list[str]:
        return list(self.raw["terms"].get(facet, {}).get(lang, [])) or [facet]

    @property
    def matcher(self) -> "WordMatcher":
        return _matcher(self.path)


# "ds_z3_config.json", "ds_z2_offload_config.json", "ds_config_zero3.json", "zero2.json"
_STAGE_IN_NAME = re.compile(r"(?:^|[^a-z0-9])(?:ds_)?z(?:ero)?[_\-]?(\d)(?![0-9])")


def deepspeed_file_stage(value: Any) -> tuple[int | None, bool]:
    """(ZeRO stage, offload) that a DeepSpeed config's file name names (LLaMA-Factory's
    ``deepspeed: examples/deepspeed/ds_z3_offload_config.json``), in any folder; stage None when the
    name names none."""
    name = re.split(r"[\\/]", str(value).strip().lower())[-1]
    m = _STAGE_IN_NAME.search(name)
    return (int(m.group(1)) if m else None), "offload" in name


def deepspeed_file_key(value: Any) -> str | None:
    """The ``by_value`` key of the config LLaMA-Factory ships for the stage a path names, wherever
    the file lives (a course copies ``examples/deepspeed/`` elsewhere): the note is judged by the
    stage the file names, not by its folder."""
    stage, offload = deepspeed_file_stage(value)
    if stage is None:
        return None
    return f"examples/deepspeed/ds_z{stage}{'_offload' if offload else ''}_config.json"


def value_key(value: Any) -> str:
    """How a value is looked up in ``by_value``: booleans as true/false, the rest lowercased."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value).strip().lower()


def detect_dialect(data: dict[str, Any]) -> str | None:
    """``deepspeed`` for a DeepSpeed JSON/YAML, ``llamafactory`` for LLaMA-Factory / accelerate
    YAML, None when no key of either is present."""
    for dialect, markers in DIALECT_MARKERS.items():
        if any(k in data for k in markers):
            return dialect
    return None


_SEPARATORS = re.compile(r"[\s\-_]+")


def _joined(word: str) -> str:
    """A word with its spaces, hyphens and underscores dropped: "brain-float", "brain float"
    and "brain_float" are one word, as are "micro-batch", "micro batch" and "microbatch"."""
    return _SEPARATORS.sub("", word)


class WordMatcher:
    """One regex over every vocabulary word; the longest word wins at each position. Spaces,
    hyphens and underscores inside a word are optional and interchangeable."""

    def __init__(self, raw: dict[str, Any]):
        kinds: dict[str, set[str]] = {}
        for facet, langs in raw["terms"].items():
            for lang in ("en", "zh"):
                for w in langs.get(lang, []):
                    kinds.setdefault(str(w).lower(), set()).add(f"facet:{facet}")
        for kind in WORD_KINDS:
            for lang in ("en", "zh"):
                for w in raw.get(kind, {}).get(lang, []):
                    kinds.setdefault(str(w).lower(), set()).add(kind)
        self.kinds: dict[str, set[str]] = {}
        for w, k in kinds.items():
            self.kinds.setdefault(_joined(w) or w, set()).update(k)
        alts = []
        for w in sorted(kinds, key=lambda w: (len(_joined(w)), len(w)), reverse=True):
            parts = [p for p in _SEPARATORS.split(w) if p] or [w]
            body = r"[\s\-_]*".join(re.escape(p) for p in parts)
            if re.fullmatch(r"[a-z0-9_][a-z0-9_\-/ .+']*", w):  # an ASCII word: whole words only
                alts.append(rf"(?<![a-z0-9_]){body}(?![a-z0-9_])")
            else:
                alts.append(body)
        self.regex = re.compile("|".join(alts))

    def find(self, text: str) -> list[tuple[int, str, set[str]]]:
        """(offset, word, kinds) for every vocabulary word in ``text`` (already lowercased)."""
        out = []
        for m in self.regex.finditer(text):
            word = re.sub(r"\s+", " ", m.group(0))
            out.append((m.start(), word, self.kinds.get(_joined(word) or word, set())))
        return out


@lru_cache(maxsize=4)
def _matcher(path: Path) -> WordMatcher:
    return WordMatcher(load(path).raw)


@lru_cache(maxsize=4)
def load(path: Path = DEFAULT_PATH) -> Catalogue:
    """Load and check the catalogue (cached per path)."""
    raw = YAML(typ="safe").load(Path(path).read_text(encoding="utf-8"))
    problems = consistency_problems(raw)
    if problems:
        raise ValueError(f"{path}: " + "; ".join(problems))
    return Catalogue(raw=raw, path=Path(path))


def _facets_of(item: str) -> list[str]:
    return [f.lstrip("~-") for alt in item.split("|") for f in alt.split("&")]


def consistency_problems(raw: dict[str, Any]) -> list[str]:
    """Every reference to an unknown facet or concept, and every concept missing zh or en."""
    facets, concepts = set(raw["terms"]), raw["concepts"]
    problems = []
    for cid, c in concepts.items():
        for key in ("name", "explain"):
            if set(c.get(key, {})) != {"zh", "en"} or not all(c[key].values()):  # a stray comma splits a flow map
                problems.append(f"concept {cid}: {key} needs zh and en")
        for item in c.get("require", []) + c.get("signature", []) + [f for g in c.get("forbid", []) for f in g]:
            problems += [f"concept {cid}: unknown facet {f}" for f in _facets_of(item) if f not in facets]
    for dialect, fields in raw["fields"].items():
        for path, spec in fields.items():
            if spec.get("concept") not in concepts:
                problems.append(f"{dialect}.{path}: unknown concept {spec.get('concept')}")
            for rules in (spec.get("by_value", {}), spec.get("by_token", {})):
                for rule in rules.values():
                    items = rule.get("require", []) + rule.get("elsewhere", []) + rule.get("own", [])
                    items += rule.get("hypothetical", [])
                    items += [f for group in rule.get("forbid", []) for f in group]
                    problems += [f"{dialect}.{path}: unknown facet {f}"
                                 for item in items for f in _facets_of(item) if f not in facets]
    for name, members in raw.get("groups", {}).items():
        problems += [f"group {name}: unknown facet {f}" for f in members if f not in facets]
    return problems
