"""distgrade web app: ``create_app`` binds extensions and registers one blueprint per area."""
from __future__ import annotations

import os
from typing import Any

from flask import Flask, request, session

from server.config import Config
from server.extensions import babel, csrf, db, login_manager, migrate


def select_locale() -> str:
    """The ?lang= switch, else the session's choice, else the browser's.

    The account's language reaches the session at sign-in (``auth.login``) and every switch
    updates both, so no request has to load the user to pick a language.
    """
    langs = ["zh_CN", "en"]
    if request.args.get("lang") in langs:
        session["lang"] = request.args["lang"]
    if session.get("lang") in langs:
        return session["lang"]
    return request.accept_languages.best_match(langs) or "zh_CN"


def create_app(test_config: dict[str, Any] | None = None) -> Flask:
    """Application factory; ``test_config`` overrides the environment-derived defaults."""
    app = Flask(__name__, instance_relative_config=False)
    app.config.from_object(Config)
    if test_config:
        app.config.update(test_config)
    os.makedirs(app.config["VAR_DIR"], exist_ok=True)

    db.init_app(app)
    migrate.init_app(app, db, directory=os.path.join(os.path.dirname(__file__), "migrations"))
    login_manager.init_app(app)
    csrf.init_app(app)
    babel.init_app(app, locale_selector=select_locale,
                   default_translation_directories=os.path.join(os.path.dirname(__file__), "translations"))
    login_manager.login_view = "auth.login"

    from server import commands, models  # noqa: F401  (models register tables)

    @login_manager.user_loader
    def load_user(user_id: str) -> models.User | None:
        return db.session.get(models.User, int(user_id))

    commands.register(app)
    _register_blueprints(app)
    return app


def _register_blueprints(app: Flask) -> None:
    import importlib
    import pkgutil

    import server as pkg

    # Each area is a package server/<area>/ exposing ``bp``; adding an area needs no edit here.
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if not info.ispkg or info.name in ("migrations", "translations", "templates", "static"):
            continue
        module = importlib.import_module(f"server.{info.name}")
        if hasattr(module, "bp"):
            app.register_blueprint(module.bp)
