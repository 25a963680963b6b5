"""``flask lti register``: add or update a platform registration; ``flask lti show``: what the LMS asks for;
``flask lti list`` / ``remove``: the registrations and their deployments; ``flask lti rotate-key``."""
from __future__ import annotations

import click
from flask import current_app

from server.extensions import db
from server.lti import keys, registry, tool
from server.lti.views import bp
from server.lti.models import LtiPlatform


@bp.cli.command("register")
@click.option("--issuer", required=True, help="the platform's issuer (iss), e.g. https://canvas.instructure.com")
@click.option("--client-id", required=True, help="the client id the LMS gave the tool")
@click.option("--login-url", required=True, help="the platform's OIDC authorisation endpoint")
@click.option("--token-url", required=True, help="the platform's OAuth2 token endpoint")
@click.option("--jwks-url", required=True, help="the platform's public key set URL")
@click.option("--deployment", "deployments", multiple=True, required=True, help="a deployment id (repeatable)")
def register_command(issuer, client_id, login_url, token_url, jwks_url, deployments) -> None:
    """Register (or update) an LMS; prints the platform's id."""
    try:
        row = tool.register_platform(issuer, client_id, login_url, token_url, jwks_url, list(deployments))
    except tool.LaunchRefused as err:
        raise click.ClickException(f"{err.code}: {err.detail}") from err
    click.echo(f"platform {row.id}: {row.issuer} client {row.client_id} deployments {', '.join(row.deployment_ids)}")


@bp.cli.command("show")
@click.option("--base-url", required=True, help="where students reach distgrade, e.g. https://grader.example.edu")
def show_command(base_url: str) -> None:
    """The values an LMS asks for when distgrade is added as an LTI 1.3 tool."""
    base = base_url.rstrip("/")
    keys.private_pem(current_app.config["VAR_DIR"])  # generated now if missing (0600)
    for name, value in (("OIDC login / initiation URL", f"{base}/lti/login"), ("Redirect / launch URL", f"{base}/lti/launch"),
                        ("Target link URI", f"{base}/lti/launch"), ("Public JWK set URL", f"{base}/lti/jwks.json"),
                        ("Deep linking URL", f"{base}/lti/launch")):
        click.echo(f"{name}: {value}")


@bp.cli.command("list")
def list_command() -> None:
    """Every registration: its id, issuer, client id, deployments and the courses it serves."""
    for p in db.session.scalars(db.select(LtiPlatform).order_by(LtiPlatform.id)):
        courses = ", ".join(c.code for c in registry.courses_of(p.id)) or "-"
        click.echo(f"platform {p.id}: {p.issuer} client {p.client_id} deployments {', '.join(p.deployment_ids or []) or '-'}"
                   f" courses {courses}")


@bp.cli.command("remove")
@click.option("--platform", "platform_id", type=int, required=True, help="the id `flask lti list` shows")
@click.option("--deployment", default=None, help="remove only this deployment id")
def remove_command(platform_id: int, deployment: str | None) -> None:
    """Remove a deployment, or the whole registration (courses, accounts and grades stay)."""
    if not registry.remove(platform_id, deployment):
        raise click.ClickException("no such platform or deployment")
    click.echo(f"removed {'deployment ' + deployment if deployment else 'platform'} {platform_id if not deployment else ''}".strip())


@bp.cli.command("rotate-key")
@click.option("--keep-days", type=float, default=7.0, show_default=True,
              help="days the old public key stays in the JWKS (platforms cache it)")
def rotate_key_command(keep_days: float) -> None:
    """Sign with a new key pair from now on; the old public key stays published for a while."""
    old, new = keys.rotate(current_app.config["VAR_DIR"], keep_days)
    click.echo(f"signing key {new}; {old} stays in the JWKS for {keep_days:g} days")
