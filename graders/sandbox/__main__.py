"""``python -m graders.sandbox``: the sandbox probe. Prints what a run gets here as JSON; exit 1 if a
required layer is missing (and enforcement would refuse to grade), 0 otherwise."""
from __future__ import annotations

import json
import sys

from graders.sandbox import probe

if __name__ == "__main__":
    found = probe()
    print(json.dumps(found, indent=1))
    sys.exit(1 if found["missing"] or found["error"] else 0)
