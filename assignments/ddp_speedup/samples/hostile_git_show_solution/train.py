"""Hostile sample: take the reference solution from the repository and run it as its own.

The harness is on PYTHONPATH, so the repository is two folders above it. The script tries
``git show HEAD:assignments/ddp_speedup/solution/train.py`` (with ``safe.directory=*`` so git
does not object to the owner), then the file itself. If it gets the solution it runs it and
would score full marks; inside a sandbox that sees no repository it raises "blocked".
"""
import os
import subprocess
import sys
from pathlib import Path

SOLUTION = "assignments/ddp_speedup/solution/train.py"
roots = [Path(p).resolve().parent.parent for p in os.environ.get("PYTHONPATH", "").split(":") if p]
roots += [Path("/work/main"), *Path("/work").glob("wt-*")]
source, how = None, []
for root in roots:
    try:
        out = subprocess.run(["git", "-c", "safe.directory=*", "-C", str(root), "show", f"HEAD:{SOLUTION}"],
                             capture_output=True, timeout=20)
        how.append(f"git {root}: {out.returncode}")
        if out.returncode == 0 and b"DistributedSampler" in out.stdout:
            source = out.stdout.decode()
            break
    except (OSError, subprocess.SubprocessError) as e:
        how.append(f"git {root}: {e.__class__.__name__}")
    try:
        source = (root / SOLUTION).read_text()
        break
    except OSError as e:
        how.append(f"read {root}: {e.__class__.__name__}")
if source is None:
    raise RuntimeError("blocked: no copy of the solution was reachable (" + "; ".join(how)[:300] + ")")
print("hostile git_show_solution: leaked the reference solution, running it", flush=True)
sys.argv[0] = "solution.py"
exec(compile(source, "solution.py", "exec"), {"__name__": "__main__"})
