"""The instructor dashboard: gradebook, item statistics, charts, queue health, regrades,
overrides and manual grading, deadlines and extensions, exports.

Only the course's instructors reach any of it: the blueprint refuses everyone else before a
view runs (404, as for any page that is not yours), and each view checks the course again.
The roster import and each homework's submission list (``roster_views``) keep their own blueprint,
``instructor``, and their /instructor/ addresses; ``server.ROUTES`` imports every module with routes and registers both blueprints.
"""
