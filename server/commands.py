"""Flask CLI commands for operators and instructors (no browser needed)."""
from __future__ import annotations

import os
from pathlib import Path

import click
from flask import Flask

from server.extensions import db
from server.grading.reconcile import reconcile
from server.models import Course, Role, User
from server.roster import enrol, ensure_course, import_csv

DEMO_ACCOUNTS_FILE = "demo-accounts.txt"

DEMO_COURSE = ("DIST101", "分布式训练入门 / Distributed training 101")
# The published passwords serve tests and benchmarks only (TESTING, or DISTGRADE_DEMO_PASSWORDS=published).
DEMO_USERS = (("teacher", "teacher-pass", Role.INSTRUCTOR),
              ("alice", "alice-pass", Role.STUDENT),
              ("bob", "bob-pass", Role.STUDENT))


def remember_demo_accounts(var_dir: Path, made: list[tuple[str, str, str]]) -> None:
    """Append ``role username password`` lines to ``var/demo-accounts.txt``, readable by the operator only."""
    path = var_dir / DEMO_ACCOUNTS_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as f:
        os.fchmod(f.fileno(), 0o600)
        f.writelines(f"{role} {name} {pw}\n" for role, name, pw in made)


def demo_accounts(var_dir: Path) -> dict[str, str]:
    """username -> first password, from ``var/demo-accounts.txt`` (empty if there is none)."""
    try:
        lines = (var_dir / DEMO_ACCOUNTS_FILE).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return {}
    return {parts[1]: parts[2] for parts in (line.split() for line in lines) if len(parts) == 3}


def register(app: Flask) -> None:
    """Attach the commands to the app's CLI."""

    @app.cli.command("seed-demo")
    def seed_demo() -> None:
        """Create the demo course: one instructor, two students (idempotent).

        Every new demo account gets a random password, printed once and kept in ``var/demo-accounts.txt``
        (0600): a published default would let anyone sign in as the instructor. Tests and benchmarks get
        the published ones (``TESTING``, or ``DISTGRADE_DEMO_PASSWORDS=published`` in the environment).
        """
        course = ensure_course(*DEMO_COURSE)
        known = app.config.get("TESTING", False) or os.environ.get("DISTGRADE_DEMO_PASSWORDS") == "published"
        made = []
        for name, pw, role in DEMO_USERS:
            _, new_pw = enrol(course, name, role=role, password=pw if known else None)
            if new_pw:
                made.append((role.value, name, new_pw))
        db.session.commit()
        if made and not known:
            remember_demo_accounts(Path(app.config["VAR_DIR"]), made)
        click.echo(f"demo course {course.code}:")
        for role, name, pw in made:
            click.echo(f"  {role:10} {name} / {pw}")
        if len(made) < len(DEMO_USERS):
            click.echo(f"  (accounts made earlier: their first passwords are in {DEMO_ACCOUNTS_FILE} under var/;"
                       " change one with `flask users set-password NAME`)")

    users = click.Group("users", help="Manage people.")
    app.cli.add_command(users)

    @users.command("add")
    @click.argument("username")
    @click.option("--course", "course_code", default=DEMO_COURSE[0], show_default=True)
    @click.option("--role", type=click.Choice([r.value for r in Role]), default="student")
    @click.option("--password", default=None, help="generated and printed if omitted")
    def users_add(username: str, course_code: str, role: str, password: str | None) -> None:
        """Enrol USERNAME in a course, creating the account if needed."""
        course = _course(course_code)
        user, pw = enrol(course, username, role=Role(role), password=password)
        db.session.commit()
        click.echo(f"{user.username} enrolled in {course.code} as {role}" + (f"; password: {pw}" if pw else ""))

    @users.command("set-password")
    @click.argument("username")
    @click.option("--password", default=None, help="generated and printed if omitted")
    def users_set_password(username: str, password: str | None) -> None:
        """Give USERNAME a new password; every session of that account ends."""
        import secrets


        user = db.session.scalar(db.select(User).where(User.username == username))
        if user is None:
            raise click.ClickException(f"no user {username}")
        pw = password or secrets.token_urlsafe(9)
        user.set_password(pw)
        db.session.commit()
        click.echo(f"{user.username}: password changed, every session signed out"
                   + ("" if password else f"; new password: {pw}"))

    roster = click.Group("roster", help="Course rosters.")
    app.cli.add_command(roster)

    @roster.command("import")
    @click.argument("csv_file", type=click.Path(exists=True, dir_okay=False))
    @click.option("--course", "course_code", default=DEMO_COURSE[0], show_default=True)
    def roster_import(csv_file: str, course_code: str) -> None:
        """Enrol every student of a CSV roster (header: username[,display_name,email,password])."""
        with open(csv_file, "rb") as f:
            result = import_csv(_course(course_code), f.read())
        for err in result.errors:
            click.echo(f"error: {err['en']}", err=True)
        if result.errors:
            raise SystemExit(1)
        click.echo(f"enrolled {len(result.enrolled)}")
        for name, pw in result.created:
            click.echo(f"  new account {name} / {pw}")

    @app.cli.command("reconcile")
    def reconcile_cmd() -> None:
        """Re-enqueue submissions whose queue job was lost."""
        click.echo(f"re-enqueued: {reconcile()}")


def _course(code: str) -> Course:
    course = db.session.scalar(db.select(Course).where(Course.code == code))
    if course is None:
        raise click.ClickException(f"no course {code}")
    return course
