"""A small Chrome DevTools Protocol client over `--remote-debugging-pipe` (stdlib only).

Chromium reads NUL-terminated JSON commands on fd 3 and writes replies and events on fd 4, so
no port, no websocket and no extra package is needed. Networking is cut off by flags: a proxy
that refuses connections and a resolver that resolves nothing.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

OFFLINE_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--proxy-server=127.0.0.1:9",
    "--host-resolver-rules=MAP * ~NOTFOUND",
)


def find_chromium() -> str | None:
    """Path of a Chromium/Chrome executable, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


class Browser:
    """One headless Chromium with one page, driven over the DevTools pipe."""

    def __init__(self, executable: str, *, width: int = 1280, height: int = 900) -> None:
        self.profile = tempfile.TemporaryDirectory(prefix="tracehouse-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []

        def wire_pipe() -> None:  # runs in the child: DevTools expects exactly fds 3 and 4
            os.dup2(to_browser_r, 3)
            os.dup2(from_browser_w, 4)

        args = [
            executable,
            *OFFLINE_FLAGS,
            f"--user-data-dir={self.profile.name}",
            f"--window-size={width},{height}",
            "--remote-debugging-pipe",
            "about:blank",
        ]
        self.process = subprocess.Popen(
            args, pass_fds=(3, 4), preexec_fn=wire_pipe, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.session = self._attach_page()

    def _send(self, method: str, params: dict | None = None, session: str | None = None) -> int:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        return self._next_id

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self._from_browser], [], [], remaining)[0]:
                raise TimeoutError("no reply from chromium in time")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise RuntimeError(f"chromium closed the DevTools pipe: {self._stderr_tail()}")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def call(
        self, method: str, params: dict | None = None, *, page: bool = True, timeout: float = 30
    ) -> dict:
        """Send one command (to the page session by default) and return its result; events are kept."""
        wanted = self._send(method, params, self.session if page else None)
        deadline = time.monotonic() + timeout
        while True:
            message = self._read_message(deadline)
            if message.get("id") == wanted:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)

    def wait_event(self, method: str, timeout: float = 30) -> dict:
        """Wait for the next event of that name (or return one already received)."""
        for event in self.events:
            if event["method"] == method:
                return event
        deadline = time.monotonic() + timeout
        while True:
            message = self._read_message(deadline)
            if "method" in message:
                self.events.append(message)
                if message["method"] == method:
                    return message

    def _attach_page(self) -> str:
        targets = self.call("Target.getTargets", page=False)["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        return self.call(
            "Target.attachToTarget", {"targetId": page["targetId"], "flatten": True}, page=False
        )["sessionId"]

    def evaluate(self, expression: str, timeout: float = 30) -> Any:
        """Evaluate a JavaScript expression in the page and return its JSON value."""
        result = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            timeout=timeout,
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url: str, timeout: float = 60) -> None:
        """Navigate to url and wait for its load event."""
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable")
        self.call("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired", timeout=timeout)

    def wait_for(self, expression: str, timeout: float = 60) -> Any:
        """Poll a JavaScript expression until it is truthy and return its value."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.2)
        raise TimeoutError(f"page never satisfied: {expression}")

    def screenshot(self, target: Path, *, width: int = 1280, height: int | None = None, top: int = 0) -> Path:
        """Save a PNG of the page, `height` CSS pixels from `top` (to the end of the page when None)."""
        full = self.call("Page.getLayoutMetrics")["cssContentSize"]
        clip_h = min(height or full["height"], full["height"] - top)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": int(full["height"]), "deviceScaleFactor": 1, "mobile": False},
        )
        shot = self.call(
            "Page.captureScreenshot",
            {
                "format": "png",
                "captureBeyondViewport": True,
                "clip": {"x": 0, "y": top, "width": width, "height": clip_h, "scale": 1},
            },
        )
        target.write_bytes(base64.b64decode(shot["data"]))
        return target

    def console_problems(self) -> list[str]:
        """Console errors and warnings, uncaught exceptions and browser log errors seen so far."""
        problems = []
        for event in self.events:
            params = event.get("params", {})
            if event["method"] == "Runtime.consoleAPICalled" and params.get("type") in (
                "error",
                "warning",
                "assert",
            ):
                problems.append(
                    " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
                )
            elif event["method"] == "Runtime.exceptionThrown":
                problems.append(
                    str(params.get("exceptionDetails", {}).get("exception", {}).get("description"))
                )
            elif event["method"] == "Log.entryAdded" and params.get("entry", {}).get("level") in (
                "error",
                "warning",
            ):
                problems.append(params["entry"].get("text", ""))
        return problems

    def requests(self) -> list[str]:
        """URLs of every request the page made."""
        return [
            e["params"]["request"]["url"] for e in self.events if e["method"] == "Network.requestWillBeSent"
        ]

    def _stderr_tail(self) -> str:
        if self.process.poll() is None or self.process.stderr is None:
            return "still running"
        return self.process.stderr.read().decode(errors="replace")[-500:]

    def close(self) -> None:
        """Close the browser and remove its profile."""
        try:
            self._send("Browser.close")
            self.process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()
        for fd in (self._to_browser, self._from_browser):
            os.close(fd)
        if self.process.stderr:
            self.process.stderr.close()
        self.profile.cleanup()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
