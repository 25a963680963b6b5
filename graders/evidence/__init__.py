"""Evidence about a student's run gathered where the student's process cannot reach.

The harness (``graders/harness``) observes from inside the student's interpreter, where a
script that has read it can change what it reports. What this package gathers comes from the
grader's own processes and the kernel, each piece labelled with its ``source``:

* ``outputs``  each rank's stdout/stderr as torchrun captured it (line and byte counts);
* ``files``    the files left in the job's work folder after the run, joined with the paths
               each rank opened for writing (the harness's audit hook: inside, cross-checked);
* ``dcp``      the keys and tensor shapes in each distributed checkpoint's ``.metadata`` (read with inert
               stand-ins for every class the pickle names: nothing of the student's runs in the grader);
* ``host``     the launcher's wall clock, and, sampled from ``/proc`` of each rank's process
               (its pid from the kernel's ``SO_PEERCRED`` on the channel socket): CPU time and
               the loopback bytes of the job's own network namespace (gloo's traffic);
* ``model``    rank 0's final parameters scored by the grader on held-out synthetic data, in a
               sandboxed process of its own.
* ``weights``  the tensors of a full checkpoint rank 0 saved (homework 3), summed in a sandboxed process of
               the grader's and compared with the module that trained.

``SOURCE_OUTSIDE`` / ``SOURCE_CROSS_CHECKED`` name where a check's evidence comes from, so a
reader of a report sees what a student could and could not have chosen.
"""
from __future__ import annotations

SOURCE_OUTSIDE = "outside"  # measured by the grader or the kernel; the script cannot choose it
SOURCE_CROSS_CHECKED = "inside, cross-checked"  # reported by the harness, confirmed by outside evidence
SOURCE_INSIDE = "inside"  # reported by the harness only
