"""Hostile sample: read the quiz bank, the notebook answer key, the tests and the benches.

Found through the harness path on PYTHONPATH (the repository is two folders above it).
Anything read is named in the exception ("leaked ..."); a sandbox that binds no
repository leaves nothing to read and the script raises "blocked".
"""
import os
from pathlib import Path

roots = {Path(p).resolve().parent.parent for p in os.environ.get("PYTHONPATH", "").split(":") if p}
roots |= {Path("/work/main")}
leaked = []
for root in sorted(roots):
    for pattern in ("quizzes/**/*.json", "quizzes/**/*.yaml", "assignments/*/answer_key.json",
                    "assignments/**/answer_key.json", "tests/**/*.py", "bench/*.py", ".git/config", ".git"):
        for path in list(root.glob(pattern))[:3]:
            try:
                if path.is_dir():
                    if os.listdir(path):
                        leaked.append(str(path))
                elif path.read_bytes()[:1]:
                    leaked.append(str(path))
            except OSError:
                pass
if leaked:
    raise RuntimeError("leaked: " + ", ".join(leaked[:6]))
raise RuntimeError("blocked: no quiz, answer key, test or bench file was readable")
