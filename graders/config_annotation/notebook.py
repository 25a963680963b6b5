"""The notebook route: ``nbgrader autograde`` through its Python API, kernel in the sandbox.

Pipeline for one upload (each step small and in order):

1. ``course_dir``   a throw-away nbgrader course in the job folder: the source notebook,
                    ``generate_assignment`` (gradebook + checksums), the upload as the
                    student's submission;
2. ``autograde``    nbgrader restores locked/test cells from the source (a tampered test cell
                    is overwritten), runs the notebook with the kernel inside the sandbox under
                    the outer wall-clock limit, and saves scores to its gradebook;
3. ``read_grades``  every grade cell from the gradebook, autograded and manual;
4. checks           the kernel never sees the answer key: its test cells only check each
                    answer's format (nbgrader gives full points when they pass). Each autograded
                    cell counts the score of the answer read statically from the upload
                    (``answers.py``) when the run's format check passed, zero when it failed;
                    a format check that passed for an answer malformed as written is reported
                    as tampering. A kernel killed by the wall clock counts zero for all of them;
                    manual cells are listed with their max points for the instructor
                    (``report.plots["manual_cells"]``). Part C (``test_annotated``) whose only
                    shortfall is annotations waiting for a teacher is WARN, not FAIL
                    (``evidence.waiting``; a decision is settled there by ``merge_manual_scores``).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from coursework import settings
from coursework.assignments import Assignment
from coursework.report import CheckResult, CheckStatus, GradeReport, text, waiting_verdict
from graders.config_annotation import answers, core, release
from graders.exceptions import SandboxSetupError
from graders.sandbox import credentials

STUDENT = "student"
KERNEL_NAME = "distgrade-sandbox"


def _limits(assignment: Assignment, mode: str) -> dict[str, Any]:
    limits = dict(assignment.limits.get(mode, assignment.limits.get("cpu", {})))
    limits.update(json.loads(os.environ.get("DISTGRADE_LIMITS", "{}") or "{}"))
    limits.setdefault("address_space", False)  # ipykernel maps more than it uses; the cgroup caps memory
    return limits


def _kernelspec(job: Path) -> Path:
    """A kernelspec whose argv is the sandboxed launcher, on a private JUPYTER_PATH."""
    root = job / "jupyter"
    spec = root / "kernels" / KERNEL_NAME
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "graders.config_annotation.kernel_sandbox", "-f", "{connection_file}"],
        "display_name": "Python 3 (distgrade sandbox)", "language": "python", "interrupt_mode": "signal"}))
    return root


def _template(assignment: Assignment, name: str) -> Path:
    """A generated course (gradebook + release), built once per source notebook and nbgrader version.

    ``generate_assignment`` takes tens of seconds; every job copies this folder instead."""
    import nbgrader

    src = (assignment.path / "source" / name / f"{name}.ipynb").read_bytes()
    digest = hashlib.sha256(src + nbgrader.__version__.encode()).hexdigest()[:16]
    cache = settings.var_dir() / "nbgrader" / f"{name}-{digest}"
    if not (cache / "gradebook.db").is_file():
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=cache.parent))
        release.generate(tmp)
        try:
            os.rename(tmp, cache)
        except OSError:  # another worker finished first: theirs is identical
            shutil.rmtree(tmp, ignore_errors=True)
    return cache


def course_dir(assignment: Assignment, job: Path, upload: Path) -> tuple[Path, str]:
    """The job's nbgrader course folder: the generated template plus the upload as the submission."""
    name = assignment.raw["notebook"]["name"]
    root = job / "course"
    shutil.copytree(_template(assignment, name), root)
    dest = root / "submitted" / STUDENT / name
    dest.mkdir(parents=True)
    shutil.copyfile(upload, dest / f"{name}.ipynb")
    return root, name


def autograde(root: Path, name: str, job: Path, limits: dict[str, Any], cell_timeout: int) -> dict[str, Any]:
    """Run nbgrader's autograde with the sandboxed kernel; returns nbgrader's result plus the kernel's."""
    from nbgrader.apps import NbGraderAPI

    runtime = job / "runtime"
    runtime.mkdir(mode=0o777)
    kernel_result = job / "kernel_result.json"
    env = {"JUPYTER_PATH": str(_kernelspec(job)), "JUPYTER_RUNTIME_DIR": str(runtime),
           "DISTGRADE_NB_WORKDIR": str(job / "kernel"), "DISTGRADE_NB_RESULT": str(kernel_result),
           "DISTGRADE_NB_LIMITS": json.dumps(limits), **credentials.child_env(credentials.pinned())}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    c = release.nbgrader_config(root)
    c.Execute.kernel_name = KERNEL_NAME
    # the outer wall clock (sandbox) decides; a per-cell timeout below it would let a loop after a
    # passing answer keep that answer's points
    c.Execute.timeout = cell_timeout
    c.Execute.interrupt_on_timeout = False
    c.Execute.startup_timeout = 60
    c.KernelManager.transport = "ipc"
    c.KernelManager.ip = str(runtime / "kernel-ipc")  # absolute: the default is relative to each side's cwd
    try:
        result = NbGraderAPI(config=c).autograde(name, STUDENT)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    result["kernel"] = json.loads(kernel_result.read_text()) if kernel_result.is_file() else None
    if result["kernel"] and result["kernel"].get("setup_error"):  # not the student's doing: retried
        raise SandboxSetupError(result["kernel"]["setup_error"])
    return result


def read_grades(root: Path, name: str) -> list[dict[str, Any]]:
    """Every grade cell of the submission as nbgrader's gradebook holds it."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        try:
            sub = gb.find_submission_notebook(name, name, STUDENT)
        except MissingEntry:
            return []
        return [{"cell_id": g.name, "auto_score": g.auto_score, "manual_score": g.manual_score,
                 "score": g.score, "max_points": g.max_score, "cell_type": g.cell.cell_type,
                 "needs_manual_grade": g.needs_manual_grade} for g in sub.grades]


def _cells_by_id(nb: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c.get("metadata", {}).get("nbgrader", {}).get("grade_id"): c for c in nb.get("cells", [])
            if c.get("metadata", {}).get("nbgrader", {}).get("grade_id")}


def _source(cell: dict[str, Any] | None) -> str:
    if not cell:
        return ""
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def static_answers(nb: dict[str, Any], names: dict[str, str]) -> dict[str, tuple[bool, Any]]:
    """grade_id -> (found, literal value) for each answer cell, read without running anything."""
    cells = _cells_by_id(nb)
    out = {}
    for gid, var in names.items():
        found = answers.literal_assignment(_source(cells.get(gid)), var)
        if not found[0]:  # answered in a cell of their own: the last assignment runs last
            for cell in nb.get("cells", []):
                if cell.get("cell_type") == "code":
                    hit = answers.literal_assignment(_source(cell), var)
                    found = hit if hit[0] else found
        out[gid] = found
    return out


def _fmt(tpl: dict[str, str], **kw: Any) -> dict[str, str]:
    return {lang: tpl[lang].format(**kw) for lang in ("zh", "en")}


def grade_notebook(assignment: Assignment, job: Path, upload: Path, mode: str) -> GradeReport:
    """Autograde the uploaded notebook; see the module docstring."""
    from coursework.config_annotation.upload import check_notebook

    release.ensure_tools_on_path()  # nbgrader's Gradebook runs `alembic` by name, template cached or not
    cfg, nbcfg = assignment.raw, assignment.raw["notebook"]
    checks_cfg = cfg["checks"]
    report = GradeReport(assignment=assignment.id, mode=mode)
    nb = check_notebook(upload.read_text(encoding="utf-8-sig"))
    limits = _limits(assignment, mode)
    root, name = course_dir(assignment, job, upload)
    result = autograde(root, name, job, limits, int(nbcfg["cell_timeout_s"]))
    kernel = result.get("kernel") or {}
    report.sandbox = {k: kernel.get(k) for k in ("layers", "degraded", "wall_s", "killed_reason")}
    killed = kernel.get("timed_out") or kernel.get("killed_reason") or kernel.get("oom_killed")
    ex = checks_cfg["notebook.execute"]
    if kernel.get("timed_out"):
        msg = _fmt(ex["messages"]["timeout"], limit=limits.get("wall_s"))
    elif killed:
        msg = _fmt(ex["messages"]["killed"], reason=kernel.get("killed_reason") or "oom")
    elif not result.get("success"):
        msg = _fmt(ex["messages"]["failed"], reason=(result.get("error") or "")[-300:])
    else:
        msg = _fmt(ex["messages"]["ok"], wall=kernel.get("wall_s", "?"))
    ran = result.get("success") and not killed
    report.add(CheckResult(id="notebook.execute", title=ex["title"], status=CheckStatus.PASS if ran else CheckStatus.FAIL,
                           message=msg, evidence={"nbgrader_log_tail": (result.get("log") or "")[-3000:]}))
    report.logs["kernel"] = kernel.get("stderr_tail", "")
    source_cells = _cells_by_id(json.loads((assignment.path / "source" / name / f"{name}.ipynb").read_text()))
    check_points_match_total(source_cells, cfg)
    statics = static_answers(nb, {gid: nbcfg["answers"][gid] for gid in nbcfg["answers"]})
    for check in autograded_checks(checks_cfg["nb"], nbcfg, root, name, ran, statics, source_cells):
        report.add(check)
    found, config_text = statics["annotated"]
    if found and isinstance(config_text, str):
        part_c = report.check(f"nb.{_annotated_test(nbcfg)}")
        cell_points = float(source_cells[_annotated_test(nbcfg)]["metadata"]["nbgrader"]["points"])
        for c in annotation_feedback(core.annotation_checks(config_text), cell_points,
                                     counted=part_c is not None and "static_points" in part_c.evidence):
            report.add(c)
    manual = manual_cells(nb, source_cells)
    report.plots["manual_cells"] = manual
    for m in manual:
        report.add(CheckResult(id=f"manual.{m['cell_id']}", title=_fmt(checks_cfg["manual"]["title"], cell=m["cell_id"]),
                               status=CheckStatus.SKIP, max_points=m["max_points"],
                               message=_fmt(checks_cfg["manual"]["messages"]["pending"], max=m["max_points"]),
                               evidence={"manual_cells": [m]}))
    return report


def annotation_feedback(core_checks: list[CheckResult], cell_points: float, counted: bool) -> list[CheckResult]:
    """The core's field-by-field checks as feedback under part C, which holds their points.

    A field waiting for a teacher keeps waiting on part C's scale (a decision is added there,
    see ``merge_manual_scores``), but only when part C counted the written answer: when the run
    gave part C nothing (kernel killed, format check failed in the run), no decision may add
    points behind it, so the field shows what the reading found and waits for no one. A counted
    field also carries its share of part C (``counted_points`` of ``counted_max``): a student may
    ask a teacher about it, and the decision replaces that share."""
    scale = cell_points / (sum(c.max_points for c in core_checks) or 1.0)
    for c in core_checks:
        c.evidence = {**c.evidence, "counted_in": "nb.test_annotated", "points_in_core": c.points}
        if counted and c.id.startswith("field."):
            # what the field holds of part C: a decision on a field the student asked about replaces it
            c.evidence.update(counted_points=round(c.points * scale, 2), counted_max=round(c.max_points * scale, 2))
        if c.evidence.get("review") == "pending":
            if counted:
                c.evidence["review_points"] = round(c.evidence["review_points"] * scale, 2)
                c.evidence["provisional_points"] = round(c.evidence["provisional_points"] * scale, 2)
            else:
                c.evidence["review"] = "not_counted"
                c.message = c.evidence.get("reading") or c.message
        c.points, c.max_points = 0.0, 0.0
    return core_checks


def _annotated_test(nbcfg: dict[str, Any]) -> str:
    """The test cell whose points the annotated config earns."""
    return next(t for t, a in nbcfg["test_cells"].items() if a == "annotated")


def notebook_points(source_cells: dict[str, dict[str, Any]]) -> float:
    """What the source notebook's graded cells (autograded and manual) add up to."""
    return round(sum(float(c["metadata"]["nbgrader"].get("points") or 0) for c in source_cells.values()
                     if c.get("metadata", {}).get("nbgrader", {}).get("grade")), 4)


def check_points_match_total(source_cells: dict[str, dict[str, Any]], cfg: dict[str, Any]) -> None:
    """Fail closed: a notebook whose cells add up to anything but the assignment's
    ``total_points`` would report a score on another scale than the gradebook's."""
    total = cfg.get("total_points")
    got = notebook_points(source_cells)
    if total is None or abs(got - float(total)) > 1e-6:
        raise ValueError(f"the notebook's graded cells add up to {got:g} points, the assignment's total_points is {total}")


def autograded_checks(spec: dict, nbcfg: dict, root: Path, name: str, ran: bool,
                      statics: dict[str, tuple[bool, Any]], source_cells: dict[str, dict[str, Any]]) -> list[CheckResult]:
    """One ``nb.<test cell>`` check per autograded cell (see ``_autograded_check``)."""
    by_cell = {g["cell_id"]: g for g in read_grades(root, name)} if ran else {}
    errors = cell_errors(root, name) if ran else {}
    menu = answers.literal_assignment(_source(source_cells[nbcfg["menu"]["cell"]]), nbcfg["menu"]["var"])[1]
    out = []
    for test_id, answer_id in nbcfg["test_cells"].items():
        max_pts = float(source_cells[test_id]["metadata"]["nbgrader"]["points"])
        found, value = statics[answer_id]
        problem = answers.format_problem(answer_id, value, menu) if found else ("not_literal", {})
        grade = by_cell.get(test_id)
        out.append(_autograded_check(
            spec, test_id, max_pts, nb_score=grade.get("auto_score") if grade else None, ran=ran,
            problem=(problem[0], {"var": nbcfg["answers"][answer_id], **problem[1]}) if problem else None,
            scored=None if problem else _static_score(answer_id, value, max_pts), kernel_error=errors.get(test_id)))
    return out


def cell_errors(root: Path, name: str) -> dict[str, str]:
    """grade_id -> the error a cell raised in the run (``AssertionError: ...``), from the notebook
    nbgrader's autograde wrote back with the kernel's outputs."""
    path = root / "autograded" / STUDENT / name / f"{name}.ipynb"
    if not path.is_file():
        return {}
    out = {}
    for gid, cell in _cells_by_id(json.loads(path.read_text(encoding="utf-8"))).items():
        for o in cell.get("outputs", []):
            if o.get("output_type") == "error":
                out[gid] = _short(f"{o.get('ename')}: {o.get('evalue')}")
    return out


def _short(value: Any, limit: int = 300) -> str:
    """A fact for a message: dicts as ``key: value`` pairs, cut at ``limit`` characters."""
    if isinstance(value, dict):
        s = ", ".join(f"{k}: {v!r}" for k, v in value.items())
    elif isinstance(value, list):
        s = ", ".join(repr(v) for v in value)
    else:
        s = str(value)
    return s if len(s) <= limit else s[:limit - 1] + "…"


def _static_score(answer_id: str, value: Any, max_pts: float) -> tuple[float, dict[str, Any]]:
    """The points of a well-formed answer as written, and what was right and wrong in it."""
    scorer = {"mapping": answers.grade_mapping, "scenario": answers.grade_scenario}.get(answer_id)
    if scorer:
        s = scorer(value, max_pts)
        return s.points, s.details
    points, waiting, provisional = core.annotation_score(value, max_pts)
    return points, ({"waiting": waiting, "provisional": provisional} if waiting else {})


def _autograded_check(spec: dict, test_id: str, max_pts: float, *, nb_score: float | None, ran: bool,
                      problem: tuple[str, dict[str, Any]] | None, scored: tuple[float, dict[str, Any]] | None,
                      kernel_error: str | None) -> CheckResult:
    """One test cell: the static score when the run's format check passed, else zero and why.

    ``problem`` is what is malformed in the answer as written (None when well-formed, and then
    ``scored`` holds its static points); ``kernel_error`` is what the test cell raised in the run."""
    title = _fmt(spec["title"], cell=test_id)
    evidence: dict[str, Any] = {"nbgrader_points": nb_score, "format_problem": problem[0] if problem else None}
    if kernel_error:
        evidence["kernel_error"] = kernel_error
    if not ran or nb_score is None:
        return CheckResult(id=f"nb.{test_id}", title=title, status=CheckStatus.FAIL, max_points=max_pts,
                           message=_fmt(spec["messages"]["not_run"]), evidence=evidence)
    passed = float(nb_score) >= max_pts - 0.01  # a format check gives all its points or none
    if not passed or problem:
        # passed in the run yet malformed as written: the kernel was fooled (a check redefined,
        # the answer replaced at run time), and only the written answer counts
        key = "tampered" if passed else "malformed"
        if problem:
            detail = _fmt(spec["formats"][problem[0]], **{k: _short(v) for k, v in problem[1].items()})
        else:
            detail = _fmt(spec["formats"]["run_failed"],
                          error=kernel_error or f"nbgrader gave {float(nb_score):g}/{max_pts:g}")
        return CheckResult(id=f"nb.{test_id}", title=title, status=CheckStatus.FAIL, max_points=max_pts,
                           message={lang: spec["messages"][key][lang].format(detail=detail[lang])
                                    for lang in ("zh", "en")}, evidence=evidence)
    points, details = scored if scored else (0.0, {})
    points = round(points, 2)
    evidence = {**evidence, "static_points": points, **details}
    if details.get("waiting") and points < max_pts:  # fields a teacher has yet to decide: never a plain fail
        status, message = waiting_verdict(spec["messages"], points, max_pts, details["waiting"], {})
        return CheckResult(id=f"nb.{test_id}", title=title, status=status, points=points, max_points=max_pts,
                           message=message, evidence=evidence)
    key = "ok" if points >= max_pts else "partial"
    detail = _detail(details)
    return CheckResult(id=f"nb.{test_id}", title=title,
                       status=CheckStatus.PASS if points >= max_pts else CheckStatus.FAIL,
                       points=points, max_points=max_pts,
                       message={lang: spec["messages"][key][lang].format(
                           score=f"{points:g}", max=f"{max_pts:g}", detail=detail[lang]) for lang in ("zh", "en")},
                       evidence=evidence)


PART_NAMES = {"batch": ("batch 三个字段对不上", "The three batch fields do not multiply out"),
              "precision": ("没有只开 bf16", "Not bf16 alone"),
              "offload_valid": ("卸载设置与 ZeRO 级别冲突", "The offload does not go with the ZeRO stage"),
              "fits": ("每卡模型状态超出显存", "The model states do not fit the card")}


def _detail(details: dict[str, Any]) -> dict[str, str]:
    """What was wrong in a structured answer, in words."""
    if details.get("wrong"):
        return text("答错的字段：" + "、".join(details["wrong"]), "Wrong fields: " + ", ".join(details["wrong"]) + ".")
    failed = [k for k, ok in details.get("parts", {}).items() if not ok]
    if failed:
        gb = details.get("gb_per_card")
        size = text(f"（每卡 {gb} GB）", f" ({gb} GB per card)") if gb is not None else text("", "")
        return text("；".join(PART_NAMES[k][0] + (size["zh"] if k == "fits" else "") for k in failed) + "。",
                    "; ".join(PART_NAMES[k][1] + (size["en"] if k == "fits" else "") for k in failed) + ".")
    return text("", "")


def manual_cells(nb: dict[str, Any], source_cells: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Manually graded cells (id, max points, the student's text) for the instructor's view.

    The cell list and the points come from the source notebook, never from the upload."""
    submitted = _cells_by_id(nb)
    out = []
    for gid, cell in source_cells.items():
        meta = cell["metadata"]["nbgrader"]
        if meta.get("grade") and meta.get("solution"):
            out.append({"cell_id": gid, "max_points": float(meta["points"]),
                        "source": _source(submitted.get(gid))[:20000]})
    return out

