"""distgrade framed by an LMS page of another site, in a real Chromium against gunicorn over HTTPS:
the platform (tests/server/lti/platform.py) serves its course page from http://127.0.0.1 and frames
the tool at https://localhost, two different sites. An instructor launches in the frame and creates
the course there (the session cookie must come back in the cross-site frame); a student launches
through the platform's postMessage storage while the browser drops every cookie of the tool between
login and launch (as a browser that blocks them would), and is signed in and stays signed in, in
the frame."""
from __future__ import annotations

import datetime
import re

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from tests.server.lti.platform import Platform

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _certificate(folder) -> tuple:
    """A self-signed certificate for localhost (the browser is told to accept it)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = folder / "tls.crt", folder / "tls.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


def _tool_frame(page):
    frame = page.frame(name="tool")
    assert frame is not None
    return frame


def test_a_framed_launch_across_two_sites(service, browser, tmp_path) -> None:
    platform = Platform().start()
    try:
        service.start_web(tls=_certificate(tmp_path))
        assert service.url.startswith("https://localhost:") and platform.url.startswith("http://127.0.0.1:")
        service.flask("lti", "register", "--issuer", platform.issuer, "--client-id", platform.client_id,
                      "--login-url", platform.url + "/auth", "--token-url", platform.url + "/token",
                      "--jwks-url", platform.url + "/jwks", "--deployment", platform.deployment)
        _walk(service, browser, platform)
    finally:
        platform.stop()


def _walk(service, browser, platform: Platform) -> None:
    teacher = browser.new_context(locale="en-US", ignore_https_errors=True)
    page = teacher.new_page()
    platform.user = {"sub": "t-1", "name": "Prof. Wang", "role": "Instructor"}
    page.goto(f"{platform.url}/course?tool={service.url}")
    frame = _tool_frame(page)
    frame.wait_for_selector("#create-course", timeout=30_000)
    frame.click("#create-course")  # a POST in the frame that needs the session cookie (the pending launch)
    frame.wait_for_url(re.compile(re.escape(service.url) + r"/homework/"), timeout=30_000)
    assert "Sign out" in frame.content()
    session = next(c for c in teacher.cookies(service.url) if c["name"] == "session")
    assert session["sameSite"] == "None" and session["secure"]
    teacher.close()

    student = browser.new_context(locale="en-US", ignore_https_errors=True)
    page = student.new_page()
    platform.user = {"sub": "s-7", "name": "Li Lei", "role": "Learner"}
    dropped = []

    def drop_cookies(route) -> None:  # the browser keeps none of the tool's cookies in this frame
        dropped.append([c["name"] for c in student.cookies(service.url)])
        student.clear_cookies(domain="localhost")
        route.continue_()

    page.route(re.compile(re.escape(platform.url) + r"/auth\?.*"), drop_cookies)
    page.goto(f"{platform.url}/course?tool={service.url}&storage=1")
    frame = _tool_frame(page)
    frame.wait_for_url(re.compile(re.escape(service.url) + r"/(homework|login)"), timeout=30_000)
    frame.wait_for_load_state()
    assert "/login" not in frame.url, frame.url
    assert any(name.startswith("lti1p3-state") for name in dropped[0])  # there was a state cookie to lose
    assert page.evaluate("window.ltiLog") == ["lti.put_data", "lti.get_data"]
    assert "Sign out" in frame.content()
    with frame.expect_navigation():
        frame.click("nav.mainnav a[href='/homework/']")  # the next page in the frame: still signed in
    frame.wait_for_load_state()
    assert "Sign out" in frame.content() and "/login" not in frame.url
    student.close()
