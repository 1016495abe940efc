"""A small OpenAI-compatible chat server on loopback, with injectable latency and faults.

It answers `POST /v1/chat/completions` with a short deterministic reply built from the prompt,
so recipes, benchmarks and tests can exercise the real HTTP path of the `openai` backend
offline. Faults (HTTP 500, 429 with Retry-After, hangs, garbage or empty bodies, a body trickled
one byte at a time) are drawn from a seeded generator; `override` scripts a reply for chosen
requests (a 429 on first sight, a failure for chosen dialogues, an error body that echoes the key,
`refusal(...)`: a 400 with a reason, `Trickle()`: the usual answer sent one byte every half
second, which no per-read timeout ever cuts, `RESET`: the connection reset (TCP RST) with no
answer); `reply=` scripts the text of
replies: a function of the request's messages and how many times that same conversation was asked
before (a retry), e.g. to play a model that drops the answer the first time and keeps it the
second. It keeps what it saw: arrival times, and every answer it sent with the tokens it billed.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import socket
import struct
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Faults:
    error_500: float = 0.0
    rate_429: float = 0.0
    hang: float = 0.0
    garbage: float = 0.0
    retry_after: float = 0.2
    hang_seconds: float = 5.0
    trickle: float = 0.0  # the answer's body one byte every `trickle_interval` seconds
    trickle_interval: float = 0.5


@dataclass(frozen=True)
class Trickle:
    """An override's answer: the usual reply, its headers at once and then its body one byte every
    `interval` seconds, until the client hangs up (or the server stops)."""

    interval: float = 0.5


RESET = "reset"  # an override's answer: the connection is reset (RST) before any byte of an answer


def refusal(reason: str, status: int = 400, code: str = "content_filter") -> tuple[int, dict, dict]:
    """An override's answer: the service refuses this request (as OpenAI's content filter or a
    context-length check does), with `reason` as the error message."""
    return status, {"error": {"message": reason, "type": "invalid_request_error", "param": None, "code": code}}, {}


def reply_for(messages: list[dict]) -> str:
    """A plausible short spoken reply: echoes what the prompt shows of the hint when it shows some,
    else a few of the last words (never so many that it would read as repeating the user)."""
    text = messages[-1].get("content", "") if messages else ""
    m = re.search(r"(?:Hint|Clue words|Clue|will say): (.+?)(?:\. [A-Z]|$)", text, re.M)
    base = m.group(1) if m else " ".join((text.split("\n")[-3] if text.count("\n") >= 2 else text).split()[-4:])
    words = re.sub(r"[^A-Za-z' ]", " ", base).split()[:18]
    return "I think " + " ".join(words or ["that", "is", "a", "good", "question"]) + "."


class _Handler(BaseHTTPRequestHandler):
    server: "LoopbackServer._Server"
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes: avoid the 40 ms delayed-ACK stall

    def log_message(self, *args) -> None:  # keep test and benchmark output clean
        pass

    def _send(self, code: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        try:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away (killed, or gave up on a held request)

    def _trickle(self, raw: bytes, interval: float) -> None:
        """Headers now, then the body one byte every `interval` s; records when the client hung up
        (the answer counts as sent only when its last byte is)."""
        owner, started, sent = self.server.owner, time.monotonic(), 0
        body, prompt_tokens, completion_tokens = self._answer(raw)
        self.close_connection = True
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.flush()
            for i in range(len(body)):
                if owner._stopping.wait(interval):
                    break
                self.wfile.write(body[i: i + 1])
                self.wfile.flush()
                sent += 1
        except (BrokenPipeError, ConnectionResetError):
            pass
        with owner._lock:
            owner.trickles.append((started, time.monotonic(), sent, len(body)))
        if sent == len(body):
            owner._answered(raw, prompt_tokens, completion_tokens)

    def _reset(self) -> None:
        """Close the connection with a TCP RST (SO_LINGER 0): the client reads a reset, no answer."""
        self.close_connection = True
        self._was_reset = True
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()

    def finish(self) -> None:
        if getattr(self, "_was_reset", False):
            return  # nothing to flush on a socket that was reset
        super().finish()

    def _answer(self, raw: bytes) -> tuple[bytes, int, int]:
        """The usual reply to a chat request, and the tokens it bills."""
        owner = self.server.owner
        body = json.loads(raw)
        messages = body.get("messages", [])
        text = owner.reply(messages, owner._asked(messages)) if owner.reply else reply_for(messages)
        prompt_tokens = sum(len(m.get("content", "")) for m in body.get("messages", [])) // 4
        out = {
            "id": "chatcmpl-" + hashlib.sha1(raw).hexdigest()[:12], "object": "chat.completion", "created": 0,
            "model": body.get("model", "loopback"),
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": len(text.split()),
                      "total_tokens": prompt_tokens + len(text.split())},
        }
        return json.dumps(out).encode(), prompt_tokens, len(text.split())

    def do_POST(self) -> None:
        owner = self.server.owner
        size = int(self.headers.get("Content-Length", 0))
        raw = self.rfile.read(size)
        if len(raw) < size:
            self.close_connection = True  # the client hung up while sending
            return
        seen = owner._record(raw)
        if not self.path.endswith("/chat/completions"):
            self._send(404, b'{"error": {"message": "not found"}}')
            return
        if owner.override is not None:
            scripted = owner.override(json.loads(raw), seen, dict(self.headers))
            if isinstance(scripted, Trickle):
                self._trickle(raw, scripted.interval)
                return
            if scripted == RESET:
                self._reset()
                return
            if scripted is not None:
                code, payload, headers = scripted
                self._send(code, json.dumps(payload).encode(), headers)
                return
        if owner.slots is not None:
            with owner.slots:  # a server of bounded capacity: at most `slots` requests in service
                time.sleep(owner.latency)
        else:
            time.sleep(owner.latency)
        f, roll = owner.faults, owner._roll()
        edges = [f.error_500, f.rate_429, f.hang, f.garbage]
        if roll < edges[0]:
            self._send(500, b'{"error": {"message": "injected server error"}}')
            return
        roll -= edges[0]
        if roll < edges[1]:
            self._send(429, b'{"error": {"message": "injected rate limit"}}', {"Retry-After": str(f.retry_after)})
            return
        roll -= edges[1]
        if roll < edges[2]:
            time.sleep(f.hang_seconds)
            self._send(500, b'{"error": {"message": "hung"}}')
            return
        roll -= edges[2]
        if roll < edges[3]:
            self._send(200, random.Random(raw).choice([b"", b"{not json", b'{"choices": []}',
                                                       b'{"id": "x", "object": "chat.completion", "created": 0, '
                                                       b'"model": "m", "choices": [{"index": 0, "finish_reason": '
                                                       b'"stop", "message": {"role": "assistant", "content": ""}}]}']))
            return
        roll -= edges[3]
        if roll < f.trickle:
            self._trickle(raw, f.trickle_interval)
            return
        body, prompt_tokens, completion_tokens = self._answer(raw)
        owner._answered(raw, prompt_tokens, completion_tokens)
        self._send(200, body)


class LoopbackServer:
    """`with LoopbackServer(latency=0.1) as srv: srv.base_url` — serves in background threads."""

    class _Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 512
        owner: "LoopbackServer"

        def handle_error(self, request, client_address) -> None:
            if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):  # a client hung up
                super().handle_error(request, client_address)

    def __init__(self, latency: float = 0.0, faults: Faults | None = None, seed: int = 0, port: int = 0,
                 slots: int | None = None,
                 override: Callable[[dict, int, dict], tuple[int, dict, dict] | Trickle | None] | None = None,
                 reply: Callable[[list[dict], int], str] | None = None):
        """`override(body, seen, headers)`: (status, JSON payload, headers) to send instead of the
        usual reply, a Trickle (the usual reply, slowly), or None; `seen` counts earlier arrivals
        of the same body."""
        self.latency = latency
        self.reply = reply
        self._conversations: dict[str, int] = {}
        self.slots = threading.BoundedSemaphore(slots) if slots else None
        self.faults = faults or Faults()
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.override = override
        self.calls = 0
        self.bodies: set[str] = set()
        self.seen: dict[str, int] = {}
        self.arrivals: list[tuple[float, str]] = []  # (time.monotonic(), sha256 of the body)
        self.answers: list[tuple[float, dict, int, int]] = []  # (time, body, prompt tokens, completion tokens)
        self.trickles: list[tuple[float, float, int, int]] = []  # (start, end, bytes sent, body bytes), when ended
        self._stopping = threading.Event()
        self._httpd = self._Server(("127.0.0.1", port), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def _roll(self) -> float:
        with self._lock:
            return self._rng.random()

    def _asked(self, messages: list[dict]) -> int:
        """How many times this conversation (its messages, whatever the seed) was asked before."""
        key = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()
        with self._lock:
            n = self._conversations.get(key, 0)
            self._conversations[key] = n + 1
        return n

    def _record(self, raw: bytes) -> int:
        digest = hashlib.sha256(raw).hexdigest()
        with self._lock:
            self.calls += 1
            self.bodies.add(digest)
            self.arrivals.append((time.monotonic(), digest))
            seen = self.seen.get(digest, 0)
            self.seen[digest] = seen + 1
            return seen

    def _answered(self, raw: bytes, prompt_tokens: int, completion_tokens: int) -> None:
        with self._lock:
            self.answers.append((time.monotonic(), json.loads(raw), prompt_tokens, completion_tokens))

    def billed(self, prompt_price: float, completion_price: float) -> float:
        """What the answers sent so far cost, in US dollars at per-million-token prices."""
        with self._lock:
            return sum(p * prompt_price + c * completion_price for _, _, p, c in self.answers) / 1e6

    def start(self) -> "LoopbackServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # trickles in progress end
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> "LoopbackServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def serve(port: int, latency: float, error_500: float = 0.0, rate_429: float = 0.0, hang: float = 0.0,
          garbage: float = 0.0, seed: int = 0, ready=None, counters=None, stop=None, slots: int | None = None) -> None:
    """Run a server in this process until `stop` (a multiprocessing Event) is set.

    Used by benchmarks to keep the server's CPU work off the client's interpreter."""
    srv = LoopbackServer(latency, Faults(error_500, rate_429, hang, garbage), seed, port, slots).start()
    if ready is not None:
        ready.put(srv._httpd.server_address[1])
    try:
        while stop is None or not stop.wait(0.05):
            if counters is not None:
                counters[0], counters[1] = srv.calls, len(srv.bodies)
        if counters is not None:
            counters[0], counters[1] = srv.calls, len(srv.bodies)
    finally:
        srv.stop()
