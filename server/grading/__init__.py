"""Grading: what can happen to a submission and the machinery that makes it happen.

``lifecycle`` (the moves between statuses, each a compare-and-set), ``queue`` (RQ: job ids,
fair dispatch, one pending upload per student), ``fairness`` (the order, pure functions),
``task`` (the RQ job that runs the grader), ``reconcile`` (repair after lost workers or
Redis), ``worker`` (``python -m server.grading.worker``). No blueprint: no pages here.
"""
