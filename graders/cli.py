"""``python -m graders grade ASSIGNMENT PATH [--mode cpu|gpu] [--json]``.

Needs no server: students use it for pre-submission checks, instructors for
authoring, and the worker runs it as a subprocess so that a grader crash or
hang can never take the worker down.

Exit codes: 0 graded and passed, 1 graded (or a grader crash, reported as such), 2 unknown
assignment, 3 upload rejected, 4 the sandbox could not be built (an infrastructure failure:
the worker retries it and the student loses no attempt; the reason is on stderr for staff).
"""
from __future__ import annotations

import argparse
import os
import sys
import traceback

from coursework import assignments
from coursework.exceptions import AssignmentNotFound, SubmissionRejected
from coursework.report import GradeReport, ReportStatus
from graders import integrity, sandbox, workspace
from graders.exceptions import InfrastructureError, SandboxSetupError


def grade(assignment_id: str, path: str, mode: str, submission_id: str | None = None) -> GradeReport:
    """Grade a file or folder; any exception inside the grader becomes a crashed report.

    SandboxSetupError is not the grader's bug nor the student's: it propagates (exit 4).
    The layers every sandboxed run had, and what was off, go into ``report.sandbox``.
    """
    assignment = assignments.load(assignment_id)
    sandbox.recorded(reset=True)
    try:
        with workspace.job_dir(submission_id) as job:
            files = workspace.stage_submission(assignment, path, job)
            report = assignment.grader_function()(assignment=assignment, job=job,
                                                  files=files, mode=mode)
            report = integrity.finalize(report, job, files)  # tamper evidence -> needs_review
    except (SubmissionRejected, InfrastructureError):
        raise
    except Exception:  # a grader bug: staff see the traceback, the student loses nothing
        report = GradeReport.crashed(assignment_id, traceback.format_exc(), mode=mode)
    seen = sandbox.recorded()
    report.sandbox = {**report.sandbox, "enforcement": sandbox.enforcement(),
                      "layers": report.sandbox.get("layers") or seen["layers"], "degraded": report.sandbox.get("degraded") or seen["degraded"]}
    report.submission = submission_id
    report.mode = mode
    return report


def _print_human(report: GradeReport, lang: str) -> None:
    print(f"{report.assignment}: {report.score:g} / {report.max_score:g}  [{report.status.value}]")
    if report.summary.get(lang):
        print(report.summary[lang])
    for c in report.checks:
        print(f"  [{c.status.value:5}] {c.id:22} {c.points:g}/{c.max_points:g}  {c.message.get(lang, '')}")
        if c.hint.get(lang) and c.status.value in ("fail", "warn", "error"):
            print(f"          -> {c.hint[lang]}")
    if report.staff_traceback:
        print(report.staff_traceback, file=sys.stderr)
    off = [d for d in report.sandbox.get("degraded", []) if not d.startswith("cpus:")]
    if off:  # a laptop run (not root, no cgroups): say plainly what did not protect this machine
        print("\nSandbox protections that were OFF for this run (your machine ran the script with less "
              "isolation than the grading server):", file=sys.stderr)
        for line in off:
            print(f"  - {line}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m graders")
    sub = parser.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("grade", help="grade one submission (file or folder)")
    g.add_argument("assignment", help="folder name under assignments/")
    g.add_argument("path")
    g.add_argument("--mode", choices=["cpu", "gpu"], default=os.environ.get("GRADER_MODE", "cpu"))
    g.add_argument("--json", action="store_true", help="print exactly one JSON GradeReport")
    g.add_argument("--submission-id", default=None)
    g.add_argument("--lang", choices=["zh", "en"], default="en")
    args = parser.parse_args(argv)

    try:
        report = grade(args.assignment, args.path, args.mode, args.submission_id)
    except AssignmentNotFound as e:
        print(f"unknown assignment: {e}", file=sys.stderr)
        return 2
    except SubmissionRejected as e:
        print(e.message[args.lang], file=sys.stderr)
        return 3
    except SandboxSetupError as e:  # infrastructure: the worker retries, no attempt is used
        print(f"sandbox unavailable, not graded: {e}", file=sys.stderr)
        return 4
    except InfrastructureError as e:  # the host failed the run (a kill from outside): likewise
        print(f"the grading host failed this run, not graded: {e}", file=sys.stderr)
        return 4
    if args.json:
        sys.stdout.write(report.to_json() + "\n")
    else:
        _print_human(report, args.lang)
    return 0 if report.status == ReportStatus.GRADED else 1
