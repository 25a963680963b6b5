"""Everything the grading worker runs: workspace, sandbox, runners, harness and checks.

Nothing in this package imports Flask; the web app talks to graders only through
``GradeReport`` JSON and the ``python -m graders`` command line.
"""

from typing import Any


def __getattr__(name: str) -> Any:
    """``from graders import untrusted, cgroups``: these modules moved into ``graders.sandbox``."""
    if name in ("untrusted", "cgroups"):
        import importlib
        return importlib.import_module(f"graders.sandbox.{name}")
    raise AttributeError(name)
