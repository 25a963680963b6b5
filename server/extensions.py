"""Extensions are created unbound here and bound to the app in the factory."""
from __future__ import annotations

from flask_babel import Babel
from flask_login import LoginManager
from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy
from flask_wtf import CSRFProtect
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase


class Base(DeclarativeBase):
    pass


db = SQLAlchemy(model_class=Base)
migrate = Migrate()
login_manager = LoginManager()
csrf = CSRFProtect()
babel = Babel()


@event.listens_for(Engine, "connect")
def _tune_sqlite(dbapi_connection, _record) -> None:
    """SQLite is the embedded default and serves many web threads plus the workers.

    WAL lets readers run beside a writer, ``busy_timeout`` makes a writer wait for the
    lock instead of failing with "database is locked", and ``synchronous=NORMAL`` is
    durable across process crashes in WAL mode (only an OS crash can lose the last commit).
    """
    if type(dbapi_connection).__module__ != "sqlite3":
        return
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()
