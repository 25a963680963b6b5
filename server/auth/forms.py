"""The sign-in and change-password forms: the views show them, and the back-off (``throttle``) shows
them again with "try again in N s"."""
from __future__ import annotations

from flask_wtf import FlaskForm
from wtforms import PasswordField, StringField
from wtforms.validators import DataRequired, EqualTo, Length


class LoginForm(FlaskForm):
    username = StringField("username", validators=[DataRequired(), Length(max=80)])
    password = PasswordField("password", validators=[DataRequired(), Length(max=200)])


class PasswordForm(FlaskForm):
    current = PasswordField("current", validators=[DataRequired(), Length(max=200)])
    new = PasswordField("new", validators=[DataRequired(), Length(min=8, max=200)])
    confirm = PasswordField("confirm", validators=[DataRequired(), EqualTo("new")])
