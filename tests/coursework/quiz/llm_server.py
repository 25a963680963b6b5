"""A small real HTTP server on 127.0.0.1 that speaks the OpenAI chat-completions protocol, for the
language-model reader's tests (no model can run here). It reads the rubric and the answer from the
request as a model would get them and replies by the answer's marker word:

- an answer holding "GARBLED": the content is not JSON; "BADQUOTE": a quote that is not in the
  answer; "MISSING": one rubric item left out; "SLOW": the reply comes after ``slow_s``;
  "HTTP500": a server error;
- any other answer: every rubric item "met", quoting the answer's first word, unless the answer
  holds "WRONG" (every item "contradicted") or "HALF" (the first item met, the others absent).
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ProtocolServer:
    def __init__(self, slow_s: float = 1.0):
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.slow_s = slow_s
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                outer.headers.append(dict(self.headers))
                if self.path != "/v1/chat/completions":
                    self.send_response(404)
                    self.end_headers()
                    return
                status, content = outer.reply(body)
                if status != 200:
                    self.send_response(status)
                    self.end_headers()
                    return
                data = json.dumps({"id": "x", "object": "chat.completion", "model": body["model"],
                                   "choices": [{"index": 0, "finish_reason": "stop",
                                                "message": {"role": "assistant", "content": content}}]}).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> "ProtocolServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def reply(self, body: dict[str, Any]) -> tuple[int, str]:
        user = body["messages"][-1]["content"]
        rubric = json.loads(user.split("RUBRIC:\n", 1)[1].split("\n\nSTUDENT ANSWER:\n", 1)[0])["rubric"]
        answer = user.split("\n\nSTUDENT ANSWER:\n", 1)[1]
        if "HTTP500" in answer:
            return 500, ""
        if "SLOW" in answer:
            time.sleep(self.slow_s)
        if "GARBLED" in answer:
            return 200, "Sure! Here is my assessment: met, met."
        word = answer.split()[0] if answer.split() else answer
        status = "contradicted" if "WRONG" in answer else "met"
        items = [{"id": it["id"], "status": status, "quote": word} for it in rubric]
        if "HALF" in answer:
            items = [items[0]] + [{"id": it["id"], "status": "absent", "quote": ""} for it in rubric[1:]]
        if "BADQUOTE" in answer:
            items[0]["quote"] = "words the student never wrote"
        if "MISSING" in answer:
            items = items[1:]
        return 200, json.dumps({"items": items})
