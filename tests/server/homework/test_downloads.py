"""Students download starter code and released notebooks, never solutions or samples."""
from __future__ import annotations

import pytest


def test_ddp_starter_is_listed_and_downloadable(client, auth):
    auth.login()
    page = client.get("/homework/DIST101/ddp_speedup?lang=en").get_data(as_text=True)
    assert "Files to start from" in page and "starter/train.py" in page
    resp = client.get("/homework/DIST101/ddp_speedup/files/starter/train.py")
    assert resp.status_code == 200 and b"def " in resp.data
    assert "attachment" in resp.headers["Content-Disposition"]


def test_released_notebook_is_downloadable(client, auth):
    auth.login()
    resp = client.get("/homework/DIST101/config_annotation/files/release/config_annotation.ipynb")
    assert resp.status_code == 200 and b'"cells"' in resp.data


@pytest.mark.parametrize("path", [
    "solution/train.py", "samples/train.py", "starter/../solution/train.py", "starter/..%2Fsolution%2Ftrain.py",
    "starter/missing.py", "assignment.json/x",
])
def test_nothing_else_leaves_the_server(client, auth, path):
    auth.login()
    assert client.get(f"/homework/DIST101/ddp_speedup/files/{path}").status_code == 404


def test_not_enrolled_or_anonymous(client, auth):
    assert client.get("/homework/DIST101/ddp_speedup/files/starter/train.py").status_code == 302
    auth.login()
    assert client.get("/homework/NOPE/ddp_speedup/files/starter/train.py").status_code == 404
