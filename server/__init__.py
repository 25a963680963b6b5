"""distgrade web app: ``create_app`` binds extensions and registers the blueprints of the modules in ``ROUTES``."""
from __future__ import annotations

import functools
import importlib
import os
from typing import Any

from babel import Locale
from flask import Flask, current_app, request, session

from coursework.quiz import rubric
from coursework.quiz.bank import all_question_ids, load_question

from server.config import (check_secret, ensure_private_dir, ensure_private_file, from_env,
                           load_or_create_secret)
from server.extensions import babel, csrf, db, login_manager, migrate

# Every module with routes or commands, in registration order. A blueprint lives in the module with its
# views (its ``bp``); the others add routes to a ``bp`` they import. Packages import none of them.
# ``ui`` is page furniture (filters, error pages) with no routes; the dashboard has two blueprints:
# its own and ``instructor`` (roster and submission lists, kept under their /instructor/ addresses).
ROUTES = (
    "server.api.views",
    "server.auth.views",
    "server.calculator.views",
    "server.dashboard.views",
    "server.dashboard.admin_views",
    "server.dashboard.item_views",
    "server.dashboard.review_views",
    "server.dashboard.integrity",
    "server.dashboard.similarity",
    "server.dashboard.release_views",
    "server.dashboard.regrade_request_views",
    "server.dashboard.trust_views",
    "server.dashboard.confirm_views",
    "server.dashboard.calibration_views",
    "server.homework.views",
    "server.dashboard.roster_views",
    "server.lti.views",
    "server.lti.admin",
    "server.lti.cli",
    "server.lti.dynamic",
    "server.quiz.views",
    "server.quiz.cli",
    "server.ui",
)


def select_locale() -> Locale:
    """The ?lang= switch, else the session's choice, else the browser's, else ``DEFAULT_LOCALE``.

    The account's language reaches the session at sign-in (``auth.login``) and every switch
    updates both, so no request has to load the user to pick a language.
    """
    langs = current_app.config["LANGUAGES"]
    if request.args.get("lang") in langs:
        session["lang"] = request.args["lang"]
    if session.get("lang") in langs:
        return _locale(session["lang"])
    return _locale(request.accept_languages.best_match(langs) or current_app.config["BABEL_DEFAULT_LOCALE"])


@functools.lru_cache(maxsize=16)
def _locale(tag: str) -> Locale:
    """``tag`` as Babel's ``Locale``, parsed once per process: Flask-Babel parsed the selector's
    string on every request (0.055 ms for ``zh_CN``, the default language, on each status poll,
    quiz page and answer) and takes a ``Locale`` as it is. Locales are immutable."""
    return Locale.parse(tag)


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

    from server import commands, models  # noqa: F401  (models register tables)
    # the score tables register; provisional rows follow every ORM write of a report
    from server.scores import models as _score_models, provisional_fields, regrade_requests, release  # noqa: F401

    @login_manager.user_loader
    def load_user(user_id: str) -> models.User | None:
        """The signed-in user, unless their sessions were revoked since this one began."""
        user = db.session.get(models.User, int(user_id))
        if user is None or not session_version_matches(user.session_version):
            return None
        return user

    commands.register(app)
    _register_blueprints(app)
    _warm_rubrics()
    from server.lti import passback
    from server.scores import events

    events.score_changed.connect(passback.notify)  # every counted score that changes reaches the LMS
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
    """Import every module of ``ROUTES``, then register each blueprint once, by the module that made it."""
    modules = [importlib.import_module(name) for name in ROUTES]
    for module in modules:
        bp = getattr(module, "bp", None)
        if bp is not None and bp.import_name == module.__name__:
            app.register_blueprint(bp)


@functools.cache
def _warm_rubrics() -> None:
    """Compile the free-text rubrics once per process, at app start (each worker, before its first request)."""
    questions = [load_question(q) for q in all_question_ids()]
    rubric.warm([rubric.compile_rubric(q.info["rubric"]) for q in questions if q.type == "text"])
