"""The live page against a running platform: a real broker, a collector and a gateway on it
(`rtrl serve`, following the `checkpoints` topic), a warehouse catalog with a canary's live
A/B, the checkpoint registry, and `rtrl console` serving the page to headless Chromium over
the DevTools protocol. The page stays open while the test changes the platform, and each
change must reach its DOM without a reload:

1. an invalid event sent through the collector is dead-lettered: its reason appears with the
   collector's count, read from the collector's Prometheus metrics;
2. a canary look (`release.canary_io.look`, what `rtrl canary decide` runs) on thin data
   waits: look 1 appears with its recorded bound beside the margin;
3. more users land, the next look rolls the canary out: it is promoted and announced, the page
   shows it serving and the gateway's switch to it (from the gateway's metrics); the page's
   link re-runs the canary's decision from its evidence and reproduces it.

Each change's delay until the page shows it is measured (and must stay within a few refresh
intervals); the run leaves a screenshot of the page in docs/images/console.png.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx

from checkpoints.publish import announce_missing
from checkpoints.record import CANARY, PROMOTED
from release.canary_config import CanaryConfig, canary_stage
from release.canary_io import look
from tests.console.cdp import Browser
from tests.console.platform import REPO, ConsoleProcess, land_canary
from tests.support.checkpoints import register_variant
from tests.support.collector import valid_event
from tests.support.gateway import Serve, api_key
from warehouse.store import Store

REFRESH_S = 0.5
SCREENSHOT = REPO / "docs" / "images" / "console.png"


def _row(table: str, **attrs: str) -> str:
    """A JavaScript expression: the row of ``table`` with these data-* attributes, or null."""
    selector = "".join(f'[data-{k}="{v}"]' for k, v in attrs.items())
    return f"document.querySelector('#{table} tbody tr{selector}')"


def test_the_page_follows_the_platform_without_a_reload(
    tmp_path: Path, kafka_bootstrap: str, topic_names, collector, registry
) -> None:
    config = CanaryConfig(percent=50, min_users=40, margin=1.5, min_exposure_hours=0,
                          user_window_hours=0)  # fmt: skip
    register_variant(registry, "t-0001", "t-0000", seed=1, status=CANARY,
                     evals={"canary": canary_stage("t-0001", config)})  # fmt: skip
    announce_missing(kafka_bootstrap, topic_names.checkpoints, registry)
    store = Store(str(tmp_path / "warehouse"))
    catalog = Path(land_canary(store, range(30), "t-0001", "t-0000", seed=1))

    keys = tmp_path / "keys.sqlite"
    api_key(keys)
    gateway = Serve(["--registry", str(registry.root), "--key-db", str(keys), "--bootstrap",
                     kafka_bootstrap, "--topic-prefix", topic_names.prefix],
                    tmp_path / "serve.log")  # fmt: skip
    gateway_metrics = f"http://127.0.0.1:{gateway.metrics_port}/metrics"
    console = browser = None
    try:
        console = ConsoleProcess(["--registry", str(registry.root), "--catalog", str(catalog),
                                  "--refresh-s", str(REFRESH_S), "--metrics",
                                  str(collector.running.metrics_url), gateway_metrics],
                                 tmp_path / "console.log")  # fmt: skip
        browser = Browser(console.url, tmp_path / "chromium")
        browser.log = console.log  # type: ignore[attr-defined]
        browser.wait_for("Number(document.body.dataset.version) > 0", 30)
        # what the platform holds before any change: the canary's arms, its experiment's
        # users landed in the warehouse, no look yet, no dead letter
        assert browser.evaluate("document.querySelector('#serving').dataset.canary") == "t-0001"
        assert browser.evaluate(f"{_row('serving', arm='canary')}.textContent").endswith("50.0 %")
        assert (
            browser.evaluate(f"{_row('observed-arms', arm='canary')}.cells[1].textContent") == "15"
        )
        assert browser.evaluate(_row("canary-looks", canary="t-0001")) is None
        assert (
            browser.evaluate("document.querySelectorAll('#dlq tbody tr[data-reason]').length") == 0
        )
        assert browser.evaluate("charts['reward-chart'].data.datasets.length") > 0
        delays = {}

        # 1. a dead letter: an event the contract refuses
        started = time.monotonic()
        answer = collector.post([valid_event(type="edit.teleported")])
        reason = answer.json()["results"][0]["reason"]
        delays["dead letter"] = _seen_after(started, browser, _row("dlq", source="collector",
                                                                    reason=reason))  # fmt: skip
        assert (
            browser.evaluate(f"{_row('dlq', source='collector', reason=reason)}.dataset.total")
            == "1"
        )

        # 2. a canary look on thin data: it waits, and the page shows look 1 and its bound
        started = time.monotonic()
        first = look(registry, catalog, "t-0001")
        assert first.verdict == "wait"
        first_look = _row("canary-looks", canary="t-0001", look="1")
        delays["canary look"] = _seen_after(started, browser, first_look)
        recorded = next(c for c in first.comparisons if c.metric == "mean_reward")
        cells = browser.evaluate(f"[...{_row('canary-looks', canary='t-0001', look='1')}.cells]"
                                 ".map((c) => c.textContent)")  # fmt: skip
        assert cells[2] == "wait" and cells[5] == "−1.500"
        if recorded.low is not None:
            assert cells[4].startswith(f"[{recorded.low:.4f}")

        # 3. more users land; the next look rolls the canary out and it is announced
        catalog = Path(land_canary(store, range(30, 130), "t-0001", "t-0000", seed=2))
        started = time.monotonic()
        second = look(registry, catalog, "t-0001")
        assert second.verdict == "rollout", second.reasons
        assert registry.get("t-0001").status == PROMOTED
        announce_missing(kafka_bootstrap, topic_names.checkpoints, registry)
        delays["promotion"] = _seen_after(
            started, browser, "document.querySelector('#serving').dataset.promoted === 't-0001'"
        )
        assert (
            browser.evaluate(f"{_row('candidates', checkpoint='t-0001')}.dataset.status")
            == "promoted"
        )
        # the gateway's own metrics: it switched to the promoted canary
        browser.wait_for(f"{_row('ingest', what='gateway switched checkpoint')}"
                         "?.cells[1].textContent === '1'", 60)  # fmt: skip

        # the page's link re-runs the canary's decision from its evidence
        href = browser.evaluate(f"{_row('candidates', checkpoint='t-0001')}"
                                ".querySelector('a.rerun-canary').href")  # fmt: skip
        rerun = httpx.get(href, timeout=120).json()
        assert rerun["outcome"]["decision"] == "rollout" and rerun["outcome"]["reproduced"] is True

        # every service by its name and state; 4. the gateway dies: its row says so, named
        gateway_row = _row("services", url=gateway_metrics)
        assert browser.evaluate(f"{gateway_row}.cells[0].textContent") == "gateway"
        assert browser.evaluate(f"{gateway_row}.dataset.up") == "true"
        collector_row = _row("services", url=str(collector.running.metrics_url))
        assert browser.evaluate(f"{collector_row}.cells[0].textContent") == "collector"
        browser.screenshot(SCREENSHOT)
        started = time.monotonic()
        gateway.stop()
        delays["dead service"] = _seen_after(started, browser,
                                             f"{gateway_row}?.dataset.up === 'false'")  # fmt: skip
        assert browser.evaluate(f"{gateway_row}.cells[0].textContent") == "gateway"
        assert browser.evaluate(f"{gateway_row}.cells[1].textContent").startswith("down: ")
        print(json.dumps({k: round(v, 3) for k, v in delays.items()}))
        # within the refresh interval, plus reading the sources and drawing, with room for a
        # loaded machine; a page that needs a reload never gets there
        assert all(d < 6 * REFRESH_S + 2 for d in delays.values()), delays
    finally:
        if browser is not None:
            browser.close()
        if console is not None:
            console.stop()
        gateway.stop()


def _seen_after(started: float, browser: Browser, expression: str) -> float:
    """Seconds from ``started`` (just before the change) until the page shows it."""
    try:
        browser.wait_for(expression, timeout_s=20)
    except TimeoutError as exc:  # what the server had to show, beside what the page shows
        page = browser.evaluate("document.body.innerText")
        got = httpx.get(browser.evaluate("location.origin") + "/api/snapshot").json()
        snapshot = {
            "version": got["version"],
            "read_at": got["read_at"],
            **got["health"],
            "page_errors": browser.evaluate("drawErrors"),
        }
        log = Path(browser.log).read_text()[-6000:] if hasattr(browser, "log") else ""
        raise AssertionError(
            f"{exc}\nsnapshot: {json.dumps(snapshot)[:4000]}\nlog: {log}\npage: {page[:300]}"
        ) from None
    return time.monotonic() - started
