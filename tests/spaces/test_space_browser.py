"""A real browser (Debian's headless Chromium, driven by Selenium) uses the Spaces. On the
centered_bertscore Space it types pairs, presses Score, waits for the scores and the heatmap,
checks the score against the module's; then types bad input and finds the module's message on the
page; every request the page makes must go to the loopback interface. Every app is then opened at
1400 and 400 px and scores its own example, with a screenshot of each (kept in the folder named
by MOVERKIT_SCREENSHOTS, if set); at 400 px (a phone) the Score button is in the first screen,
every score header says its direction, the heatmap fits its box with its title and colour bar,
and an empty box gives one error message."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from spaceserver import APPS

pytest.importorskip("gradio")
webdriver = pytest.importorskip("selenium.webdriver")

pytestmark = pytest.mark.integration  # a browser and a served app

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
            if not browser.find_elements(By.CSS_SELECTOR, f"#param-{name}"):  # in the closed "More settings"
                browser.find_element(By.CSS_SELECTOR, "#more-settings .label-wrap").click()
                wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, f"#param-{name}")))
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
    # The previous press's results are gone: no old score stands under the error.
    assert browser.find_element(By.CSS_SELECTOR, "#hashcode textarea").get_attribute("value") == ""
    assert browser.find_element(By.CSS_SELECTOR, "#summary").text.strip() == ""
    assert PREDICTIONS[0] not in browser.find_element(By.CSS_SELECTOR, "#scores").text
    browser.save_screenshot(str(tmp_path / f"{APP}-error.png"))

    assert _requested_hosts(browser) == {"127.0.0.1"}


SHOTS_VARIABLE = "MOVERKIT_SCREENSHOTS"
"""A folder to keep the screenshots in (else the test's temporary folder), to look at them."""

SETTINGS = """return [...document.querySelectorAll('[id^="param-"]')].filter(p => !p.querySelector('input[type=file]'))
  .map(p => [p.id, [...p.querySelectorAll('input, textarea')].map(i => i.type === 'checkbox' ? String(i.checked)
  : i.value || i.placeholder).join(' ')])"""
"""Per setting of the page (an upload aside): the text it shows, its value or, blank, its placeholder."""

TOASTS = "return [...document.querySelectorAll('[data-testid=toast-body]')].map(t => t.innerText)"

RECT = "return arguments[0].getBoundingClientRect().toJSON()"

LOADED = "return arguments[0].complete && arguments[0].naturalWidth"


DIRECTIONS = ("(higher is closer)", "(lower is closer)")

PHONE_SCREEN = 740
"""The height of a phone's first screen, in CSS pixels (a 400 x 900 window shows about 757)."""


@pytest.mark.parametrize("name", APPS)
def test_every_app_reads_well_at_both_widths(name, browser, running_app, tmp_path):
    """Each app at 1400 and 400 px, scoring its own first example as the page opens: every setting
    shows the value it uses; at 400 px the two boxes stack (line i of one above line i of the
    other, not wrapped side by side out of pairing) and the Score button is in the first screen,
    the settings but the main ones closed; the example scores without a warning; every score
    header (the means and the table) says its direction; the scores have at most 4 decimals and,
    scrolled to, the score table and every score column are in view; the heatmap is drawn to the
    width of its box (its label layout is tested in test_space_demo), so that its title and colour
    bar are in view; an empty box gives one error message; no placeholder text."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    shots = Path(os.environ.get(SHOTS_VARIABLE) or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    app, url = running_app(name)
    wait = WebDriverWait(browser, 120)
    for width in (1400, 400):
        browser.set_window_size(width, 900)
        browser.get(url)
        wait.until(ec.element_to_be_clickable((By.CSS_SELECTOR, "#score-button")))
        assert "_PLACEHOLDER}" not in browser.page_source
        # Before any score the table is headed by its text columns (Gradio's own: "1 2 3").
        headers = browser.find_elements(By.CSS_SELECTOR, "#scores th")
        assert [th.text.strip() for th in headers] == ["#", "prediction", "references"]
        shown = dict(browser.execute_script(SETTINGS))
        assert shown and all(text.strip() and "(default)" not in text for text in shown.values()), shown

        predictions, references = (
            browser.find_element(By.CSS_SELECTOR, f"#{box}") for box in ("predictions", "references")
        )
        stacked = references.rect["y"] >= predictions.rect["y"] + predictions.rect["height"] - 1
        assert stacked == (width == 400), (predictions.rect, references.rect)
        first = predictions.find_element(By.TAG_NAME, "textarea").get_attribute("value").split("\n")[0]
        button = browser.find_element(By.CSS_SELECTOR, "#score-button")
        if width == 400:  # the texts and the Score button first: no scrolling to press it
            assert browser.execute_script("return window.scrollY") == 0
            assert button.rect["y"] + button.rect["height"] <= PHONE_SCREEN, button.rect
            visible = [p for p in browser.find_elements(By.CSS_SELECTOR, '[id^="param-"]') if p.is_displayed()]
            assert 1 <= len(visible) <= 3, [p.get_attribute("id") for p in visible]
        if width == 1400:
            first_shot = shots / f"{name}-{width}px-first.png"
            assert browser.save_screenshot(str(first_shot))

        button.click()
        wait.until(ec.text_to_be_present_in_element((By.CSS_SELECTOR, "#scores"), first))
        image = wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, "#heatmap img")))
        wait.until(lambda d, image=image: d.execute_script(LOADED, image) > 200)
        assert browser.execute_script(TOASTS) == []  # the page's own example gives no warning
        # The heatmap is drawn to its box's width: shown at its own size (9 pt labels), and whole.
        natural, rendered, box = browser.execute_script(
            "return [arguments[0].naturalWidth, arguments[0].getBoundingClientRect().width,"
            " document.querySelector('#heatmap').getBoundingClientRect().width]",
            image,
        )
        assert rendered <= box and natural <= box and abs(rendered - natural) <= 1, (natural, rendered, box)

        table = browser.find_element(By.CSS_SELECTOR, "#scores")
        headers = [th.text.strip().replace("\n", " ") for th in table.find_elements(By.CSS_SELECTOR, "th")]
        scores = headers[1 : headers.index("prediction")]
        assert scores and all(header.endswith(DIRECTIONS) for header in scores), headers
        summary = browser.find_element(By.CSS_SELECTOR, "#summary")
        labels = [
            td.text.strip().replace("\n", " ") for td in summary.find_elements(By.CSS_SELECTOR, "tbody td:first-child")
        ]
        assert labels == scores, (labels, scores)  # the means, one row per score, with the same headers
        assert "To compare" in summary.text and "identical texts" in summary.text
        for cell in table.find_elements(By.CSS_SELECTOR, "tbody tr td:nth-child(2)"):
            assert len(cell.text.strip().partition(".")[2]) <= 4, cell.text
        # The whole page in one screenshot, then (at 400 px) the score table scrolled into view.
        height = browser.execute_script("return document.documentElement.scrollHeight")
        browser.set_window_size(width, height + 120)
        page = shots / f"{name}-{width}px-page.png"
        assert browser.save_screenshot(str(page)) and page.stat().st_size > 5_000
        if width == 400:
            browser.set_window_size(width, 900)
            browser.execute_script("arguments[0].scrollIntoView({block: 'start'})", table)
            inner = browser.execute_script("return window.innerWidth")
            box = browser.execute_script(RECT, table)
            assert box["left"] >= 0 and box["right"] <= inner + 1 and -1 <= box["top"] < 900, box
            rights = browser.execute_script(
                "return [...arguments[0].querySelectorAll('th')].map(c => [c.innerText.trim().replaceAll('\\n', ' '), c.getBoundingClientRect().right])",
                table,
            )
            assert all(right <= inner + 1 for text, right in rights if text in scores), rights
            on_top = "const r = arguments[0].getBoundingClientRect(); return arguments[0].contains(document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2))"
            assert browser.execute_script(on_top, table)  # nothing (a toast) covers it
            screenshot = shots / f"{name}-{width}px.png"
            assert browser.save_screenshot(str(screenshot)) and screenshot.stat().st_size > 5_000
            # The heatmap in view: its title and colour bar inside the screen, nothing cut.
            browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", image)
            box = browser.execute_script(RECT, image)
            assert box["left"] >= 0 and box["right"] <= inner + 1, box
            assert browser.save_screenshot(str(shots / f"{name}-{width}px-heatmap.png"))

            # An empty box: one message, under the button; no toast, no error state in each output.
            browser.execute_script("window.scrollTo(0, 0)")
            _type(browser, "#predictions textarea", "")
            browser.find_element(By.CSS_SELECTOR, "#score-button").click()
            error = wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, "#error")))
            wait.until(ec.text_to_be_present_in_element((By.CSS_SELECTOR, "#error"), "type at least one prediction"))
            assert browser.execute_script(TOASTS) == []
            body = browser.find_element(By.TAG_NAME, "body").text
            assert body.count("Error") == 1 and body.count("type at least one prediction") == 1, body
            assert error.rect["y"] + error.rect["height"] <= PHONE_SCREEN
            assert browser.find_element(By.CSS_SELECTOR, "#summary").text.strip() == ""
            assert browser.save_screenshot(str(shots / f"{name}-{width}px-error.png"))


def test_a_warning_shows_once(browser, running_app, load_metric):
    """A press whose module warns (one pair under moverscore's IDF: every token has IDF 0) shows
    the warning once, over results that are there."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    prediction, reference = "The weather is cold today.", "It is freezing today. ||| Today is a cold day."
    with pytest.warns(UserWarning, match="IDF 0 on every token"):
        load_metric("moverscore").compute(predictions=[prediction], references=[reference.split(" ||| ")])
    _, url = running_app("moverscore")
    wait = WebDriverWait(browser, 120)
    browser.get(url)
    wait.until(ec.element_to_be_clickable((By.CSS_SELECTOR, "#score-button")))
    _type(browser, "#predictions textarea", prediction)
    _type(browser, "#references textarea", reference)
    browser.find_element(By.CSS_SELECTOR, "#score-button").click()
    wait.until(ec.text_to_be_present_in_element((By.CSS_SELECTOR, "#scores"), prediction))
    image = wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, "#heatmap img")))
    wait.until(lambda d: d.execute_script(LOADED, image) > 300)
    toasts = browser.execute_script(TOASTS)
    assert len(toasts) == 1 and "IDF 0 on every token" in toasts[0], toasts
