"""A real browser (Debian's headless Chromium, driven by Selenium) uses the centered_bertscore Space:
types pairs, presses Score, waits for the scores and the heatmap, checks the score against the
module's, and saves a screenshot; then types bad input and finds the module's message on the page.
Every request the page makes must go to the loopback interface."""

from __future__ import annotations

import json
import shutil
from urllib.parse import urlsplit

import pytest

pytest.importorskip("gradio")
webdriver = pytest.importorskip("selenium.webdriver")

# Debian's chromium (what .ci/run installs); else the Google Chrome that GitHub's runners ship.
CHROMIUM = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
CHROMEDRIVER = shutil.which("chromedriver")
APP = "centered_bertscore"
PREDICTIONS = ["the cat sat on the mat", "hello there general kenobi"]
REFERENCES = ["a cat was sitting on the mat", "hello there general kenobi"]
LAYER = 4


@pytest.fixture
def browser(tmp_path):
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip("Debian's chromium and chromium-driver are not installed (.ci/run installs them)")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1400,2600",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
        # Belt and braces: no host name but the loopback one resolves.
        "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    # An explicit driver path: Selenium Manager (which may download drivers) never runs.
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def _type(driver, selector: str, text: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    box = driver.find_element(By.CSS_SELECTOR, selector)
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(Keys.DELETE)
    box.send_keys(text)  # "\n" is the Enter key: a new line in a multi-line box
    assert box.get_attribute("value") == text


def _requested_hosts(driver) -> set[str]:
    hosts = set()
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            parts = urlsplit(message["params"]["request"]["url"])
            if parts.scheme in ("http", "https", "ws", "wss"):
                hosts.add(parts.hostname)
    return hosts


def test_browser_scores_and_draws_the_heatmap(browser, running_app, load_metric, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    _, url = running_app(APP)
    wait = WebDriverWait(browser, 60)
    browser.get(url)
    wait.until(ec.element_to_be_clickable((By.CSS_SELECTOR, "#score-button")))

    _type(browser, "#predictions textarea", "\n".join(PREDICTIONS))
    _type(browser, "#references textarea", "\n".join(REFERENCES))
    metric = load_metric(APP)
    # First with the page's settings untouched (they must be the module's defaults), then a layer.
    for settings in ({}, {"num_layers": LAYER}):
        for name, value in settings.items():
            _type(browser, f"#param-{name} textarea, #param-{name} input", str(value))
        browser.find_element(By.CSS_SELECTOR, "#score-button").click()
        expected = metric.compute(predictions=PREDICTIONS, references=REFERENCES, **settings)
        hashcode = (By.CSS_SELECTOR, "#hashcode textarea")
        wait.until(ec.text_to_be_present_in_element_attribute(hashcode, "value", expected["hashcode"]))
        wait.until(ec.text_to_be_present_in_element((By.CSS_SELECTOR, "#summary"), f"{sum(expected['f1']) / 2:.4f}"))
        summary = browser.find_element(By.CSS_SELECTOR, "#summary").text
        for key in ("precision", "recall", "f1"):
            assert f"{sum(expected[key]) / 2:.4f}" in summary, key
    image = wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, "#heatmap img")))
    wait.until(lambda d: d.execute_script("return arguments[0].complete && arguments[0].naturalWidth", image) > 300)
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", image)
    screenshot = tmp_path / f"{APP}.png"
    assert browser.save_screenshot(str(screenshot)) and screenshot.stat().st_size > 10_000

    # Bad input: three predictions, two references; the module's own message shows on the page.
    with pytest.raises(ValueError) as error:
        metric.compute(predictions=["a", "b", "c"], references=["a", "b"])
    _type(browser, "#predictions textarea", "a\nb\nc")
    _type(browser, "#references textarea", "a\nb")
    browser.find_element(By.CSS_SELECTOR, "#score-button").click()
    wait.until(ec.text_to_be_present_in_element((By.TAG_NAME, "body"), str(error.value)))
    assert "Traceback" not in browser.find_element(By.TAG_NAME, "body").text
    browser.save_screenshot(str(tmp_path / f"{APP}-error.png"))

    assert _requested_hosts(browser) == {"127.0.0.1"}


def test_phone_width_stacks_the_boxes_and_shows_the_score_table(browser, running_app, tmp_path):
    # At 400 px the prediction and reference boxes stack (line i of one above line i of the other
    # would wrap side by side out of pairing), and the score table fits the screen once scrolled to.
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    _, url = running_app(APP)
    browser.set_window_size(400, 900)
    wait = WebDriverWait(browser, 60)
    browser.get(url)
    wait.until(ec.element_to_be_clickable((By.CSS_SELECTOR, "#score-button")))
    _type(browser, "#predictions textarea", "\n".join(PREDICTIONS))
    _type(browser, "#references textarea", "\n".join(REFERENCES))
    predictions, references = (
        browser.find_element(By.CSS_SELECTOR, f"#{box}") for box in ("predictions", "references")
    )
    assert references.rect["y"] >= predictions.rect["y"] + predictions.rect["height"] - 1  # stacked
    browser.find_element(By.CSS_SELECTOR, "#score-button").click()
    wait.until(ec.text_to_be_present_in_element((By.CSS_SELECTOR, "#scores"), PREDICTIONS[0]))
    table = browser.find_element(By.CSS_SELECTOR, "#scores")
    browser.execute_script("arguments[0].scrollIntoView({block: 'start'})", table)
    width = browser.execute_script("return window.innerWidth")
    box = browser.execute_script("return arguments[0].getBoundingClientRect().toJSON()", table)
    assert box["left"] >= 0 and box["right"] <= width + 1, box  # the table is in view, not pushed off screen
    # Every score column is in view (scores first and rounded; the long texts scroll after them).
    headers = browser.execute_script(
        "return [...arguments[0].querySelectorAll('th')].map(c => [c.innerText.trim(), c.getBoundingClientRect().right])",
        table,
    )
    scores = [right for text, right in headers if text in ("precision", "recall", "f1")]
    assert len(scores) == 3 and max(scores) <= width + 1, headers
    # Nothing stays on top of it: a warning toast (here: batch centering over 3 texts) goes away.
    on_top = "const r = arguments[0].getBoundingClientRect(); return arguments[0].contains(document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2))"
    WebDriverWait(browser, 30).until(lambda d: d.execute_script(on_top, table))
    screenshot = tmp_path / f"{APP}-400px.png"
    assert browser.save_screenshot(str(screenshot)) and screenshot.stat().st_size > 5_000
