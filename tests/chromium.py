"""A real headless Chromium driven over the DevTools protocol (on a pipe: no port, no
websocket library): load a page, collect its console errors, exceptions and network
requests, read its rendered DOM, take a screenshot."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time

BINARIES = ("chromium", "chromium-browser", "google-chrome", "headless_shell")


def find() -> str | None:
    for name in BINARIES:
        path = shutil.which(name)
        if path:
            return path
    return None


class Page:
    """What a page did while it loaded."""

    def __init__(self) -> None:
        self.errors: list[str] = []  # console errors and uncaught exceptions
        self.requests: list[str] = []  # every URL the page asked for
        self.text = ""  # document.body.innerText once loaded
        self.screenshot = b""  # PNG
        self.values: dict[str, object] = {}


class Browser:
    def __init__(self, binary: str, width: int = 1280, height: int = 900) -> None:
        self.profile = tempfile.mkdtemp(prefix="farmer-chromium-")
        to_r, to_w = os.pipe()
        from_r, from_w = os.pipe()
        to_r, from_w = _above_9(to_r), _above_9(from_w)  # moving them to 3 and 4 closes neither
        # fd 3: what chromium reads (commands), fd 4: what it writes (replies and events)
        self.proc = subprocess.Popen(
            [binary, "--headless", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
             "--no-first-run", "--no-default-browser-check", "--disable-extensions",
             "--disable-background-networking", "--disable-dev-shm-usage", "--hide-scrollbars",
             f"--user-data-dir={self.profile}", f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            close_fds=False, preexec_fn=lambda: (os.dup2(to_r, 3), os.dup2(from_w, 4)),
            start_new_session=True)
        os.close(to_r)
        os.close(from_w)
        self.w, self.r = to_w, from_r
        self.buf = b""
        self.next_id = 0
        self.events: list[dict] = []
        self.width, self.height = width, height

    def send(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = 30.0) -> dict:
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            m = self._read(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_for(self, method: str, timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        for m in self.events:
            if m.get("method") == method:
                return m
        while True:
            m = self._read(deadline)
            self.events.append(m)
            if m.get("method") == method:
                return m

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.r], [], [], left)[0]:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self.r, 1 << 20)
            if not chunk:
                raise EOFError("chromium closed its pipe")
            self.buf += chunk
        raw, self.buf = self.buf.split(b"\0", 1)
        return json.loads(raw)

    def load(self, path: str, evaluate: dict[str, str] | None = None, full_page: bool = True) -> Page:
        """`evaluate`: JavaScript expressions to evaluate once the page loaded, by name;
        their values land in Page.values. `full_page`: the screenshot shows the whole page,
        not just the window."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable", session=session)
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False},
                  session=session)
        self.events.clear()
        self.send("Page.navigate", {"url": "file://" + os.path.abspath(path)}, session=session)
        self.wait_for("Page.loadEventFired")
        time.sleep(0.3)  # the page's script runs on load; let its timers and paints settle
        page = Page()
        page.text = self.send("Runtime.evaluate", {"expression": "document.body.innerText", "returnByValue": True},
                              session=session)["result"].get("value", "")
        for name, expression in (evaluate or {}).items():
            page.values[name] = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                                          session=session)["result"].get("value")
        shot = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": full_page}, session=session)
        page.screenshot = base64.b64decode(shot["data"])
        for m in self.events:
            method, params = m.get("method"), m.get("params", {})
            if method == "Runtime.exceptionThrown":
                d = params["exceptionDetails"]
                page.errors.append(d.get("exception", {}).get("description") or d.get("text", "exception"))
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                page.errors.append(" ".join(str(a.get("value", a.get("description"))) for a in params.get("args", [])))
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                page.errors.append(params["entry"].get("text", ""))
            elif method == "Network.requestWillBeSent":
                page.requests.append(params["request"]["url"])
        return page

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=5)
        except (OSError, RuntimeError, TimeoutError, EOFError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()
        os.close(self.w)
        os.close(self.r)
        shutil.rmtree(self.profile, ignore_errors=True)


def _above_9(fd: int) -> int:
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return high


def png_colors(png: bytes) -> tuple[int, int, int]:
    """(width, height, distinct filtered pixel values) of a PNG: a blank page has a handful
    of values, a drawn one thousands."""
    import struct
    import zlib

    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", png[16:24])
    pos, idat = 8, b""
    while pos < len(png):
        length, kind = struct.unpack(">I4s", png[pos:pos + 8])
        if kind == b"IDAT":
            idat += png[pos + 8:pos + 8 + length]
        pos += 12 + length
    raw = zlib.decompress(idat)
    values = {raw[i:i + 4] for i in range(0, len(raw) - 4, 4)}
    return width, height, len(values)
