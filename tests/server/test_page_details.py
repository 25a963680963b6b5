"""Small things on the pages that people noticed: the status timer, the upload limit, the menu."""
from __future__ import annotations

from datetime import timedelta

from server.models import Submission, utcnow


def test_the_status_timer_does_not_restart_when_grading_starts():
    from server.homework.rules import elapsed_s

    now = utcnow()
    sub = Submission(status="running", created_at=now - timedelta(seconds=100), enqueued_at=now - timedelta(seconds=100),
                     started_at=now - timedelta(seconds=40))
    assert elapsed_s(sub) >= 99  # the student has been waiting 100 s, not 40
    sub.status = "queued"
    assert elapsed_s(sub) >= 99


def test_an_upload_over_the_server_limit_gets_the_same_inline_error(app, client, auth, hw):
    import io

    from tests.server.conftest import PLACEHOLDER

    auth.login()
    app.config["MAX_CONTENT_LENGTH"] = 10_000
    r = client.post(f"/homework/DIST101/{PLACEHOLDER}?lang=en",
                    data={"file": (io.BytesIO(b"#" * 20_000), "train.py")}, content_type="multipart/form-data")
    page = r.get_data(as_text=True)
    assert r.status_code == 413
    assert "The file is too large" in page and "Nothing was stored and no attempt was used." in page
    assert 'class="upload"' in page and 'id="file"' in page  # the assignment page itself, form ready again
    assert 'data-max-bytes="4096"' in page  # the browser checks the size before uploading
