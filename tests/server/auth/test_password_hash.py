"""The tests hash passwords with one PBKDF2 round (``tests/conftest.py``, ``TEST_PASSWORD_HASH``) to save CPU;
the service itself must keep werkzeug's strong default. A fresh interpreter, outside pytest's patch, is what
production runs."""
from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO, TEST_PASSWORD_HASH


def test_the_service_hashes_with_scrypt_and_only_the_tests_use_the_cheap_hash() -> None:
    code = ("from server.models import User\nu = User(username='x')\nu.set_password('pw')\n"
            "print(u.password_hash.split('$')[0])\nprint(u.check_password('pw'), u.check_password('wrong'))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    method, checks = out.split()[0], out.split()[1:]
    assert method.startswith("scrypt:"), method
    assert checks == ["True", "False"]

    from server.models import User  # here, in the tests' process: the cheap hash, and it still refuses a wrong one
    u = User(username="y")
    u.set_password("pw")
    assert u.password_hash.startswith(TEST_PASSWORD_HASH + "$")
    assert u.check_password("pw") and not u.check_password("wrong")
