"""Hostile sample: find the web server (and Redis) listening on the host's loopback and talk to it.

Listening sockets are read from /proc/net/tcp{,6}, as an attacker would, plus the usual
ports; each gets an HTTP request. A reply starting ``HTTP/`` means the host was reached:
the exception says "leaked". In the sandbox's own network namespace only the job's own
sockets exist, nothing answers HTTP, and the script raises "blocked".
"""
import socket

ports = {5000, 8000, 8080, 6379}
for table in ("/proc/net/tcp", "/proc/net/tcp6"):
    try:
        lines = open(table).read().splitlines()[1:]
    except OSError:
        continue
    for line in lines:
        fields = line.split()
        if len(fields) > 3 and fields[3] == "0A":  # LISTEN
            ports.add(int(fields[1].rsplit(":", 1)[1], 16))
reached = []
for port in sorted(ports):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as s:
            s.settimeout(1.0)
            s.sendall(b"GET /dashboard/ HTTP/1.0\r\nHost: localhost\r\nX-Hostile: distgrade\r\n\r\n")
            if s.recv(16).startswith(b"HTTP/"):
                reached.append(port)
    except OSError:
        pass
if reached:
    raise RuntimeError(f"leaked: an HTTP server answered on loopback port(s) {reached}")
raise RuntimeError(f"blocked: no HTTP server reachable on loopback ({len(ports)} ports tried)")
