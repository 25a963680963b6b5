"""The counted score: everything that decides the number a student, the gradebook and every export show.

Its tables (``models``: overrides, extensions, hand scores, regrades, provisional fields, the audit), the
gradebook that computes the counted score (``gradebook``, ``hand_scores``), the instructor's actions on it
(``actions``), release of results (``release``), regrade requests (``regrade_requests``), and the one event
every change sends (``events.score_changed``). Pages (the dashboard, homework and quiz blueprints) import
this package; it imports no page and no template.
"""
