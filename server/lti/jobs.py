"""The LMS queue's RQ entry point, run in the worker's app. Apart from ``passback`` so that the app
factory, which subscribes ``passback.notify`` to score changes, is not imported back by it."""
from __future__ import annotations

from flask import has_app_context

from server.grading.task import worker_app
from server.lti.passback import push


def passback_job(course_id: int, context_id: int, user_id: int, item: str) -> str:
    """One push (``passback.push``) in the worker's app, or in the app already there (a SimpleWorker
    inside an app: the tests, ``flask lti send``)."""
    if has_app_context():
        return push(course_id, context_id, user_id, item)
    with worker_app().app_context():
        return push(course_id, context_id, user_id, item)
