"""Similarity through the web app: a run waits for first gradings, picks each student's
counted submission, finds the copy; the instructor's pages escape what students wrote, students
get 404, and a pair opens an integrity review with its evidence, a reason and the audit log."""
from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

from rq import Queue

from server.scores.models import AuditEntry
from server.extensions import db
from server.models import CourseAssignment, Membership, Role, Submission, User, utcnow
from server.similarity import jobs
from server.similarity.models import SimilarityRun
from tests.server.conftest import PLACEHOLDER

SIM = Path(__file__).resolve().parents[3] / "assignments" / "ddp_speedup" / "similarity"
ORIGINAL = (SIM / "original.py").read_bytes()
HOSTILE = b"# </pre><script>alert('x')</script>\n"
COPY = HOSTILE + (SIM / "copies" / "all_disguises" / "disguised.py").read_bytes()
OWN = (SIM / "independent" / "f02_dataclass_experiment.py").read_bytes()


def _student(app, name: str) -> None:
    with app.app_context():
        user = User(username=name, display_name=name.title())
        user.set_password(name + "-pass")
        db.session.add(user)
        db.session.flush()
        db.session.add(Membership(user_id=user.id, course_id=1, role=Role.STUDENT.value))
        db.session.commit()


class _Done:
    def __init__(self, run: SimilarityRun):
        self.id, self.result_json = run.id, run.result_json


def _run(app) -> _Done:
    with app.app_context():
        run = jobs.request_run(1, PLACEHOLDER)
        assert jobs.execute(run.id) == "done"
        return _Done(db.session.get(SimilarityRun, run.id))


def test_a_run_waits_for_first_gradings_and_follows_the_score_policy(app, make_sub):
    best_copy = make_sub("alice", content=ORIGINAL, score=9.0)
    make_sub("alice", content=OWN, score=2.0)  # newer, lower: counted only under "last"
    make_sub("bob", content=COPY, score=5.0)
    waiting = make_sub("bob", status="queued", grading_runs=0)
    with app.app_context():
        run = jobs.request_run(1, PLACEHOLDER, "manual")
        assert jobs.dispatch() == [] and jobs.execute(run.id) == "waiting"  # a first grading waits
        db.session.get(Submission, waiting).status = "replaced"
        db.session.commit()
        assert jobs.dispatch() == [run.id]  # handed to RQ, on the similarity queue
        assert Queue(jobs.QUEUE, connection=jobs.redis_conn()).job_ids == [f"sim-{run.id}-g1"]
        assert jobs.dispatch() == []  # never twice
        assert jobs.execute(run.id) == "done"
        result = db.session.get(SimilarityRun, run.id).result_json
        assert [{p["a"], p["b"]} for p in result["pairs"]] == [{f"sub:{best_copy}", f"sub:{best_copy + 2}"}]
        ca = db.session.scalar(db.select(CourseAssignment).where(CourseAssignment.assignment_id == PLACEHOLDER))
        ca.score_policy = "last"
        db.session.commit()
    assert _run(app).result_json["pairs"] == []


def test_deadline_requests_one_run(app, hw):
    with app.app_context():
        ca = db.session.get(CourseAssignment, hw)
        ca.deadline = utcnow() - timedelta(minutes=1)
        db.session.commit()
        assert jobs.deadline_runs() == [hw] and jobs.deadline_runs() == []
        assert db.session.scalar(db.select(SimilarityRun.trigger)) == "deadline"


def test_pages_escape_student_text_and_students_get_404(app, client, auth, make_sub):
    a, b = make_sub("alice", content=ORIGINAL), make_sub("bob", content=COPY)
    run = _run(app)
    for user in ("alice", "bob"):
        auth.login(user, user + "-pass")
        for url in ("/dashboard/DIST101/similarity", f"/dashboard/DIST101/similarity/{run.id}/pair/0"):
            assert client.get(url).status_code == 404
        assert client.post(f"/dashboard/DIST101/similarity/{run.id}/review", data={"pair": 0, "reason": "x"}).status_code == 404
        auth.logout()
    auth.login("teacher", "teacher-pass")
    page = client.get("/dashboard/DIST101/similarity?lang=en").get_data(as_text=True)
    assert "Side by side" in page and "sim-open" in page, re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))[-1500:]
    assert "alice" in page.lower() and "bob" in page.lower() and "sim-open" in page
    assert "相似" in client.get("/dashboard/DIST101/similarity?lang=zh_CN").get_data(as_text=True)
    pair = client.get(f"/dashboard/DIST101/similarity/{run.id}/pair/0?lang=en").get_data(as_text=True)
    assert "<script>alert" not in pair and "&lt;script&gt;alert" in pair
    assert pair.count('<mark class="sim-m') >= 2 and "class Runner" in pair and "class Trainer" in pair
    assert client.get(f"/dashboard/DIST101/similarity/{run.id}/pair/7").status_code == 404


def test_a_pair_opens_an_integrity_review_with_evidence_and_audit(app, client, auth, make_sub):
    a, b = make_sub("alice", content=ORIGINAL, score=9.0), make_sub("bob", content=COPY, score=5.0)
    run = _run(app)
    auth.login("teacher", "teacher-pass")
    url = f"/dashboard/DIST101/similarity/{run.id}/review"
    assert client.post(url, data={"pair": 0, "reason": "  "}).status_code == 303  # a reason is required
    with app.app_context():
        assert db.session.get(Submission, a).review_status is None
    r = client.post(url, data={"pair": 0, "reason": "same trainer, renamed"})
    assert r.status_code == 302 and r.headers["Location"].endswith("/dashboard/DIST101/integrity")
    flashed = client.get("/dashboard/DIST101/integrity?lang=en").get_data(as_text=True)
    assert "已为 2 份提交开启诚信复核；0 份本已在复核中" in flashed  # flashed in the locale of the POST
    with app.app_context():
        for sid, computed in ((a, 9.0), (b, 5.0)):
            sub = db.session.get(Submission, sid)
            assert (sub.review_status, sub.score, sub.computed_score) == ("pending", 0.0, computed)
            assert sub.report_json["integrity"]["events"][-1]["source"] == "similarity"
            entry = db.session.scalar(db.select(AuditEntry).where(AuditEntry.target == f"sub:{sid}/integrity"))
            assert (entry.old, entry.new) == (computed, 0.0) and "same trainer, renamed" in entry.reason
    page = client.get("/dashboard/DIST101/integrity?lang=en").get_data(as_text=True)
    assert f"similarity run #{run.id}, pair 1" in page and "Waiting for a decision: 2" in page
    client.post(url, data={"pair": 0, "reason": "again"})  # already pending: evidence added, grade kept
    with app.app_context():
        assert db.session.get(Submission, a).computed_score == 9.0
        assert len(db.session.get(Submission, a).report_json["integrity"]["events"]) == 2
    auth.logout()
    auth.login("alice", "alice-pass")
    report = client.get(f"/submissions/{a}/report?lang=en").get_data(as_text=True)
    assert "waiting for a review" in report and "similarity run" not in report


def test_a_cluster_of_three_opens_three_reviews_and_an_earlier_term_joins_as_reference(app, client, auth, make_sub,
                                                                                        tmp_path):
    _student(app, "carol")
    subs = [make_sub("alice", content=ORIGINAL), make_sub("bob", content=COPY),
            make_sub("carol", content=(SIM / "copies" / "dead_code" / "padded.py").read_bytes())]
    corpus = tmp_path / "corpus" / PLACEHOLDER / "2025"
    corpus.mkdir(parents=True)
    (corpus / "old.py").write_bytes((SIM / "copies" / "reordered_functions" / "reordered.py").read_bytes())
    app.config["SIMILARITY_CORPUS_DIR"] = str(tmp_path / "corpus")
    run = _run(app)
    cluster = run.result_json["clusters"][0]
    assert sorted(cluster["members"]) == sorted([f"sub:{s}" for s in subs] + ["ref:2025/old.py"])
    auth.login("teacher", "teacher-pass")
    page = client.get("/dashboard/DIST101/similarity?lang=en").get_data(as_text=True)
    assert "earlier term" in page and "2025/old.py" in page
    ref_pair = next(n for n, p in enumerate(run.result_json["pairs"]) if "ref:2025/old.py" in (p["a"], p["b"]))
    assert "class Trainer" in client.get(f"/dashboard/DIST101/similarity/{run.id}/pair/{ref_pair}").get_data(as_text=True)
    client.post(f"/dashboard/DIST101/similarity/{run.id}/review", data={"cluster": 0, "reason": "one source"})
    with app.app_context():
        assert [db.session.get(Submission, s).review_status for s in subs] == ["pending"] * 3
        assert db.session.scalar(db.select(db.func.count()).select_from(AuditEntry)) == 3


def test_a_run_whose_worker_died_ends_as_error(app, hw):
    with app.app_context():
        run = SimilarityRun(course_id=1, assignment_id=PLACEHOLDER, status="running", job_id="sim-1-g1",
                            started_at=utcnow() - timedelta(minutes=5))
        db.session.add(run)
        db.session.commit()
        assert jobs.recover_lost() == [run.id]
        assert db.session.get(SimilarityRun, run.id).status == "error"


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_the_page_opens_on_the_homework_students_handed_in_and_says_what_a_run_compares(app, client, auth, make_sub):
    """Not the alphabetically first homework (homework 2's folder sorts before homework 1's):
    the one with graded submissions, and the button says how many a run compares."""
    make_sub("alice", content=ORIGINAL)
    make_sub("bob", content=COPY)
    with app.app_context():
        db.session.add(CourseAssignment(course_id=1, assignment_id="a_config_first"))  # sorts first, nobody handed in
        db.session.commit()
    auth.login("teacher", "teacher-pass")
    page = client.get("/dashboard/DIST101/similarity?lang=en").get_data(as_text=True)
    assert f'name="hw" value="{PLACEHOLDER}"' in page
    assert "A run compares the counted submissions of 2 students." in _text(page)
    other = _text(client.get("/dashboard/DIST101/similarity?hw=a_config_first&lang=en").get_data(as_text=True))
    assert "No graded submission of this homework yet" in other


def test_a_running_first_run_is_not_also_never_run(app, client, auth, make_sub):
    make_sub("alice", content=ORIGINAL)
    with app.app_context():
        run = jobs.request_run(1, PLACEHOLDER)
        db.session.get(SimilarityRun, run.id).status = "running"
        db.session.commit()
    auth.login("teacher", "teacher-pass")
    for lang, running, never in (("en", "running", "No similarity run of this homework yet"),
                                 ("zh_CN", "运行中", "这份作业还没有运行过相似度检查")):
        page = _text(client.get(f"/dashboard/DIST101/similarity?lang={lang}").get_data(as_text=True))
        assert running in page and never not in page, page[-800:]


def test_the_pair_page_says_why_and_shows_the_largest_shared_region_side_by_side(app, client, auth, make_sub):
    make_sub("alice", content=ORIGINAL)
    make_sub("bob", content=COPY)
    run = _run(app)
    pair = run.result_json["pairs"][0]
    assert "fraction" in pair["reasons"] and pair["block"]["tokens"] > 0
    auth.login("teacher", "teacher-pass")
    page = client.get(f"/dashboard/DIST101/similarity/{run.id}/pair/0?lang=en").get_data(as_text=True)
    text = _text(page)
    assert "Why this pair is listed" in text and "of the left one's own code is in the right one" in text
    assert "largest shared region" in text and page.count('class="sim-block-code"') == 2
    zh = _text(client.get(f"/dashboard/DIST101/similarity/{run.id}/pair/0?lang=zh_CN").get_data(as_text=True))
    assert "为什么列出这一对" in zh and "最大的共同区域" in zh
    listing = _text(client.get("/dashboard/DIST101/similarity?lang=en").get_data(as_text=True))
    assert "Why" in listing and "share" in listing
