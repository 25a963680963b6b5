"""The web app never imports ``graders/``: what it shares with the worker is in ``coursework/``.

``graders`` runs student code (sandbox, torchrun, nbgrader kernels); the web image does not ship
it. Only the modules that run in the worker process may import it.
"""
from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Modules of server/ that run only in the grading worker process, never in the web app.
WORKER_ONLY = {
    "server/grading/task.py",  # one grading job: pre-flight, GPU slots, the grader subprocess
    "server/grading/speed_rescore.py",  # re-scores "pending calibration" reports: called by worker.py's calibration thread
    "server/grading/worker.py",  # the worker process: sandbox probe, calibration at start-up
    "server/supervisor.py",  # ./distgrade up prints the sandbox probe before starting the workers
}


def graders_imports(path: Path) -> list[str]:
    """``graders`` modules that ``path`` imports, at any depth (lazy imports inside functions too)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] == "graders"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "graders":
            found.append(node.module)
    return found


def test_only_worker_modules_of_server_import_graders() -> None:
    offenders = {}
    for path in sorted((REPO / "server").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel not in WORKER_ONLY and graders_imports(path):
            offenders[rel] = graders_imports(path)
    assert not offenders, f"the web app imports graders (use coursework/, or list a worker-only module): {offenders}"


def test_the_scan_sees_every_form_of_import(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text("import graders.sandbox\nfrom graders import cli\ndef f():\n    from graders.quiz import x\n"
                   "from coursework import report\nimport gradersx\n")
    assert graders_imports(src) == ["graders.sandbox", "graders", "graders.quiz"]


def test_the_web_app_serves_pages_where_graders_cannot_be_imported(tmp_path: Path, redis_server) -> None:
    """What the web image has: ``server/`` and ``coursework/``, and an import of ``graders`` fails."""
    script = textwrap.dedent(f"""
        import sys

        class NoGraders:
            def find_spec(self, name, path=None, target=None):
                if name == "graders" or name.startswith("graders."):
                    raise ImportError("graders is not shipped with the web app: " + name)
                return None

        sys.meta_path.insert(0, NoGraders())
        from flask_migrate import upgrade
        from server import create_app

        app = create_app({{"TESTING": True, "SQLALCHEMY_DATABASE_URI": "sqlite:///{tmp_path / 'web.db'}",
                           "REDIS_URL": "{redis_server.url}", "VAR_DIR": "{tmp_path / 'var'}",
                           "WTF_CSRF_ENABLED": False, "SECRET_KEY": "test"}})
        with app.app_context():
            upgrade()
            app.test_cli_runner().invoke(args=["seed-demo"])
        for user, pages in (("alice", ["/", "/homework/", "/homework/DIST101/ddp_speedup", "/quiz/", "/calculator/"]),
                            ("teacher", ["/dashboard/", "/dashboard/DIST101/"])):
            client = app.test_client()
            client.post("/login", data={{"username": user, "password": user + "-pass"}})
            for page in pages:
                status = client.get(page + "?lang=en", follow_redirects=True).status_code
                assert status == 200, (user, page, status)
        # every assignment's upload rules, its own validator included, run in the web app
        from coursework.assignments import all_assignments
        from coursework.exceptions import SubmissionRejected
        for assignment in all_assignments():
            for name in [f"x{{ext}}" for ext in assignment.extensions]:
                try:
                    assignment.validate_upload(name, b"\\x00 not a config [")
                except SubmissionRejected:
                    pass
        assert not [m for m in sys.modules if m.split(".")[0] == "graders"]
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stdout[-2000:] + out.stderr[-4000:]
