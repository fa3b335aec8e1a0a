"""Self-contained HTML pages: a Jinja template, its CSS and script, plotly.js and the data,
all inlined, so the file opens from disk with no network.

Data goes in ``<script type="application/json">`` elements, which the browser does not parse
until the page's script asks (``JSON.parse(element.textContent)``): the report's main data
in one, each embedded episode in its own, read when it is opened.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

from turnrl.io import atomic_write_text, run_write

__all__ = ["json_for_html", "render", "write_page"]

HERE = Path(__file__).parent


def json_for_html(value: Any) -> str:
    """JSON that cannot end its ``<script>`` element early (``</`` is written ``<\\/``)."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False).replace(
        "</", "<\\/").replace("<!--", "<\\!--")


@cache
def _plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


@cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"),
                              autoescape=True, trim_blocks=True, lstrip_blocks=True,
                              undefined=jinja2.StrictUndefined)


def render(template: str, context: Mapping[str, Any], *, scripts: tuple[str, ...] = (),
           documents: Mapping[str, str] | None = None) -> str:
    """``templates/<template>`` with the shared CSS, plotly.js, ``static/plots.js`` (draws
    ``data["figures"]``), ``static/<scripts>``, the ``data`` of ``context`` as JSON and
    ``documents`` (element id → JSON text)."""
    static = HERE / "static"
    code = "\n".join((static / name).read_text(encoding="utf-8")
                     for name in ("plots.js", *scripts))
    return _environment().get_template(template).render(
        **context, css=(static / "page.css").read_text(encoding="utf-8"), script=code,
        plotly_js=_plotly_js(), data_json=json_for_html(context["data"]),
        documents=documents or {})


def write_page(path: Path, html: str) -> Path:
    """Write ``html`` to ``path`` atomically (a reader never sees half a page)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with run_write("the report", path, len(html.encode())):
        atomic_write_text(path, html)
    return path
