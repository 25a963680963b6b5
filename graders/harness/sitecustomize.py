"""Injected into every process of a graded torchrun job through PYTHONPATH.

Everything lives in the ``distgrade_harness`` package beside this file; this
module only starts it, so that a student's own ``sitecustomize`` is the only
thing shadowed. Outside a grading job (no ``DISTGRADE_CHANNEL``) it does nothing.
"""
import os

if os.environ.get("DISTGRADE_CHANNEL"):
    import distgrade_harness

    distgrade_harness.install()
    del distgrade_harness  # nothing of the harness stays reachable from this module
