"""The app factory registers exactly the blueprints of ``server.BLUEPRINTS``."""
from __future__ import annotations

import re
from pathlib import Path

import server

SERVER = Path(server.__file__).resolve().parent


def test_every_module_that_declares_a_blueprint_is_listed():
    """A new area's blueprint that nobody added to the list would silently be off the site."""
    declaring = set()
    for path in SERVER.rglob("*.py"):
        if re.search(r"^bp = Blueprint\(", path.read_text(encoding="utf-8"), re.M):
            module = ".".join(path.relative_to(SERVER.parent).with_suffix("").parts)
            declaring.add(module.removesuffix(".__init__").removesuffix(".views"))
    listed = {m.removesuffix(".views") for m in server.BLUEPRINTS}
    assert declaring == listed


def test_the_app_has_the_listed_blueprints_in_order(app):
    assert list(app.blueprints) == ["api", "auth", "calculator", "dashboard", "homework", "instructor", "lti", "quiz",
                                      "ui"]
    assert app.jinja_env.globals["FINISHED_STATUSES"] == ("graded", "error")
