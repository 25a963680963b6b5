"""The grading core shared by both routes: an annotated config text -> GradeReport checks.

``grade_config_text`` is pure (no sandbox, no files): the plain-file route calls it on the
upload, the notebook route on the ``ANNOTATED_CONFIG`` cell read statically from the upload
(the sandboxed kernel never imports it: the catalogue says what a right annotation is).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from coursework import memory_calc, trust
from coursework.config_annotation import annotate, catalogue as catalogue_mod
from coursework.config_annotation.parse import ConfigSyntaxError, ParsedConfig, parse
from coursework.report import CheckResult, CheckStatus, Text, text
from graders.config_annotation import validate

ASSIGNMENT_JSON = catalogue_mod.DEFAULT_PATH.parent / "assignment.json"
STATUS = {annotate.Verdict.CORRECT: CheckStatus.PASS, annotate.Verdict.MISSING: CheckStatus.WARN}


def _fmt(tpl: Text, **kw: Any) -> Text:
    return {lang: tpl[lang].format(**{k: (v[lang] if isinstance(v, dict) and lang in v else v)
                                      for k, v in kw.items()}) for lang in ("zh", "en")}


def _check(cfg: dict, check_id: str, status: CheckStatus, key: str, points: float = 0.0,
           max_points: float | None = None, hint: str | None = None, evidence: dict | None = None,
           spec_id: str | None = None, title_kw: dict | None = None, **kw: Any) -> CheckResult:
    spec = cfg["checks"][spec_id or check_id]
    hints = spec.get("hints", {})
    return CheckResult(
        id=check_id, title=_fmt(spec["title"], **(title_kw or {})), status=status, points=round(points, 2),
        max_points=round(spec.get("points", 0) if max_points is None else max_points, 2),
        message=_fmt(spec["messages"][key], **kw),
        hint=_fmt(hints[hint], **kw) if hint and hint in hints else text("", ""), evidence=evidence or {})


def load_config(path: Path = ASSIGNMENT_JSON) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def _graded_fields(parsed: ParsedConfig, dialect: str, cat: catalogue_mod.Catalogue) -> list[tuple[str, Any, Any]]:
    """(path, value it is judged by, rule) for every field the catalogue grades, in file order."""
    out = []
    for path, f in parsed.fields.items():
        parent = parsed.fields.get(path.rsplit(".", 1)[0]) if "." in path else None
        if parent is not None and parent.line == f.line:
            continue  # a key inside a one-line block ({"device": "cpu", ...}) shares the block's note
        value = cat.field_value(dialect, path, f.value)
        rule = cat.rule(dialect, path, value)
        if rule is not None:
            out.append((path, value, rule))
    return out


def _annotation(parsed: ParsedConfig, dialect: str, path: str, cat: catalogue_mod.Catalogue) -> str:
    spec = cat.fields(dialect).get(path, {})
    parts = [parsed.annotation(path)] + [parsed.annotation(f"{path}.{leaf}") for leaf in spec.get("absorbs", [])]
    return " ".join(p for p in parts if p)


# which full marks wait for a teacher although the reading is sure of them (``fields.confirm_full_marks``);
# ``untrusted``: every field's verdict (full, partial or zero alike) whose reading has not earned trust
# for verdicts of that kind from teachers' decisions (``coursework.trust``); the worker names the
# trusted field kinds in ``TRUSTED_ENV``, and a run without it (a student's own check on the command
# line) trusts nothing
CONFIRM_POLICIES = ("none", "unweighted", "all", "untrusted")
TRUSTED_ENV = "DISTGRADE_TRUSTED_READINGS"


def trusted_fields() -> set[str]:
    """``dialect:path:kind`` where the fields' rule reading earned trust for verdicts of ``kind`` (full,
    partial, zero: ``coursework.trust.KINDS``), from the worker; else none."""
    try:
        got = json.loads(os.environ.get(TRUSTED_ENV, "[]"))
    except ValueError:
        return set()
    return {str(x) for x in got} if isinstance(got, list) else set()


def _confirms(fcfg: dict, path: str) -> bool:
    """Must full marks on ``path`` wait for a teacher? ``unweighted``: the fields without a weight
    of their own, whose reading gives three in ten wrong or half-right answers full marks on fresh
    answers (STAFF.md); ``all``: every field; ``none`` (or no setting): none."""
    policy = fcfg.get("confirm_full_marks", "none")
    if policy not in CONFIRM_POLICIES:
        raise ValueError(f"assignment.json fields.confirm_full_marks must be one of {CONFIRM_POLICIES}, not {policy!r}")
    return policy == "all" or policy == "unweighted" and path not in fcfg["weights"]


def _quoted(facet: str, words: list[str], lang: str) -> str:
    """"gradients (you wrote “grads”)": a wrong facet with the words the reading took for it."""
    if not words:
        return facet
    said = "、".join(f"“{w}”" for w in words[:3]) if lang == "zh" else ", ".join(f"“{w}”" for w in words[:3])
    return f"{facet}（读到的原话：{said}）" if lang == "zh" else f"{facet} (read in your words: {said})"


def field_checks(parsed: ParsedConfig, dialect: str, cfg: dict, cat: catalogue_mod.Catalogue) -> list[CheckResult]:
    """One ``field.<path>`` check per graded field, plus ``config.coverage``."""
    fields = _graded_fields(parsed, dialect, cat)
    fcfg = cfg["fields"]
    _confirms(fcfg, "")  # a misspelt policy fails every grading, not only those with a full-marks field
    weights = {p: fcfg["weights"].get(p, fcfg["default_weight"]) for p, _, _ in fields}
    units = max(sum(weights.values()), fcfg["min_weight"])
    unit = fcfg["points"] / units
    out = []
    trusted = trusted_fields() if fcfg.get("confirm_full_marks") == "untrusted" else set()
    shares = [round(weights[p] * unit, 2) for p, _, _ in fields]
    if shares and units == sum(weights.values()):  # the rounded shares add up to exactly the field points
        shares[-1] = round(fcfg["points"] - sum(shares[:-1]), 2)
    for (path, value, rule), max_pts in zip(fields, shares):
        line = parsed.fields[path].line
        note = _annotation(parsed, dialect, path, cat)
        j = annotate.judge(note, rule, cat)
        concept = cat.concepts[rule.concept]
        status = STATUS.get(j.verdict, CheckStatus.FAIL)
        kw = dict(path=path, line=line, value=value, concept=concept["name"], explain=concept["explain"],
                  missing={lang: "; ".join(annotate.describe_item(i, cat, lang) for i in j.missing)
                           for lang in ("zh", "en")},
                  wrong={lang: ", ".join(_quoted(cat.facet_words(f, lang)[0], j.wrong_words.get(f, []), lang)
                                         for f in j.wrong) for lang in ("zh", "en")},
                  other=cat.concepts[j.other_concept]["name"] if j.other_concept else "")
        evidence = {"line": line, "value": value, "annotation": note, "concept": rule.concept, "dialect": dialect,
                    "verdict": j.verdict.value, "missing": j.missing, "wrong": j.wrong,
                    "other_concept": j.other_concept, "confidence": j.confidence, "needs_review": j.needs_review}
        check = _check(cfg, f"field.{path}", status, j.verdict.value, points=max_pts * j.fraction,
                       max_points=max_pts, spec_id="field", title_kw={"path": path}, evidence=evidence, **kw)
        may = cfg["checks"]["field"]["messages"].get(f"may_{j.verdict.value}")
        tentative = _fmt(may, **kw) if may else None  # what a held reading says: "may be wrong", never "is"
        if j.needs_review:
            check = _held_for_review(cfg, check, "unsure", tentative)
        elif fcfg.get("confirm_full_marks") == "untrusted":
            # symmetric: a zero or a partial counts at once no more than full marks do, only where the
            # reading earned trust for verdicts of that kind on this field (``coursework.trust``)
            if j.verdict != annotate.Verdict.MISSING and f"{dialect}:{path}:{trust.kind_of(j.fraction)}" not in trusted:
                check = _held_for_review(cfg, check, "untrusted", tentative)
        elif j.verdict == annotate.Verdict.CORRECT and _confirms(fcfg, path):
            check = _held_for_review(cfg, check, "confirm")
        out.append(check)
    lost = max(0.0, fcfg["points"] - sum(c.max_points for c in out))
    n = len(fields)
    if lost > 0.05:
        out.append(_check(cfg, "config.coverage", CheckStatus.FAIL, "few", max_points=lost, n=n,
                          min=fcfg["min_weight"], lost=round(lost, 1)))
    else:
        out.append(_check(cfg, "config.coverage", CheckStatus.PASS, "ok", n=n))
    return out


def _held_for_review(cfg: dict, check: CheckResult, reason: str, tentative: Text | None = None) -> CheckResult:
    """A field the reading is unsure of (``reason`` "unsure"), whose reading earned no trust for
    verdicts of its kind ("untrusted"), or whose full marks the course has a teacher confirm
    ("confirm"), earns nothing yet: its points wait for a teacher, who sees the reading; the student
    sees the reading, said as a suggestion (``tentative``: "this note may be wrong about X"), and
    that a teacher will confirm it."""
    provisional, reading = check.points, tentative or check.message
    tpl = cfg["checks"]["field"]["messages"][{"unsure": "review", "untrusted": "untrusted"}.get(reason, "confirm")]
    check.message = {lang: tpl[lang].format(reading=reading[lang].rstrip("。."), provisional=f"{provisional:g}",
                                            max=f"{check.max_points:g}") for lang in ("zh", "en")}
    check.status, check.points = CheckStatus.WARN, 0.0
    check.evidence = {**check.evidence, "review": "pending", "provisional_points": round(provisional, 2),
                      "review_points": check.max_points, "reading": reading, "review_reason": reason}
    return check


def _findings_check(cfg: dict, check_id: str, findings: list[validate.Finding], facts: Text | None = None) -> CheckResult:
    points = cfg["checks"][check_id]["points"]
    if not findings:
        return _check(cfg, check_id, CheckStatus.PASS, "ok", points=points, facts=facts or text("", ""))
    fails = [f for f in findings if f.severity == "fail"]
    items = {lang: " ".join(f.message[lang] for f in findings) for lang in ("zh", "en")}
    # each failing finding costs a third of the check, warnings cost nothing
    earned = max(0.0, points * (1 - len(fails) / 3))
    status = CheckStatus.FAIL if fails else CheckStatus.WARN
    return _check(cfg, check_id, status, "problems", points=earned, hint="problems", count=len(findings),
                  items=items, facts=facts or text("", ""),
                  evidence={"findings": [{"path": f.path, "code": f.code, "severity": f.severity} for f in findings]})


def _deepspeed_file_stage(data: dict) -> dict:
    """LLaMA-Factory names the JSON it uses (``ds_z3_offload_config.json``): read stage and offload
    the way the notes on it are judged (``catalogue.deepspeed_file_stage``)."""
    stage, offload = catalogue_mod.deepspeed_file_stage(data.get("deepspeed", ""))
    return {"stage": stage or 0, "offload": offload}


def memory_check(parsed: ParsedConfig, dialect: str, cfg: dict) -> CheckResult:
    """The shared calculator's per-card estimate for the assignment's model size."""
    mem = cfg["memory"]
    params, cards = float(mem["params"]), int(mem["cards"])
    setup = validate.memory_setup(parsed, dialect, params, cards)
    if dialect == "llamafactory" and parsed.data.get("deepspeed"):
        ds = _deepspeed_file_stage(parsed.data)
        setup = memory_calc.TrainingSetup(params=params, cards=cards, precision=setup.precision, stage=ds["stage"],
                                          offload_optimizer=ds["offload"] and ds["stage"] >= 1,
                                          offload_params=ds["offload"] and ds["stage"] == 3)
    est = memory_calc.estimate(setup)
    full = memory_calc.full_training_bytes(params, setup.precision) / memory_calc.GB
    cpu = _fmt(cfg["checks"]["memory.per_card"]["messages"]["cpu"], cpu_gb=f"{est.cpu_bytes / memory_calc.GB:.1f}") \
        if est.cpu_bytes else text("", "")
    return _check(cfg, "memory.per_card", CheckStatus.INFO, "info", label=mem["label"], cards=cards,
                  gb=f"{est.total_gb:.1f}", full=f"{full:.0f}", formula={"zh": est.formula["zh"], "en": est.formula["en"]},
                  cpu=cpu, evidence=est.to_dict())


def grade_parsed(parsed: ParsedConfig, cfg: dict, cat: catalogue_mod.Catalogue | None = None) -> list[CheckResult]:
    """Every check for a parsed config (``config.parse`` first)."""
    cat = cat or catalogue_mod.load()
    if not isinstance(parsed.data, dict) or not parsed.data:
        return [_check(cfg, "config.parse", CheckStatus.FAIL, "not_mapping")] + _zero_rest(cfg)
    dialect = catalogue_mod.detect_dialect(parsed.data)
    if dialect is None:
        return [_check(cfg, "config.parse", CheckStatus.FAIL, "not_config",
                       evidence={"keys": list(parsed.data)[:20]})] + _zero_rest(cfg)
    annotated = sum(1 for f in parsed.fields.values() if f.comment)
    out = [_check(cfg, "config.parse", CheckStatus.PASS, "ok", points=cfg["checks"]["config.parse"]["points"],
                  n=len(parsed.fields), dialect=dialect, fmt=parsed.format.upper(), annotated=annotated,
                  evidence={"dialect": dialect, "format": parsed.format})]
    out.append(_findings_check(cfg, "config.schema", validate.schema_findings(parsed, dialect, cat)))
    rules, facts = validate.rule_findings(parsed, dialect)
    fact_text = text(f" 按 batch 推算用了 {facts['world_size']} 张卡。", f" The batch sizes imply {facts['world_size']} cards.") \
        if "world_size" in facts else None
    out.append(_findings_check(cfg, "config.rules", rules, fact_text))
    out += field_checks(parsed, dialect, cfg, cat)
    out.append(memory_check(parsed, dialect, cfg))
    return out


def _zero_rest(cfg: dict) -> list[CheckResult]:
    """A file that is not a config earns nothing else, but the maximum stays visible."""
    return [CheckResult(id=cid, title=cfg["checks"][cid]["title"], status=CheckStatus.SKIP,
                        max_points=cfg["checks"][cid]["points"] if cid != "config.coverage" else cfg["fields"]["points"])
            for cid in ("config.schema", "config.rules", "config.coverage")]


def grade_config_text(source: str, filename: str, cfg: dict | None = None) -> list[CheckResult]:
    """Parse and grade one annotated config; raises ConfigSyntaxError when it cannot be read."""
    return grade_parsed(parse(source, filename), cfg or load_config())


def guess_filename(source: str) -> str:
    """A config pasted into a notebook has no name: JSON if it starts with ``{``, else YAML."""
    body = "\n".join(line for line in source.splitlines() if not line.strip().startswith(("//", "#")))
    return "config.json" if body.lstrip().startswith("{") else "config.yaml"


def annotation_checks(source: str) -> list[CheckResult]:
    """The core's checks for a config pasted into the notebook (``config.parse`` fails if unreadable)."""
    cfg = load_config()
    try:
        return grade_config_text(source, guess_filename(source), cfg)
    except ConfigSyntaxError as e:
        where = f" (line {e.line})" if e.line else ""
        return [CheckResult(id="config.parse", title=cfg["checks"]["config.parse"]["title"], status=CheckStatus.FAIL,
                            max_points=cfg["checks"]["config.parse"]["points"],
                            message=text(f"配置无法解析{where}：{e}", f"The config cannot be parsed{where}: {e}"))
                ] + _zero_rest(cfg)


def annotation_points(source: str, max_points: float) -> float:
    """The annotated config's share of ``max_points``: the notebook's ``test_annotated`` points."""
    return annotation_score(source, max_points)[0]


def annotation_score(source: str, max_points: float) -> tuple[float, dict[str, float], dict[str, float]]:
    """(points, waiting, provisional): the annotated config's share of ``max_points`` and, for each
    field whose reading waits for a teacher (``field.<path>``, on the same scale), the points a
    teacher can still give and the reading's suggestion (counted where the course counts
    unconfirmed verdicts, ``server.scores.provisional_fields``)."""
    checks = annotation_checks(source)
    total = sum(c.max_points for c in checks)
    if not total:
        return 0.0, {}, {}
    exact = max_points * sum(c.points for c in checks) / total
    # each waiting share is the difference of rounded running sums, so the points and everything a
    # teacher can still add never round to more than ``max_points`` (30 fields of 1.33 did: 40.03)
    waiting, running, shown = {}, exact, round(exact, 2)
    for c in checks:
        if c.evidence.get("review") == "pending":
            running += max_points * c.evidence["review_points"] / total
            waiting[c.id] = round(round(running, 2) - shown, 2)
            shown = round(running, 2)
    provisional = {c.id: round(max_points * float(c.evidence.get("provisional_points") or 0.0) / total, 2)
                   for c in checks if c.id in waiting}
    return round(exact, 2), waiting, provisional
