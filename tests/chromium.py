"""Headless Chromium driven over the Chrome DevTools Protocol, for tests and benchmarks.

Debian's /usr/bin/chromium is used as installed: nothing is downloaded. The port is read from the
DevToolsActivePort file Chromium writes into its user-data dir (`--remote-debugging-port=0` lets it
pick a free one), so parallel runs never collide.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
SKIP_REASON = f"{CHROMIUM} is absent (install it: apt-get install -y chromium)"

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", "--disable-sync", "--remote-debugging-port=0",
         "--mute-audio", "--hide-scrollbars"]


def available() -> bool:
    return CHROMIUM.is_file()


class CDPError(RuntimeError):
    pass


class Browser:
    """One Chromium process with one page; `send` is a blocking CDP call, events are kept in order.

    Console errors, uncaught exceptions and browser log errors are collected in `errors`, so a test
    can assert a page ran cleanly.
    """

    def __init__(self, width: int = 1280, height: int = 900, timeout: float = 30.0):
        from websockets.sync.client import connect

        self.timeout = timeout
        self.profile = Path(tempfile.mkdtemp(prefix="kame-chromium-"))
        self.proc = subprocess.Popen(
            [str(CHROMIUM), *FLAGS, f"--user-data-dir={self.profile}", f"--window-size={width},{height}",
             "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            port = self._wait_port()
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=timeout) as r:
                targets = json.load(r)
            page = next(t for t in targets if t.get("type") == "page")
            self._stack = contextlib.ExitStack()
            self.ws = self._stack.enter_context(connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=timeout))
        except BaseException:
            self.close()
            raise
        self._ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.send("Page.enable")
        self.send("Runtime.enable")
        self.send("Log.enable")
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)

    def _wait_port(self) -> int:
        marker = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if marker.is_file():
                lines = marker.read_text().split()
                if lines:
                    return int(lines[0])
            if self.proc.poll() is not None:
                raise CDPError(f"chromium exited with {self.proc.returncode} before opening its DevTools port")
            time.sleep(0.05)
        raise CDPError("chromium did not open its DevTools port in time")

    def _record(self, msg: dict[str, Any]) -> None:
        self.events.append(msg)
        method, p = msg.get("method"), msg.get("params", {})
        if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            self.errors.append("console: " + " ".join(str(a.get("value", a.get("description", ""))) for a in p["args"]))
        elif method == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            self.errors.append("exception: " + d.get("exception", {}).get("description", d.get("text", "")))
        elif method == "Log.entryAdded" and p["entry"].get("level") == "error":
            self.errors.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}".strip())

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        mid = next(self._ids)
        self.ws.send(json.dumps({"id": mid, "method": method, "params": params}))
        deadline = time.monotonic() + self.timeout
        while True:
            msg = json.loads(self.ws.recv(timeout=max(0.01, deadline - time.monotonic())))
            if msg.get("id") == mid:
                if "error" in msg:
                    raise CDPError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self._record(msg)

    def wait_event(self, method: str, timeout: float | None = None) -> dict[str, Any]:
        """The first not-yet-consumed event named `method` (waiting for it if needed)."""
        for i, e in enumerate(self.events):
            if e.get("method") == method:
                return self.events.pop(i)
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            msg = json.loads(self.ws.recv(timeout=max(0.01, deadline - time.monotonic())))
            self._record(msg)
            if msg.get("method") == method:
                self.events.remove(msg)
                return msg

    def navigate(self, url: str) -> None:
        """Open `url` and return once its load event fired."""
        self.events = [e for e in self.events if e.get("method") != "Page.loadEventFired"]
        self.send("Page.navigate", url=url)
        self.wait_event("Page.loadEventFired")

    def eval(self, expression: str) -> Any:
        """Value of a JS expression (promises awaited); a thrown error raises CDPError."""
        r = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            raise CDPError(d.get("exception", {}).get("description", d.get("text", "evaluation failed")))
        return r["result"].get("value")

    def drain(self, seconds: float = 0.2) -> None:
        """Collect events (console errors) that arrive within `seconds`."""
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            try:
                self._record(json.loads(self.ws.recv(timeout=left)))
            except TimeoutError:
                return

    def click(self, selector: str) -> None:
        """A real mouse click at the centre of the first element matching `selector`."""
        box = self.eval(f"""(() => {{ const e = document.querySelector({json.dumps(selector)});
            if (!e) return null; e.scrollIntoView({{block: 'center'}}); const r = e.getBoundingClientRect();
            return [r.left + r.width / 2, r.top + r.height / 2]; }})()""")
        if box is None:
            raise CDPError(f"nothing matches {selector!r}")
        x, y = box
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def screenshot(self, path: str | Path, full_page: bool = False) -> Path:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            m = self.send("Page.getLayoutMetrics")["cssContentSize"]
            params.update(captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": m["width"], "height": min(m["height"], 8000), "scale": 1})
        data = self.send("Page.captureScreenshot", **params)["data"]
        path = Path(path)
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        stack = getattr(self, "_stack", None)
        if stack is not None:
            try:
                stack.close()
            except Exception:  # the browser may already have dropped the connection
                pass
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
