"""``flask lti register``: add or update a platform registration; ``flask lti show``: what the LMS asks for."""
from __future__ import annotations

import click
from flask import current_app

from server.lti import bp, keys, tool


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
