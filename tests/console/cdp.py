"""A headless Chromium that stays open, driven over the Chrome DevTools Protocol (its
websocket): the page keeps its event stream while a test changes the platform, evaluates
expressions in the page and takes screenshots. Debian's `chromium`, no downloaded browser; the
protocol's client is the ``websockets`` package the platform already installs."""

from __future__ import annotations

import base64
import itertools
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
from websockets.sync.client import ClientConnection, connect

from tests.rtrl.browser import chromium


class Browser:
    """Chromium showing ``url`` at ``size``; :meth:`close` ends it."""

    def __init__(self, url: str, profile: Path, size: tuple[int, int] = (1400, 2200)) -> None:
        profile.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-dev-shm-usage", f"--user-data-dir={profile}",
             "--remote-debugging-port=0", f"--window-size={size[0]},{size[1]}", url],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self._ids = itertools.count(1)
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.is_file() and port_file.read_text().strip()):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.close()
                raise RuntimeError("chromium did not open its DevTools port")
            time.sleep(0.05)
        port = int(port_file.read_text().splitlines()[0])
        page = self._page_target(port, deadline)
        self.ws: ClientConnection = connect(page, max_size=None, open_timeout=30)
        self.call("Runtime.enable")

    def _page_target(self, port: int, deadline: float) -> str:
        while time.monotonic() < deadline:
            try:
                targets = httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=2).json()
            except httpx.HTTPError:
                targets = []
            pages = [t for t in targets if t.get("type") == "page"]
            if pages:
                return pages[0]["webSocketDebuggerUrl"]
            time.sleep(0.05)
        self.close()
        raise RuntimeError("chromium shows no page")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """One protocol command and its result (events that arrive meanwhile are dropped)."""
        ident = next(self._ids)
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=30))
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (JSON-able values)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout_s: float, every_s: float = 0.02) -> float:
        """Seconds until ``expression`` is truthy in the page (an expression that throws,
        on a page still loading, is not yet; an element is truthy, though the protocol would
        send it by value as ``{}``); raises after ``timeout_s``."""
        start = time.monotonic()
        error = None
        while time.monotonic() - start < timeout_s:
            try:
                if self.evaluate(f"Boolean({expression})"):
                    return time.monotonic() - start
            except RuntimeError as exc:
                error = exc
            time.sleep(every_s)
        raise TimeoutError(f"the page never showed: {expression} (last error: {error})")

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data["data"]))
        return path

    def close(self) -> None:
        ws = getattr(self, "ws", None)
        if ws is not None:
            ws.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
