"""The course website in a real browser: headless Chromium (the system's, through Selenium)
opens the home page from a local server, follows its contents to a tutorial with a plot,
returns home and follows them to a lab, and sees the plot drawn and a code cell on screen.

Skipped, with the reason, where no Chromium, chromedriver or selenium is installed; CI sets
``CI`` (GitHub Actions) or ``DTF_REQUIRE_BROWSER=1`` (.ci/run), and there it fails instead.
Install the browser on Debian or Ubuntu with ``sudo apt install chromium chromium-driver``."""

from __future__ import annotations

import functools
import os
import shutil
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.helpers import built_site, site_required

pytestmark = [pytest.mark.xdist_group("site"), pytest.mark.slow]

#: CI must run this test: there a missing browser fails it instead of skipping it.
REQUIRED = site_required()
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
#: Seconds for a page to load, and for an element to appear.
PAGE_LOAD_S = 30
WAIT_S = 20
#: The pages the test walks to (titles as the contents list them).
TUTORIAL, TUTORIAL_PAGE = "05 · GPU memory", "notebooks/05_gpu_memory.html"
LAB, LAB_PAGE = "Lab 02 · Towers", "labs/02_towers_lab.html"
SITE_TITLE = "Distributed TensorFlow, hands-on"


def _chromedriver() -> str | None:
    found = shutil.which("chromedriver")
    folder = os.environ.get("CHROMEWEBDRIVER")  # GitHub's runner images put it there
    if found is None and folder and Path(folder, "chromedriver").is_file():
        found = str(Path(folder, "chromedriver"))
    return found


def _missing() -> str | None:
    """Why this machine cannot run the test, or None."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (make dev installs it)"
    if not any(shutil.which(name) for name in BROWSERS):
        return "no Chromium or Chrome (Debian/Ubuntu: sudo apt install chromium chromium-driver)"
    if _chromedriver() is None:
        return "no chromedriver (Debian/Ubuntu: sudo apt install chromium-driver)"
    return None


def test_a_browser_can_run_where_ci_requires_it():
    """With ``CI`` or ``DTF_REQUIRE_BROWSER=1`` set, a machine without the browser fails here
    rather than passing with the browser test skipped."""
    reason = _missing()
    if REQUIRED:
        assert reason is None, f"the browser test must run here, but: {reason}"
    elif reason is not None:
        pytest.skip(reason)


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[str]:
    """The built site on a local server at 127.0.0.1 (a free port): its base URL."""
    reason = _missing()
    if reason is not None:
        if REQUIRED:
            pytest.fail(f"the browser test must run here, but: {reason}")
        pytest.skip(reason)
    out = built_site(tmp_path_factory).out
    handler = functools.partial(_QuietHandler, directory=str(out))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def browser(served):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    binary = next(shutil.which(name) for name in BROWSERS if shutil.which(name))
    options.binary_location = binary
    for flag in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root, where Chromium's sandbox refuses to start
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--no-first-run",
        "--window-size=1280,1000",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=_chromedriver()))
    driver.set_page_load_timeout(PAGE_LOAD_S)
    driver.set_script_timeout(WAIT_S)
    try:
        yield driver
    finally:
        driver.quit()


def _follow(driver, where: str, title: str, page: str) -> None:
    """Click the link titled ``title`` in ``where`` (a CSS selector) and wait for ``page``."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    links = driver.find_elements(By.CSS_SELECTOR, f"{where} a")
    link = next((a for a in links if a.text.strip() == title), None)
    assert link is not None, f"no link {title!r} in {where}: {[a.text for a in links][:50]}"
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", link)
    link.click()
    WebDriverWait(driver, WAIT_S).until(ec.url_contains(page))


def _visible(driver, selector: str):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    element = WebDriverWait(driver, WAIT_S).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, selector) or False,
        message=f"nothing matches {selector}",
    )[0]
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    WebDriverWait(driver, WAIT_S).until(
        lambda d: element.is_displayed(), message=f"{selector} is not displayed"
    )
    return element


def test_the_home_page_leads_to_a_tutorial_with_its_plot_and_to_a_lab(browser, served):
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(served)
    assert SITE_TITLE in browser.title
    _follow(browser, "ul.contents", TUTORIAL, TUTORIAL_PAGE)
    assert browser.find_element("css selector", "h1").text == TUTORIAL
    plot = _visible(browser, ".output.image img")
    WebDriverWait(browser, WAIT_S).until(
        lambda d: d.execute_script(
            "return arguments[0].complete && arguments[0].naturalWidth", plot
        ),
        message="the plot image did not load",
    )
    assert plot.size["width"] > 100 and plot.size["height"] > 50
    assert _visible(browser, "div.cell.code > pre.code-cell").text.strip()
    _follow(browser, "nav.sidebar", SITE_TITLE, "index.html")  # home again, by its title
    _follow(browser, "ul.contents", LAB, LAB_PAGE)
    assert browser.find_element("css selector", "h1").text == LAB
    assert "NUM_DEVICES" in _visible(browser, "div.cell.code > pre.code-cell").text
    launch = _visible(browser, "a.launch-colab")
    assert launch.get_attribute("href").endswith("/labs/02_towers_lab.ipynb")
