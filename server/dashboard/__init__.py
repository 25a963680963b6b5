"""The instructor dashboard: gradebook, item statistics, charts, queue health, regrades,
overrides and manual grading, deadlines and extensions, exports.

Only the course's instructors reach any of it: the blueprint refuses everyone else before a
view runs (404, as for any page that is not yours), and each view checks the course again.
The roster import and each homework's submission list (``roster_views``) keep their own blueprint,
``instructor``, and their /instructor/ addresses; ``server.BLUEPRINTS`` registers both.
"""
from server.dashboard import models  # noqa: F401  (tables register with the metadata)
from server.dashboard import provisional_fields  # noqa: F401  (rows follow every ORM write of a report)
from server.dashboard.views import bp
from server.dashboard import admin_views, item_views  # noqa: F401,E402  (routes register on bp)
from server.dashboard import review_views  # noqa: F401,E402  (the free-text review queue, issue 12)
from server.dashboard import integrity  # noqa: F401,E402  (integrity review routes)
from server.dashboard import similarity  # noqa: F401,E402  (similarity pairs and clusters, issue 25)
from server.dashboard import release_views  # noqa: F401,E402  (release control, issue 24)
from server.dashboard import regrade_request_views  # noqa: F401,E402  (regrade requests per check, issue 24)
from server.dashboard import trust_views  # noqa: F401,E402  (free-text readers: agreement, earned trust)
from server.dashboard import confirm_views  # noqa: F401,E402  (one-key confirm, settle from a sample)
from server.dashboard import calibration_views  # noqa: F401,E402  (the host's speed calibration, issue 26)

__all__ = ["bp"]
