"""The report and compare pages in headless Chromium: they load from disk with no console
error and no network request, draw their curves, and the trajectory browser shows an
episode's turns and tokens with the colours its ledger says."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from fixture_runs import write_scored_runs
from turnrl.report.colours import PALETTES
from turnrl.report.compare import compare, write_compare
from turnrl.report.episodes import read_samples

pytestmark = pytest.mark.slow


def rgb(hex_colour: str) -> str:
    r, g, b = (int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgb({r}, {g}, {b})"


NO_COLOUR = "rgba(0, 0, 0, 0)"


def test_the_report_loads_offline_and_draws_its_curves(tiny_run, open_page):
    run_dir, _ = tiny_run
    page = open_page(run_dir / "report.html")
    assert page.errors == [] and page.network == []
    for key in ("reward", "success", "entropy", "timing"):
        traces = page.page.locator(f"#fig-{key} .scatterlayer .trace, #fig-{key} .barlayer "
                                   ".trace")
        assert traces.count() >= 1, key
    # the held-out evaluations are drawn with their intervals (error bars)
    assert page.page.locator("#fig-success .errorbars path").count() > 0
    rows = page.page.locator("table.eval tbody tr")
    assert [rows.nth(i).locator("td").first.inner_text() for i in range(rows.count())] == [
        "before RL", "step 2", "after RL"]


def test_an_episode_shows_its_turns_and_tokens_coloured_by_its_mask(tiny_run, open_page):
    run_dir, _ = tiny_run
    kept = {s: read_samples(run_dir / "samples" / f"step_{s}.jsonl") for s in range(1, 5)}
    step, episodes = next((s, e) for s, e in kept.items()  # a step with a learning signal
                          if any(any(x["advantages"]) for x in e))
    page = open_page(run_dir / "report.html")
    p = page.page
    p.select_option("#step-select", str(step))
    assert p.locator("#episode-list tbody tr").count() == len(episodes)
    successes = sum(e["success"] for e in episodes)
    p.select_option("#filter-select", "success")
    assert p.locator("#episode-list tbody tr[data-i]").count() == successes
    p.select_option("#filter-select", "all")
    k = next(i for i, e in enumerate(episodes) if any(e["advantages"]))
    episode = episodes[k]
    p.locator(f"#episode-list tbody tr[data-i='{k}']").click()
    assert p.locator("#episode .msg.assistant").count() == len(episode["turn_rewards"])
    badge = p.locator("#episode .turn-badge").first.inner_text()
    assert f"reward {episode['turn_rewards'][0]:.3f}" in badge

    p.locator("#episode .modes button[data-mode=mask]").click()
    colours = p.eval_on_selector_all("#episode .tokens .tok",
                                     "spans => spans.map(s => getComputedStyle(s).backgroundColor)")
    assert len(colours) == len(episode["token_ids"])
    assert colours == [rgb(PALETTES["mask"][0]) if m else NO_COLOUR
                       for m in episode["loss_mask"]]

    p.locator("#episode .modes button[data-mode=advantage]").click()
    colours = p.eval_on_selector_all("#episode .tokens .tok",
                                     "spans => spans.map(s => getComputedStyle(s).backgroundColor)")
    palette = [rgb(c) for c in PALETTES["advantage"]]
    middle = len(palette) // 2
    for colour, sampled, advantage in zip(colours, episode["loss_mask"], episode["advantages"],
                                          strict=True):
        if not sampled:
            assert colour == NO_COLOUR
        elif advantage > 0:
            assert palette.index(colour) > middle  # blue side
        elif advantage < 0:
            assert palette.index(colour) < middle  # red side
    group = [e for e in episodes if e["group_id"] == episode["group_id"]]
    assert p.locator("#episode .group .member").count() == len(group)
    title = p.locator("#episode .tokens .tok").nth(episode["loss_mask"].index(1)).get_attribute(
        "title")
    assert "mask 1" in title and "advantage" in title and "entropy" in title
    assert page.errors == []


def test_the_compare_page_has_one_row_per_group_with_intervals(tmp_path, open_page):
    runs = (write_scored_runs(tmp_path, "grpo", [0.1, 0.3, 0.5])
            + write_scored_runs(tmp_path, "rloo", [0.4, 0.6, 0.8])
            + write_scored_runs(tmp_path, "ppo", [0.2, 0.2, 0.3]))
    out = write_compare(compare(runs, reps=300), tmp_path / "compare.html")
    page = open_page(out)
    assert page.errors == [] and page.network == []
    rows = page.page.locator("#compare-table tbody tr")
    assert [rows.nth(i).get_attribute("data-group") for i in range(rows.count())] == [
        "grpo", "ppo", "rloo"]
    for i in range(rows.count()):
        assert re.search(r"\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]", rows.nth(i).inner_text())
    assert page.page.locator("#fig-curves .scatterlayer .trace").count() == 6  # line + band
    assert page.page.locator("#fig-profile .scatterlayer .trace").count() == 6


@pytest.mark.skipif(not os.environ.get("TURNRL_SCREENSHOTS"),
                    reason="set TURNRL_SCREENSHOTS=DIR to write the pages' screenshots")
def test_screenshots(tiny_run, tmp_path, open_page):
    """The pictures in docs/: ``TURNRL_SCREENSHOTS=docs pytest tests/browser -k screenshots``;
    ``TURNRL_SCREENSHOT_RUN`` (a run dir) and ``TURNRL_SCREENSHOT_COMPARE`` (a glob of runs)
    choose real runs instead of this test's."""
    from turnrl.report import expand_runs
    from turnrl.report.report import write_report

    out = Path(os.environ["TURNRL_SCREENSHOTS"])
    out.mkdir(parents=True, exist_ok=True)
    run_dir = Path(os.environ.get("TURNRL_SCREENSHOT_RUN") or tiny_run[0])
    report = write_report([run_dir], tmp_path / "report.html")
    page = open_page(report, width=1400)
    page.page.screenshot(path=str(out / "report-curves.png"))
    browser = json.loads(page.page.locator("#report-data").text_content())["runs"][0]["browser"]
    mixed = [step for step in browser["steps"]  # steps whose kept episodes disagree
             if len({r["success"] for r in browser["index"] if r["step"] == step}) == 2]
    step = mixed[-1] if mixed else browser["steps"][-1]
    row = min((r for r in browser["index"] if r["step"] == step),
              key=lambda r: (r["success"], -r["turns"]))  # a failure with the most turns
    page.page.select_option("#step-select", str(step))
    page.page.locator(f"#episode-list tbody tr[data-i='{row['i']}']").click()
    top, height = page.page.eval_on_selector(
        "#trajectories", "e => [e.getBoundingClientRect().top + window.scrollY, e.offsetHeight]")
    page.page.screenshot(path=str(out / "report-trajectory.png"), full_page=True,
                         clip={"x": 0, "y": top, "width": 1400, "height": min(height, 1150)})
    pattern = os.environ.get("TURNRL_SCREENSHOT_COMPARE")
    runs = (expand_runs([pattern]) if pattern else
            write_scored_runs(tmp_path, "grpo", [0.1, 0.3, 0.5])
            + write_scored_runs(tmp_path, "rloo", [0.4, 0.6, 0.8]))
    compared = write_compare(compare(runs), tmp_path / "compare.html")
    open_page(compared, width=1280).page.screenshot(path=str(out / "compare.png"),
                                                    full_page=True)


def test_titles_legends_and_step_axes_read_cleanly(tiny_run, open_page):
    """The toolbar never covers a title (upright at the right edge, on hover), the timing
    legend tells rollout from update, and step axes tick at whole steps."""
    run_dir, _ = tiny_run
    page = open_page(run_dir / "report.html", width=900)
    for key in ("reward", "success", "timing"):
        plot = page.page.locator(f"#fig-{key}")
        plot.hover()
        title = plot.locator(".gtitle").bounding_box()
        bar = plot.locator(".modebar").bounding_box()
        assert title and bar, key
        assert title["x"] + title["width"] <= bar["x"] or \
            title["y"] + title["height"] <= bar["y"], (key, title, bar)  # no overlap
        ticks = plot.locator(".xtick text").evaluate_all("els => els.map(e => e.textContent)")
        assert ticks and all(re.fullmatch(r"\d+", t) for t in ticks), (key, ticks)
    swatches = page.page.locator("#fig-timing .legend .traces .legendpoints path")
    styles = {swatches.nth(i).get_attribute("style") for i in range(swatches.count())}
    assert len(styles) >= 2  # rollout and update drawn differently in the legend
