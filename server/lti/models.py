"""LTI 1.3 tables: a registered platform (LMS), which of its contexts is which course, which of
its users is which account, and the launch nonces already used (one launch per nonce)."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, DateTime, ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from server.extensions import db
from server.models import utcnow


class LtiPlatform(db.Model):
    """One registration of distgrade in an LMS: the values the LMS shows when the tool is added."""

    __table_args__ = (UniqueConstraint("issuer", "client_id"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    issuer: Mapped[str] = mapped_column(String(255))
    client_id: Mapped[str] = mapped_column(String(255))
    auth_login_url: Mapped[str] = mapped_column(String(500))  # the platform's OIDC authorisation endpoint
    auth_token_url: Mapped[str] = mapped_column(String(500))  # its OAuth2 token endpoint (services)
    key_set_url: Mapped[str] = mapped_column(String(500))  # its JWKS
    deployment_ids: Mapped[list[str]] = mapped_column(JSON, default=list)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class LtiContext(db.Model):
    """A platform's course (context) bound to a distgrade course."""

    __table_args__ = (UniqueConstraint("platform_id", "context_id"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    platform_id: Mapped[int] = mapped_column(ForeignKey("lti_platform.id"), index=True)
    context_id: Mapped[str] = mapped_column(String(255))
    course_id: Mapped[int] = mapped_column(ForeignKey("course.id"), index=True)
    # the services' endpoints the last launch named (NRPS memberships, AGS line items)
    services: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class LtiUser(db.Model):
    """A platform's user (``sub``) bound to a distgrade account; local accounts have none."""

    __table_args__ = (UniqueConstraint("platform_id", "sub"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    platform_id: Mapped[int] = mapped_column(ForeignKey("lti_platform.id"), index=True)
    sub: Mapped[str] = mapped_column(String(255))
    user_id: Mapped[int] = mapped_column(ForeignKey("user.id"), index=True)


class LtiNonce(db.Model):
    """A launch's nonce, stored when the launch is accepted: the same id_token is refused after."""

    __table_args__ = (UniqueConstraint("issuer", "nonce"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    issuer: Mapped[str] = mapped_column(String(255))
    nonce: Mapped[str] = mapped_column(String(255))
    used_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow, index=True)


class LtiRoleChange(db.Model):
    """One change of an LTI account's course role, made by a launch or a roster sync: append-only.
    ``old``/``new`` are ``instructor`` | ``student`` | None (no membership: an observer, an
    institution-only role, or someone who left the course's staff)."""

    id: Mapped[int] = mapped_column(primary_key=True)
    course_id: Mapped[int] = mapped_column(ForeignKey("course.id"), index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("user.id"), index=True)
    old: Mapped[str | None] = mapped_column(String(20), nullable=True)
    new: Mapped[str | None] = mapped_column(String(20), nullable=True)
    source: Mapped[str] = mapped_column(String(20))  # launch | roster
    at: Mapped[datetime] = mapped_column(DateTime, default=utcnow, index=True)
