"""The app factory imports every module of ``server.ROUTES`` and registers each blueprint once; packages
import none of their pages, and importing one does no work."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import server

SERVER = Path(server.__file__).resolve().parent


def _module(path: Path) -> str:
    return ".".join(path.relative_to(SERVER.parent).with_suffix("").parts).removesuffix(".__init__")


def test_every_module_with_routes_or_commands_is_listed():
    """A new page whose module nobody added to the list would silently be off the site."""
    routed = set()
    for path in SERVER.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if re.search(r"^bp = Blueprint\(|^@bp\.(route|get|post|before_request|cli)|^register_cli\(", text, re.M):
            routed.add(_module(path))
    assert routed == set(server.ROUTES)


def test_packages_import_no_pages():
    """A package's ``__init__`` is its docstring: importing a model never pulls in the pages."""
    for path in SERVER.rglob("__init__.py"):
        if path.parent == SERVER or "migrations" in path.parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        body = [n for n in tree.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
        imports = [n for n in body if isinstance(n, (ast.Import, ast.ImportFrom))
                   and not (isinstance(n, ast.ImportFrom) and n.module == "__future__")]
        assert not any("views" in ast.unparse(n) or "bp" in ast.unparse(n) for n in imports), _module(path)


def test_importing_the_quiz_models_compiles_nothing():
    code = ("import sys; import server.quiz, server.quiz.models, server.scores.models; "
            "from coursework.quiz import rubric; print(len(rubric._ANY), 'server.quiz.views' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=SERVER.parent)
    assert out.stdout.split() == ["0", "False"], out.stderr[-2000:]  # no pattern compiled, no page imported


def test_the_app_has_the_listed_blueprints_in_order(app):
    assert list(app.blueprints) == ["api", "auth", "calculator", "dashboard", "homework", "instructor", "lti", "quiz",
                                      "ui"]
    assert app.jinja_env.globals["FINISHED_STATUSES"] == ("graded", "error")
