"""matrix.html in a real headless browser (Debian's chromium, driven through chromedriver).

test_html.py parses the page; only a browser runs its script. These tests load a page that
``write_report`` wrote from the hand-written results file, from disk (``file://``, as a CI
artifact is opened), and check what a reader does with it: the page loads with no console
error, the filters change the rows shown and the totals row, a case's timeline opens. They
find the page's parts by the hooks reports/html.py's docstring keeps stable.

Skipped, with the command that installs them, only where chromium or chromedriver is
missing (``.ci/run`` installs both when apt can).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import Select, WebDriverWait

from crashmatrix.reports.compare import compare_runs, write_comparison
from crashmatrix.reports.results import load_results
from crashmatrix.reports.writer import write_report

from .conftest import DATA, FIXTURE

pytestmark = pytest.mark.slow

INSTALL = "apt-get update && apt-get install -y --no-install-recommends chromium chromium-driver"
# No network, no profile of a user, nothing started in the background: a browser that
# reaches out is refused by a closed network and logs errors that are not the page's.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
# The two rows of two_scenarios.json, as the matrix labels them (in group order).
READ = "read_only/read_file_plain"
SEND = "send_email/send_once"
# The page's script reacts to a click or a hash change at once; this bounds a slow CI machine.
WAIT = 10.0


def _binaries() -> tuple[str, str]:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    missing = [name for name, found in (("chromium", browser), ("chromedriver", driver)) if not found]
    if missing:
        pytest.skip(f"{' and '.join(missing)} not on PATH: `{INSTALL}` (.ci/run does it when apt can)")
    assert browser is not None and driver is not None
    return browser, driver


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[webdriver.Chrome]:
    chromium, chromedriver = _binaries()
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.add_argument("--window-size=1400,1000")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # An explicit driver path: selenium-manager is never asked to download one.
    driver = webdriver.Chrome(options=options, service=Service(chromedriver))
    try:
        yield driver
    finally:
        driver.quit()


def _page(tmp_path: Path, results_file: Path = FIXTURE) -> str:
    write_report(load_results(results_file), tmp_path)
    return (tmp_path / "matrix.html").as_uri()


def _open(browser: webdriver.Chrome, url: str) -> list[str]:
    """Load ``url``; the error-level console entries of the load (uncaught exceptions too)."""
    browser.get_log("browser")  # drop what an earlier test left in the buffer
    browser.get(url)
    WebDriverWait(browser, WAIT).until(
        lambda b: b.execute_script("return document.readyState") == "complete",
        message=f"{url} not loaded within {WAIT:.0f} s",
    )
    return [f"{e['source']}: {e['message']}" for e in browser.get_log("browser") if e["level"] == "SEVERE"]


def _shown_rows(browser: webdriver.Chrome) -> list[WebElement]:
    rows = browser.find_elements(By.CSS_SELECTOR, "table.matrix tr.row")
    return [row for row in rows if row.is_displayed()]


def _label(row: WebElement) -> str:
    return str(row.find_element(By.CSS_SELECTOR, "th[scope=row]").text)


def _visible_rows(browser: webdriver.Chrome) -> list[str]:
    """The scenario labels of the matrix rows a reader sees."""
    return [_label(row) for row in _shown_rows(browser)]


def _row_totals(browser: webdriver.Chrome) -> dict[str, str]:
    """Each shown row's total (``td.row-total``), by label."""
    total = "td.row-total"
    return {_label(row): str(row.find_element(By.CSS_SELECTOR, total).text) for row in _shown_rows(browser)}


def _totals(browser: webdriver.Chrome) -> list[str]:
    """The totals row as shown: one text per shown column, the grand total last."""
    row = browser.find_element(By.ID, "totals")
    cells = [str(cell.text) for cell in row.find_elements(By.CSS_SELECTOR, "td") if cell.is_displayed()]
    assert cells[-1] == browser.find_element(By.ID, "grand-total").text
    return cells


def _shown(browser: webdriver.Chrome) -> int:
    return int(browser.find_element(By.ID, "shown").text)


# Every hand-written results file: every kind of cell, unreachable points, a blind retrier's
# many failures with their causes and second crashes.
PAGES = [FIXTURE, DATA / "not_reachable.json", DATA / "blind_retry.json"]


@pytest.mark.parametrize("results_file", PAGES, ids=lambda p: p.stem)
def test_the_page_loads_with_no_console_error(
    browser: webdriver.Chrome, tmp_path: Path, results_file: Path
) -> None:
    errors = _open(browser, _page(tmp_path, results_file))
    assert errors == [], "console errors while loading matrix.html:\n" + "\n".join(errors)
    # The script ran to its end: it fills in how many cases are shown.
    cases = len(browser.find_elements(By.CSS_SELECTOR, "details.case"))
    assert cases and _shown(browser) == cases


def test_filters_change_the_rows_shown(browser: webdriver.Chrome, tmp_path: Path) -> None:
    assert _open(browser, _page(tmp_path)) == []
    assert _visible_rows(browser) == [READ, SEND]
    cases = _shown(browser)

    only_failures = browser.find_element(By.ID, "only-failures")
    only_failures.click()
    assert _visible_rows(browser) == [SEND]
    assert _shown(browser) == 1  # the one failing case
    only_failures.click()
    assert _visible_rows(browser) == [READ, SEND] and _shown(browser) == cases

    tool = Select(browser.find_element(By.ID, "tool-filter"))
    tool.select_by_value("read_file")
    assert _visible_rows(browser) == [READ]
    assert _shown(browser) == 3  # read_file_plain's cases
    tool.select_by_value("")
    assert _visible_rows(browser) == [READ, SEND] and _shown(browser) == cases

    boundary = Select(browser.find_element(By.ID, "boundary-filter"))
    boundary.select_by_value("after_side_effect")
    headers = [
        th.get_attribute("data-col")
        for th in browser.find_elements(By.CSS_SELECTOR, "table.matrix thead th[data-col]")
        if th.is_displayed()
    ]
    assert headers == ["after_side_effect"]
    assert _shown(browser) == 2  # one case per scenario at that crash point
    boundary.select_by_value("")
    assert _shown(browser) == cases


def test_filters_recompute_the_totals_row(browser: webdriver.Chrome, tmp_path: Path) -> None:
    """Counts are passed/cases everywhere; the totals follow the rows and columns shown."""
    assert _open(browser, _page(tmp_path)) == []
    everything = _totals(browser)
    assert everything[-1] == "6/8"
    assert _row_totals(browser) == {READ: "2/3", SEND: "4/5"}

    only_failures = browser.find_element(By.ID, "only-failures")
    only_failures.click()
    failing = _totals(browser)
    assert failing[-1] == "4/5", "the totals row did not follow 'failures only'"
    assert failing[0] == "1/1" != everything[0]  # the clean column: one scenario left, not two
    only_failures.click()
    assert _totals(browser) == everything

    tool = Select(browser.find_element(By.ID, "tool-filter"))
    tool.select_by_value("read_file")
    assert _totals(browser)[-1] == "2/3"
    assert _row_totals(browser) == {READ: "2/3"}
    tool.select_by_value("")
    assert _totals(browser) == everything

    boundary = Select(browser.find_element(By.ID, "boundary-filter"))
    boundary.select_by_value("after_side_effect")
    assert _totals(browser) == ["1/2", "1/2"]  # that column's total, and the corner
    assert _row_totals(browser) == {READ: "1/1", SEND: "0/1"}  # each row's one shown cell
    boundary.select_by_value("")
    assert _totals(browser) == everything and _row_totals(browser) == {READ: "2/3", SEND: "4/5"}


def test_a_cause_shows_only_its_cases(browser: webdriver.Chrome, tmp_path: Path) -> None:
    """The causes list's "show only" button filters the matrix to the cells with that cause."""
    assert _open(browser, _page(tmp_path)) == []
    causes = browser.find_elements(By.CSS_SELECTOR, "#causes button.cause-only")
    assert causes, "no cause to filter by in #causes"
    cause = causes[0].get_attribute("data-cause")
    assert cause == "non_idempotent_at_most_once"  # invariants come first
    causes[0].click()
    assert browser.find_element(By.ID, "cause-filter").get_attribute("value") == cause
    assert _visible_rows(browser) == [SEND]
    assert _shown(browser) == 1
    assert _totals(browser)[-1] == "4/5"


def test_the_failure_search_narrows_the_list(browser: webdriver.Chrome, tmp_path: Path) -> None:
    assert _open(browser, _page(tmp_path)) == []
    failures = len(browser.find_elements(By.CSS_SELECTOR, "#failures li.failure"))
    assert failures == 1 and browser.find_element(By.ID, "failures-shown").text == "1"
    search = browser.find_element(By.ID, "failure-search")
    search.send_keys("no such words")
    assert browser.find_element(By.ID, "failures-shown").text == "0"
    assert not any(li.is_displayed() for li in browser.find_elements(By.CSS_SELECTOR, "#failures li.failure"))
    search.clear()
    search.send_keys("SEND_ONCE")  # case-insensitive
    assert browser.find_element(By.ID, "failures-shown").text == "1"


def _case(browser: webdriver.Chrome, anchor: str) -> WebElement:
    return browser.find_element(By.ID, anchor)


def _moments(case: WebElement) -> list[str]:
    return [str(li.text) for li in case.find_elements(By.CSS_SELECTOR, "ol.timeline li") if li.is_displayed()]


def test_a_case_timeline_expands_on_click(browser: webdriver.Chrome, tmp_path: Path) -> None:
    assert _open(browser, _page(tmp_path)) == []
    # case-0: the clean run of send_email_once, a passed case, so closed at first.
    case = _case(browser, "case-0")
    assert case.tag_name == "details" and case.get_attribute("open") is None
    assert _moments(case) == []
    case.find_element(By.TAG_NAME, "summary").click()
    assert case.get_attribute("open") is not None
    assert _moments(case) == ["▶ life 1 starts", "L1user message", "■ life 1 exits normally"]
    case.find_element(By.TAG_NAME, "summary").click()
    assert _moments(case) == []


def test_a_matrix_cell_opens_its_case(browser: webdriver.Chrome, tmp_path: Path) -> None:
    assert _open(browser, _page(tmp_path)) == []
    case = _case(browser, "case-0")
    assert case.get_attribute("open") is None
    browser.find_element(By.CSS_SELECTOR, 'table.matrix a[href="#case-0"]').click()
    WebDriverWait(browser, WAIT).until(
        lambda _: case.get_attribute("open") is not None,
        message=f"clicking the cell's link did not open case-0 within {WAIT:.0f} s",
    )
    assert _moments(case)[0] == "▶ life 1 starts"
    assert browser.get_log("browser") == []


# -- the page fits a 1280 px window; each state has its own colour -------------------------------

NARROW = (1280, 900)  # a laptop's window: the tables scroll inside their box, never the page


def _compare_page(tmp_path: Path) -> str:
    runs = [load_results(path) for path in PAGES]
    _, page = write_comparison(compare_runs(runs, [path.name for path in PAGES]), tmp_path / "compare")
    return page.as_uri()


def _overflow(browser: webdriver.Chrome) -> tuple[int, int, list[str]]:
    """The document's width, the window's, and what sticks out of the window outside a
    table's scrolling box (tag, id or class, text), for the message."""
    width, window = browser.execute_script(
        "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    out = browser.execute_script(
        "return Array.from(document.querySelectorAll('body *')).filter(function(e){"
        "return e.getBoundingClientRect().right>document.documentElement.clientWidth+1"
        "&&!e.closest('.table-box');}).slice(0,5).map(function(e){"
        "return e.tagName+'#'+e.id+'.'+e.className+': '+e.textContent.slice(0,60);})"
    )
    return int(width), int(window), [str(item) for item in out]


@pytest.mark.parametrize("which", [*(p.stem for p in PAGES), "compare"])
def test_the_page_fits_a_1280_px_window_its_tables_scroll_inside_their_box(
    browser: webdriver.Chrome, tmp_path: Path, which: str
) -> None:
    url = _compare_page(tmp_path) if which == "compare" else _page(tmp_path, DATA / f"{which}.json")
    browser.set_window_size(*NARROW)
    try:
        assert _open(browser, url) == []
        width, window, out = _overflow(browser)
        assert width <= window, f"{which}: the page is {width} px wide in a {window} px window: {out}"
        # Every table of the matrix, the scorecard and the comparison is in a box that scrolls.
        tables = browser.find_elements(By.CSS_SELECTOR, "table.matrix")
        assert tables and all(
            browser.execute_script("return !!arguments[0].closest('.table-box')", table) for table in tables
        )
        shot = tmp_path / f"{which}-1280.png"
        assert browser.save_screenshot(str(shot)) and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    finally:
        browser.set_window_size(1400, 1000)


def _with_a_scenario_not_applicable(tmp_path: Path) -> Path:
    raw = json.loads(FIXTURE.read_text(encoding="utf-8"))
    skipped = {
        **raw["cases"][0],
        "node_id": "scenarios/mcp/create_issue.yaml::clean",
        "scenario": "mcp_create_issue",
        "scenario_path": "scenarios/mcp/create_issue.yaml",
        "tools": ["create_issue"],
        "idempotency": ["conditional"],  # the fixture's only scenario of its class: its rows n.a.
        "status": "not_applicable",
        "problems": ["agent has no create_issue"],
        "timeline": [],
    }
    raw["cases"].append(skipped)
    path = tmp_path / "with_na.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    return path


def _colour(browser: webdriver.Chrome, selector: str, prop: str) -> str:
    element = browser.find_element(By.CSS_SELECTOR, selector)
    return str(browser.execute_script(f"return getComputedStyle(arguments[0]).{prop}", element))


def test_not_applicable_and_not_reached_have_their_own_colours_never_the_pass_colour(
    browser: webdriver.Chrome, tmp_path: Path
) -> None:
    assert _open(browser, _page(tmp_path, _with_a_scenario_not_applicable(tmp_path))) == []
    # The matrix's cells and the scorecard's rows.
    for table in ("td.cell", "#scorecard-crash td.eval"):
        fill = {
            state: _colour(browser, f"{table}.{state}", "backgroundColor")
            for state in ("pass", "not_reached")
        }
        assert fill["pass"] != fill["not_reached"], table
    na_cell = _colour(browser, "td.cell.not_applicable", "backgroundColor")
    na_eval = _colour(browser, "#scorecard td.eval.not_applicable", "backgroundColor")
    assert na_cell == na_eval
    passed = _colour(browser, "td.cell.pass", "backgroundColor")
    reached = _colour(browser, "td.cell.not_reached", "backgroundColor")
    assert na_cell not in (passed, reached)
    # A case's border says its state: not applicable and not reached are not drawn as a pass.
    border = {
        state: _colour(browser, f"details.case.state-{state}", "borderLeftColor")
        for state in ("pass", "not_applicable", "not_reached")
    }
    assert len(set(border.values())) == 3, border
    # Each has a swatch in the scorecard's legend, coloured as its cells.
    legend = "#scorecard-legend .swatch"
    assert _colour(browser, f"{legend}.not_applicable", "backgroundColor") == na_eval
    assert _colour(browser, f"{legend}.not_reached", "backgroundColor") == reached
