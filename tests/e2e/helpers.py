"""What the browser tests share: logging in, axe-core, horizontal overflow and the screenshots for reviewers.

axe-core comes from npm (``package.json``; ``make setup`` runs ``npm ci``) and is injected into each page from
``node_modules/axe-core/axe.min.js``; nothing is downloaded at test time. Screenshots go to
``var/screenshots/<role>/<page>.png``.
"""
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
AXE = REPO / "node_modules" / "axe-core" / "axe.min.js"
SCREENSHOTS = REPO / "var" / "screenshots"
BLOCKING = ("serious", "critical")


def login(page, base: str, username: str, password: str = "pw") -> None:
    """Log in through the login form and wait for the landing page (the dashboard or the rating home)."""
    page.goto(f"{base}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_label("Password").press("Enter")
    page.wait_for_url(re.compile(r".*/(dashboard|rate)/$"))


def axe_violations(page, axe_path: Path) -> list[dict]:
    """Serious and critical axe-core violations of the current page (rule id, impact, the first few targets)."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=str(axe_path))
    result = page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
    return [
        {"id": v["id"], "impact": v["impact"], "help": v["help"],
         "targets": [node["target"] for node in v["nodes"][:3]]}
        for v in result["violations"] if v["impact"] in BLOCKING
    ]


def horizontal_overflow(page) -> int:
    """How many CSS pixels the page is wider than the window (0: no horizontal scrolling)."""
    return page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")


def screenshot(page, role: str, url: str) -> None:
    """Save the whole page as ``var/screenshots/<role>/<url as a file name>.png``."""
    name = url.strip("/").replace("/", "_").replace("?", "_").replace("=", "-").replace("&", "_") or "home"
    folder = SCREENSHOTS / role
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"{name}.png"), full_page=True)


def new_page(browser, *, width: int = 1280, height: int = 900, mobile: bool = False):
    """``(context, page)``: a fresh browser context of ``width`` × ``height`` (a phone when ``mobile``), with the
    page's CSP bypassed (axe-core is injected) and actions timing out after 20 s. Close the context when done."""
    context = browser.new_context(viewport={"width": width, "height": height}, bypass_csp=True, is_mobile=mobile,
                                  has_touch=mobile)
    page = context.new_page()
    page.set_default_timeout(20_000)
    return context, page


def page_clean(page, axe_path: Path, role: str, name: str) -> None:
    """No serious or critical axe-core violation, no horizontal scrolling; the screenshot saved as ``name``."""
    assert axe_violations(page, axe_path) == [], name
    assert horizontal_overflow(page) == 0, name
    screenshot(page, role, name)
