"""Hostile sample: read the service's database and secrets in ``var/`` and ``instance/``.

The repository is found through the harness path on PYTHONPATH; the test plants a
canary file in its ``var/``. Anything read is named in the exception ("leaked ...");
a sandbox that binds no repository leaves nothing and the script raises "blocked".
"""
import os
from pathlib import Path

roots = {Path(p).resolve().parent.parent for p in os.environ.get("PYTHONPATH", "").split(":") if p}
roots |= {Path("/work/main")}
leaked = []
for root in sorted(roots):
    for folder in ("var", "instance"):
        for path in sorted((root / folder).glob("**/*"))[:50]:
            try:
                data = path.read_bytes()[:64]
            except OSError:
                continue
            if data:
                leaked.append(f"{path}={data[:24]!r}")
if leaked:
    raise RuntimeError("leaked: " + ", ".join(leaked[:4]))
raise RuntimeError("blocked: nothing of var/ or instance/ was readable")
