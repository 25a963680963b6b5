"""Where every grading's job folder lives: made by ``workspace.job_dir``, and kept by the sandbox's
clean-up of a job's uid (``sandbox.credentials``), which removes that uid's files everywhere else."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

JOBS_ROOT = Path(os.environ.get("DISTGRADE_JOBS_DIR", tempfile.gettempdir())) / "distgrade-jobs"
