"""distgrade web app: ``create_app`` binds extensions and registers the blueprints of ``BLUEPRINTS``."""
from __future__ import annotations

import os
from typing import Any

from flask import Flask, current_app, request, session

from server.config import (check_secret, ensure_private_dir, ensure_private_file, from_env,
                           load_or_create_secret)
from server.extensions import babel, csrf, db, login_manager, migrate

# The modules whose ``bp`` is registered, in this order: an area is on the site once it is listed here.
# ``ui`` is page furniture (filters, error pages) with no routes; the dashboard has two blueprints:
# its own and ``instructor`` (roster and submission lists, kept under their /instructor/ addresses).
BLUEPRINTS = (
    "server.api",
    "server.auth",
    "server.calculator",
    "server.dashboard",
    "server.homework",
    "server.dashboard.roster_views",
    "server.lti",
    "server.quiz",
    "server.ui",
)


def select_locale() -> str:
    """The ?lang= switch, else the session's choice, else the browser's, else ``DEFAULT_LOCALE``.

    The account's language reaches the session at sign-in (``auth.login``) and every switch
    updates both, so no request has to load the user to pick a language.
    """
    langs = current_app.config["LANGUAGES"]
    if request.args.get("lang") in langs:
        session["lang"] = request.args["lang"]
    if session.get("lang") in langs:
        return session["lang"]
    return request.accept_languages.best_match(langs) or current_app.config["BABEL_DEFAULT_LOCALE"]


def create_app(test_config: dict[str, Any] | None = None) -> Flask:
    """Application factory; ``test_config`` overrides the environment-derived defaults."""
    app = Flask(__name__, instance_relative_config=False)
    app.config.from_mapping(from_env())  # the environment as it is now, not at import
    if test_config:
        app.config.update(test_config)
    _behind_proxy_and_https(app)
    ensure_private_dir(app.config["VAR_DIR"])  # 0700: the database, the session key, Redis's files
    apply_secret(app)
    _private_sqlite_file(app.config["SQLALCHEMY_DATABASE_URI"])

    from server.cookies import FrameableSessionInterface

    app.session_interface = FrameableSessionInterface()
    db.init_app(app)
    migrate.init_app(app, db, directory=os.path.join(os.path.dirname(__file__), "migrations"))
    login_manager.init_app(app)
    csrf.init_app(app)
    babel.init_app(app, locale_selector=select_locale,
                   default_translation_directories=os.path.join(os.path.dirname(__file__), "translations"))
    login_manager.login_view = "auth.login"

    from server import commands, models, regrade_requests, release  # noqa: F401  (models register tables)

    @login_manager.user_loader
    def load_user(user_id: str) -> models.User | None:
        """The signed-in user, unless their sessions were revoked since this one began."""
        user = db.session.get(models.User, int(user_id))
        if user is None or not session_version_matches(user.session_version):
            return None
        return user

    commands.register(app)
    _register_blueprints(app)
    # The status groups templates test a submission against, from the one place they are defined.
    app.jinja_env.globals.update(FINISHED_STATUSES=models.FINISHED_STATUSES, PENDING_STATUSES=models.PENDING_STATUSES)
    from server.auth import throttle

    throttle.init_app(app)
    return app


def _behind_proxy_and_https(app: Flask) -> None:
    """Believe ``TRUSTED_PROXIES`` hops of X-Forwarded-* (client address, scheme, host); with ``HTTPS``,
    cookies travel over HTTPS only and links are built with https."""
    hops = int(app.config.get("TRUSTED_PROXIES") or 0)
    if hops:
        from werkzeug.middleware.proxy_fix import ProxyFix

        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=hops, x_proto=hops, x_host=hops)
    if app.config.get("HTTPS"):
        app.config.update(SESSION_COOKIE_SECURE=True, REMEMBER_COOKIE_SECURE=True, PREFERRED_URL_SCHEME="https")


def apply_secret(app: Flask) -> None:
    """Settle the session key and what derives from it; refuse an insecure one outside tests.

    ``SECRET_KEY`` unset (None): the key in ``VAR_DIR/secret_key``, which ``./distgrade up``
    generates before starting anything; a process started some other way on a fresh ``var/``
    (the flask CLI, a worker) generates it the same way, atomically, so all share one.
    """
    from coursework.quiz.seeds import seed_key

    if app.config.get("SECRET_KEY") is None:
        app.config["SECRET_KEY"] = load_or_create_secret(app.config["VAR_DIR"])
    if not app.testing:
        check_secret(app.config["SECRET_KEY"])
    key = app.config["SECRET_KEY"]
    app.config["QUIZ_SEED_KEY"] = seed_key(key) if key else None


def session_version_matches(version: int) -> bool:
    """Whether the session began at the user's current session version (bumped by logout and
    password changes). A session without one (minted before versions existed) does not match."""
    return session.get("_sv") == version


def _private_sqlite_file(uri: str) -> None:
    """Create the SQLite database file 0600 before SQLite does (it would follow the umask)."""
    from sqlalchemy.engine import make_url

    url = make_url(uri)
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:") \
            and not url.database.startswith("file:"):
        ensure_private_file(url.database)


def _register_blueprints(app: Flask) -> None:
    import importlib

    for module in BLUEPRINTS:
        app.register_blueprint(importlib.import_module(module).bp)
