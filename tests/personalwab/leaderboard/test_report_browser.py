"""The HTML run report in a real browser: headless Chromium driven over the DevTools protocol.

The page is opened from disk, must log no console error, must filter its task
list when a filter button is clicked, must show a review containing `<script>`
as text without running it, and is captured as a screenshot.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
import websocket

from PersonalWAB.leaderboard.report import write_report_page
from PersonalWAB.leaderboard.validate import validate_file
from PersonalWAB.runner.config import RunConfig
from PersonalWAB.runner.execute import run
from tests.conftest import HANG_GUARD_S, REPO_ROOT, wait_until

PAYLOAD = "<script>window.__pwned = 1;</script><img src=x onerror=window.__pwned=2> Nice lip balm."
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-extensions", "--mute-audio", "--remote-debugging-port=0", "--window-size=1280,1000"]


def find_chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def chromium() -> str:
    """The chromium binary; installed with scripts/install_browser.sh when missing and possible."""
    binary = find_chromium()
    if binary is None and os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["bash", str(REPO_ROOT / "scripts" / "install_browser.sh")], capture_output=True,
                       timeout=900)
        binary = find_chromium()
    if binary is None:
        pytest.skip("chromium is not installed and scripts/install_browser.sh could not install it "
                    "(needs root and apt access)")
    return binary


class DevTools:
    """A minimal DevTools protocol client: commands in order, events kept for inspection."""

    def __init__(self, ws_url: str):
        self.socket = websocket.create_connection(ws_url, timeout=HANG_GUARD_S, suppress_origin=True)
        self.last_id = 0
        self.events: list[dict] = []

    def call(self, method: str, **params) -> dict:
        self.last_id += 1
        self.socket.send(json.dumps({"id": self.last_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == self.last_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def wait_for(self, event: str, timeout_s: float = HANG_GUARD_S) -> None:
        deadline = time.monotonic() + timeout_s
        while not any(e.get("method") == event for e in self.events):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {event} within {timeout_s} s")
            self.events.append(json.loads(self.socket.recv()))

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def errors(self) -> list[dict]:
        """Console errors, uncaught exceptions and browser log errors seen so far."""
        return [e for e in self.events if
                e.get("method") == "Runtime.exceptionThrown"
                or (e.get("method") == "Runtime.consoleAPICalled" and e["params"]["type"] in ("error", "assert"))
                or (e.get("method") == "Log.entryAdded" and e["params"]["entry"]["level"] == "error")]


@pytest.fixture()
def browser(chromium, tmp_path):
    profile = tmp_path / "profile"
    process = subprocess.Popen([chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "about:blank"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port_file = profile / "DevToolsActivePort"
        wait_until(lambda: port_file.exists() and len(port_file.read_text().splitlines()) >= 2, process,
                   "chromium opened its DevTools port")
        port = port_file.read_text().splitlines()[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=HANG_GUARD_S) as response:
            page = next(t for t in json.loads(response.read()) if t["type"] == "page")
        tools = DevTools(page["webSocketDebuggerUrl"])
        yield tools
        tools.socket.close()
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.fixture(scope="module")
def report_page(tiny_data_dir, tmp_path_factory) -> tuple[Path, int, int]:
    """A report of a real run whose first review task carries an injection attempt."""
    import torch

    out = tmp_path_factory.mktemp("browser")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the tiny recommender trains many times slower with 2 threads on a busy 2-core box
    try:
        _, path, _ = run(RunConfig(data_dir=str(tiny_data_dir), out=str(out / "run.json"), agent_memory="last"),
                         log=lambda _: None)
    finally:
        torch.set_num_threads(threads)
    content = json.loads(path.read_text())
    review = next(r for r in content[1:] if r["info"]["task"]["type"] == "review")
    review["info"]["actions"][0]["arguments"]["review"] = PAYLOAD
    review["traj"][-1]["content"] = json.dumps({"review": PAYLOAD})
    content[0]["run_args"]["model"] = "<img src=x onerror=\"window.__pwned = 3\">"
    path.write_text(json.dumps(content, indent=2))
    reviews = sum(r["info"]["task"]["type"] == "review" for r in content[1:])
    return write_report_page(validate_file(path), out), len(content) - 1, reviews


def test_report_in_headless_chromium(browser, report_page, tmp_path):
    page, total, reviews = report_page
    for domain in ("Runtime", "Log", "Page"):
        browser.call(f"{domain}.enable")
    browser.call("Emulation.setDeviceMetricsOverride", width=1280, height=1000, deviceScaleFactor=1, mobile=False)
    browser.call("Page.navigate", url=page.resolve().as_uri())
    browser.wait_for("Page.loadEventFired")

    visible = "document.querySelectorAll('#task-rows tr.task:not([hidden])').length"
    assert browser.evaluate(visible) == total
    browser.evaluate("document.getElementById('filter-type-review').click()")
    assert browser.evaluate(visible) == reviews < total
    assert browser.evaluate("document.getElementById('task-count').textContent") == f"{reviews} of {total} tasks shown"

    browser.evaluate("""(() => { const box = document.getElementById('task-search');
        box.value = 'window.__pwned'; box.dispatchEvent(new Event('input')); })()""")
    assert browser.evaluate(visible) == 1
    browser.evaluate("document.querySelector('#task-rows tr.task:not([hidden])').click()")
    assert browser.evaluate(f"document.getElementById('task-rows').innerText.includes({json.dumps(PAYLOAD)})")
    assert browser.evaluate("document.body.innerText.includes('<img src=x onerror')")  # the model name, as text
    assert browser.evaluate("typeof window.__pwned") == "undefined"
    assert browser.evaluate("document.querySelectorAll('script').length") == 2
    assert browser.evaluate("document.querySelectorAll('img:not(.plot)').length") == 0

    browser.evaluate("document.querySelector('#task-rows tr.task:not([hidden])').scrollIntoView()")
    shot = browser.call("Page.captureScreenshot", format="png", captureBeyondViewport=False)
    screenshot = tmp_path / "report.png"
    screenshot.write_bytes(base64.b64decode(shot["data"]))
    assert screenshot.stat().st_size > 10_000
    assert browser.errors() == []



GAINED = 3  # tasks the baseline copy fails that the run solves


@pytest.fixture(scope="module")
def compared_page(report_page, tiny_data) -> tuple[Path, list[dict]]:
    """The run's page against a baseline copy that fails the run's first solved tasks, with the
    benchmark data (target titles and real reviews)."""
    from PersonalWAB.leaderboard.analysis import is_solved
    from PersonalWAB.leaderboard.compare import compare_files
    from PersonalWAB.results import build_header

    page, _, _ = report_page
    run_file = page.parent / "run.json"
    content = json.loads(run_file.read_text())
    records = content[1:]
    for record in [r for r in records if is_solved(r)][:GAINED]:
        record["action_acc"], record["res_acc"] = [0.0] * len(record["action_acc"]), [0.0] * len(record["res_acc"])
    baseline = page.parent / "baseline.json"
    baseline.write_text(json.dumps([build_header(content[0]["run_args"], records), *records]))
    (comparison,) = compare_files([baseline, run_file])
    out = page.parent / "compared"
    return write_report_page(validate_file(run_file), out, comparison=comparison, data=tiny_data), json.loads(
        run_file.read_text())[1:]


def test_compared_report_filters_flips_sorts_and_links(browser, compared_page, tiny_data):
    page, records = compared_page
    for domain in ("Runtime", "Log", "Page"):
        browser.call(f"{domain}.enable")
    browser.call("Page.navigate", url=page.resolve().as_uri())
    browser.wait_for("Page.loadEventFired")

    visible = "document.querySelectorAll('#task-rows tr.task:not([hidden])').length"
    heads = browser.evaluate("Array.from(document.querySelectorAll('table.tasks th')).map(th => th.textContent)")
    assert heads[-2:] == ["baseline R. Acc", "flip"]
    browser.evaluate("document.getElementById('filter-flip-flipped').click()")
    assert browser.evaluate(visible) == GAINED
    flips = browser.evaluate("Array.from(document.querySelectorAll('#task-rows tr.task:not([hidden])'))"
                             ".map(tr => tr.lastChild.textContent)")
    assert flips == ["gained"] * GAINED
    browser.evaluate("document.getElementById('filter-flip-all').click()")
    assert browser.evaluate(visible) == len(records)

    result_column = "Array.from(document.querySelectorAll('#task-rows tr.task')).map(tr => Number(tr.children[8]" \
                    ".textContent))"
    browser.evaluate("document.querySelector('table.tasks th[data-sort=\"8\"]').click()")
    ascending = browser.evaluate(result_column)
    assert ascending == sorted(ascending)
    browser.evaluate("document.querySelector('table.tasks th[data-sort=\"8\"]').click()")
    assert browser.evaluate(result_column) == sorted(ascending, reverse=True)
    assert browser.evaluate("document.querySelector('table.tasks th[data-sort=\"8\"]').getAttribute('aria-sort')") \
        == "descending"

    linked = len(records) // 2
    target = tiny_data.split("test")[records[linked]["task_id"]]["target"]
    browser.evaluate(f"window.location.hash = '#task-{linked + 1}'")
    assert browser.evaluate(f"!document.getElementById('task-{linked + 1}').nextSibling.hidden")
    detail = browser.evaluate(f"document.getElementById('task-{linked + 1}').nextSibling.innerText")
    assert target["product_info"]["title"] in detail and "The user's real review" in detail
    assert target["review"]["text"][:40] in detail
    assert browser.errors() == []
