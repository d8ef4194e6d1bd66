"""``cap log export``: transcript JSON, Markdown, and an HTML page checked in headless Chromium."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.replay.helpers import assert_clean, cap, read_log

TASK = "write notes.txt: hello <b>world</b>\nrun: rm -rf /tmp/cap-export-nothing\nsome words"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run"]
CHROMIUMS_OWN = re.compile(r"^https?://([a-z0-9-]+\.)*(google\.com|googleapis\.com|gvt1\.com)/")
"""Hosts Chromium itself calls in the background despite the flags (not the page)."""


@pytest.fixture(scope="module")
def run_log(tmp_path_factory) -> Path:
    cwd = tmp_path_factory.mktemp("export")
    result = cap("run", "--binding", "stream-json", "--task", TASK, "--permissions", "allow",
                 "--headless", "--log", "run.caplog", cwd=cwd)
    assert_clean(result, 0)
    return cwd / "run.caplog"


def test_transcript_is_the_sessions_full_event_log(run_log):
    result = cap("log", "export", str(run_log), "--transcript", cwd=run_log.parent)
    assert_clean(result, 0)
    doc = json.loads(result.stdout)
    assert doc["mime_type"] == "application/vnd.cap.coding.transcript.v1+json"
    envs = read_log(run_log)
    session = [e for e in envs if e.stream == doc["session_id"]]
    assert [e[0] for e in doc["events"]] == [e.seq for e in session]
    assert doc["events"][0][4]["kind"] == "session.created"


def test_markdown_reads_turn_by_turn(run_log):
    result = cap("log", "export", str(run_log), "--markdown", cwd=run_log.parent)
    assert_clean(result, 0)
    md = result.stdout
    assert md.startswith("# Session sess-")
    assert "## Turn 1" in md and "> write notes.txt: hello <b>world</b>" in md
    assert "**Tool `Write`** (done)" in md
    assert "**Permission:** allow_once by policy:allow, medium risk: Write" in md
    assert "**Permission:** deny by policy:allow, high risk: Bash" in md
    assert "```diff" in md and "+hello <b>world</b>" in md
    assert "- outcome: completed after 1 turn(s)" in md


class _Resources(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.fetching: list[str] = []
        self.tags: set[str] = set()

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        for name, value in attrs:
            if name in ("src", "href", "srcset", "data", "poster", "action") and value:
                self.fetching.append(f"<{tag} {name}={value}>")


def chromium(*args: str, timeout: float = 90) -> subprocess.CompletedProcess:
    exe = shutil.which("chromium")
    assert exe, "Debian chromium is not installed (apt-get install -y chromium; .ci/run does)"
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=timeout)


def test_html_is_one_self_contained_page_that_renders_in_chromium(run_log, tmp_path):
    page = tmp_path / "session.html"
    result = cap("log", "export", str(run_log), "--html", "--out", str(page),
                 cwd=run_log.parent)
    assert_clean(result, 0, f"to {page}")
    text = page.read_text()
    parser = _Resources()
    parser.feed(text)
    assert parser.fetching == [] and "script" not in parser.tags and "link" not in parser.tags
    assert "url(" not in text and "@import" not in text and "http" not in text.lower().replace(
        "http-equiv", "")
    assert "&lt;b&gt;world&lt;/b&gt;" in text and "<b>world</b>" not in text  # escaped

    dom = chromium("--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    rows = re.findall(r"<tr><td>(\d+)</td>", html)
    envs = [e for e in read_log(run_log) if e.stream.startswith("sess-")]
    assert [int(r) for r in rows] == [e.seq for e in envs]  # the timeline: every event
    assert 'id="timeline"' in html and "<h2>Turn 1</h2>" in html
    assert 'class="decision deny"' in html and 'class="decision allow"' in html
    assert '<span class="add">+hello &lt;b&gt;world&lt;/b&gt;</span>' in html  # the diff
    assert 'class="tool"' in html

    shot, net = tmp_path / "shot.png", tmp_path / "net.json"
    drawn = chromium(f"--screenshot={shot}", "--window-size=1000,1400",
                     f"--log-net-log={net}", page.as_uri())
    assert drawn.returncode == 0, drawn.stderr[-2000:]
    assert shot.stat().st_size > 20_000  # a drawn page, not a blank one
    urls = set(re.findall(r'"url":"([^"]+)"', net.read_text()))
    page_urls = {u for u in urls if not CHROMIUMS_OWN.match(u)}
    assert page_urls <= {page.as_uri()}, page_urls


def test_export_failure_paths(run_log, tmp_path):
    assert_clean(cap("log", "export", str(run_log), "--html", "--session", "sess-nope",
                     cwd=tmp_path), 2, "no session 'sess-nope'")
    assert_clean(cap("log", "export", "missing.caplog", "--markdown", cwd=tmp_path), 2,
                 "missing.caplog: no such log file")
    assert_clean(cap("log", "export", str(run_log), "--html", "--out",
                     str(tmp_path / "no" / "dir" / "x.html"), cwd=tmp_path), 2, "--out")
