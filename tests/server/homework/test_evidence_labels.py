"""Evidence keys read as words in both languages ("Idle 1", "Ratio n", "Ref t1",
"Normalised uncapped", "Allowed missing", "Verdict: wrong_concept" on Chinese pages).

The graders' source is walked for the keys they write into evidence, so a new key without a
label fails here rather than showing raw on a page.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

from server.homework import evidence_labels, readable

REPO = Path(__file__).resolve().parents[3]
EVIDENCE_NAMES = {"ev", "evidence", "nums"}


def _keys_in(tree: ast.AST) -> set[str]:
    keys: set[str] = set()

    def literal(d: ast.AST) -> set[str]:
        return {k.value for k in getattr(d, "keys", []) if isinstance(k, ast.Constant) and isinstance(k.value, str)}

    for n in ast.walk(tree):
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Dict) and any(
                isinstance(t, ast.Name) and t.id in EVIDENCE_NAMES for t in n.targets):
            keys |= literal(n.value)
        elif isinstance(n, ast.Call) and getattr(n.func, "attr", getattr(n.func, "id", "")) == "Finding" \
                and len(n.args) >= 4 and isinstance(n.args[3], ast.Dict):
            keys |= literal(n.args[3])
        elif isinstance(n, ast.keyword) and n.arg == "evidence" and isinstance(n.value, ast.Dict):
            keys |= literal(n.value)
        elif isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store) and isinstance(n.value, ast.Name) \
                and n.value.id in EVIDENCE_NAMES and isinstance(n.slice, ast.Constant):
            keys.add(n.slice.value)
        elif isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "update" \
                and isinstance(n.func.value, ast.Name) and n.func.value.id in EVIDENCE_NAMES:
            keys |= {k.arg for k in n.keywords if k.arg}
    return keys


def _outside_keys(tree: ast.AST) -> set[str]:
    """graders/evidence builds its evidence as dict literals: every key that reads like a name."""
    return {k.value for n in ast.walk(tree) if isinstance(n, ast.Dict) for k in n.keys
            if isinstance(k, ast.Constant) and isinstance(k.value, str) and re.fullmatch(r"[a-z][a-z0-9_]*", k.value)}


def grader_evidence_keys() -> set[str]:
    files = [*REPO.glob("graders/*.py"), *REPO.glob("graders/checks/*.py"), *REPO.glob("graders/config_annotation/*.py"),
             *REPO.glob("graders/ddp_speedup/*.py"), *REPO.glob("graders/fsdp_fit/*.py")]
    outside = [f for f in REPO.glob("graders/evidence/*.py") if f.name != "evaluate_model.py"]
    return set().union(*(_keys_in(ast.parse(f.read_text(encoding="utf-8"))) for f in files),
                       *(_outside_keys(ast.parse(f.read_text(encoding="utf-8"))) for f in outside))


def test_every_key_the_graders_write_has_a_label_in_both_languages():
    keys = grader_evidence_keys()
    assert {"idle_1", "ratio_n", "ref_t1", "normalised_uncapped", "allowed_missing", "verdict"} <= keys  # the walk works
    missing = sorted(k for k in keys if k not in evidence_labels.LABELS)
    assert not missing, f"add these to server/homework/evidence_labels.py LABELS: {missing}"
    for key, (zh, en, _) in evidence_labels.LABELS.items():
        assert zh and en and "_" not in zh + en, key


def test_labels_and_values_in_each_language():
    ev = {"idle_1": 0.041, "ratio_n": 0.902, "normalised_uncapped": 0.891, "allowed_missing": 64,
          "verdict": "wrong_concept", "annotation": "ZeRO-3 shards everything", "value": "cpu"}
    zh = {i.label: i for i in readable.evidence_items(ev, "zh")}
    en = {i.label: i for i in readable.evidence_items(ev, "en")}
    assert zh["1 个进程时主线程空闲的比例"].value == "4%" and en["Share of time the 1-process run sat idle"].value == "4%"
    assert zh["判定"].value == "说的是另一个概念" and en["Verdict"].value == "about a different concept"
    assert zh["你的注释"].quote and zh["字段的值"].ident  # shown as written, not translated
    assert "允许缺少的样本数" in zh and "Samples allowed to be missing" in en


def test_an_unknown_key_reads_as_words_never_raw():
    zh = readable.evidence_items({"warmup_steps_seen": 3}, "zh")[0].label
    en = readable.evidence_items({"warmup_steps_seen": 3}, "en")[0].label
    assert zh == "其他数值（warmup steps seen）" and en == "Warmup steps seen"


def test_the_kernel_log_is_named():
    assert readable.log_label("kernel", "zh") == "笔记本内核的输出"
    assert readable.log_label("kernel", "en") == "Notebook kernel output"
    assert readable.log_label("n2.rank1", "en") == "2 processes, rank 1"


PROSE_KEYS = {"what", "why", "rests_on", "gpu"}  # evidence values that are sentences a student reads


def _english_prose(tree: ast.AST) -> list[str]:
    """Evidence dict entries whose value is a bare str or f-string sentence (one language only)."""
    found = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Dict):
            for k, v in zip(n.keys, n.values):
                if isinstance(k, ast.Constant) and k.value in PROSE_KEYS and isinstance(v, (ast.Constant, ast.JoinedStr)) \
                        and (isinstance(v, ast.JoinedStr) or (isinstance(v.value, str) and " " in v.value)):
                    found.append(f"{k.value} at line {n.lineno}")
        elif isinstance(n, ast.Assign) and isinstance(n.value, ast.Dict) and any(
                isinstance(t, ast.Name) and t.id == "RESTS_ON" for t in n.targets):
            found += [f"RESTS_ON at line {n.lineno}" for v in n.value.values if isinstance(v, (ast.Constant, ast.JoinedStr))]
    return found


def test_outside_evidence_reads_in_the_pages_language():
    """The outside evidence said where it came from in English on Chinese pages: "outside",
    "inside, cross-checked", "each rank's stdout/stderr as torchrun captured it"."""
    files = [f for f in [*REPO.glob("graders/evidence/*.py"), *REPO.glob("graders/checks/*.py"),
                         *REPO.glob("graders/ddp_speedup/*.py"), *REPO.glob("graders/fsdp_fit/*.py")]
             if f.name != "evaluate_model.py"]  # the sandboxed evaluator's reasons: graders.evidence.model reads them
    prose = {f.name: got for f in files if (got := _english_prose(ast.parse(f.read_text(encoding="utf-8"))))}
    assert not prose, f"write these as coursework.report.text(zh, en): {prose}"
    from graders.evidence import SOURCE_CROSS_CHECKED, SOURCE_INSIDE, SOURCE_OUTSIDE
    for source in (SOURCE_OUTSIDE, SOURCE_CROSS_CHECKED, SOURCE_INSIDE):
        zh = readable.evidence_items({"source": source}, "zh")[0].value
        en = readable.evidence_items({"source": source}, "en")[0].value
        assert not any(c.isascii() and c.isalpha() for c in zh), zh
        assert en != source and en.startswith(source.split(",")[0].capitalize()), en
    from graders.evidence import model
    for why in ("not a dict of tensors", "unreadable: UnpicklingError", "names or shapes differ from the assignment's model"):
        assert not any(c.isascii() and c.isalpha() for c in model._unscored(why)["zh"].replace("UnpicklingError", ""))


def test_a_held_reading_is_shown_as_a_suggestion_never_as_a_verdict():
    """A homework 2 note waiting for a teacher keeps the reading in its evidence (the teacher's queue
    groups by it), but the student's page must not call it wrong: no "Verdict: contradicts itself",
    no "Wrong: gradient" beside a provisional reading, in either language. Staff see the reading as is."""
    from graders.config_annotation import core

    source = (REPO / "assignments/config_annotation/samples/wrong_reading_waits_without_trust/submission.json").read_text()
    held = [c for c in core.grade_config_text(source, "ds_config.json")
            if c.evidence.get("review") == "pending" and c.evidence.get("verdict") == "contradiction"]
    assert held, "the sample no longer has a note read as wrong and held"
    ev = held[0].evidence
    for lang, final in (("en", ("Verdict", "Wrong", "contradicts itself")), ("zh", ("判定", "说错的", "自相矛盾"))):
        shown = " | ".join(f"{i.label}: {i.value}" for i in readable.evidence_items(ev, lang))
        assert not any(word in shown for word in final), shown
        assert ("may" in shown) if lang == "en" else ("可能" in shown), shown
    staff = " | ".join(f"{i.label}: {i.value}" for i in readable.evidence_items(ev, "en", staff=True))
    assert "Verdict" in staff and "Wrong" in staff, staff
