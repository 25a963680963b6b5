"""The CSV exports say their type once: ``text/csv; charset=utf-8`` (it said ``charset=utf-8`` twice,
which strict clients and proxies may refuse)."""
from __future__ import annotations


def test_csv_exports_name_their_charset_once(client, auth):
    auth.login("teacher", "teacher-pass")
    for name in ("canvas", "moodle"):
        resp = client.get(f"/dashboard/DIST101/export/{name}.csv")
        assert resp.status_code == 200
        assert resp.headers["Content-Type"] == "text/csv; charset=utf-8", resp.headers["Content-Type"]
        assert resp.headers["Content-Disposition"].startswith("attachment;")
