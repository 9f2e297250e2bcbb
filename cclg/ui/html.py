"""HTML built so that stored text is always data: every value is escaped unless it is ``Markup``.

``h(template, **values)`` fills a ``string.Template`` with each value escaped (``html.escape``, quotes
too), except ``Markup``, which is HTML this module or a page built. Links are made by ``href`` from a
path of fixed words and ids checked against the ids' own patterns, and query values percent-encoded:
a memory holding ``<script>``, an ``onerror=`` attribute or a ``javascript:`` URL renders as text,
and no stored string ever starts a URL. The lineage graph is drawn here too, as inline SVG text.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from string import Template
from typing import Any
from urllib.parse import quote, urlencode

from cclg.core.ids import is_valid_id, is_valid_session_id


class Markup(str):
    """Text that is HTML already (built here or by a page from escaped parts): never escaped again.
    Adding text to it escapes the text (``Markup + str`` is ``Markup``)."""

    __slots__ = ()

    def __add__(self, other: str) -> Markup:
        return Markup(str.__add__(self, esc(other)))

    def __radd__(self, other: str) -> Markup:
        return Markup(str.__add__(esc(other), self))


def esc(value: object) -> Markup:
    """``value`` as HTML text: ``Markup`` as it is, anything else ``str()``-ed and escaped (quotes too)."""
    if isinstance(value, Markup):
        return value
    return Markup(html.escape("" if value is None else str(value), quote=True))


def h(template: str, **values: object) -> Markup:
    """``template`` (``$name`` placeholders) with each value escaped (``esc``)."""
    return Markup(Template(template).substitute({k: esc(v) for k, v in values.items()}))


def join(parts: Iterable[object], sep: str = "") -> Markup:
    """The parts, each escaped, one after the other."""
    return Markup(sep.join(esc(p) for p in parts))


# What an id in a link may be: checked here, so a link holds nothing a record could choose.
_ID_KINDS = {"memory": "mem", "patch": "patch"}


def href(*path: str, **query: object) -> Markup:
    """A link within the view: ``path`` is fixed words, a ``memory:ID``/``patch:ID``/``session:ID`` part
    (``/memory/ID``...) holds an id checked against its pattern (``ValueError`` otherwise), and ``query``
    is percent-encoded (empty values left out)."""
    parts = []
    for part in path:
        kind, _, value = part.partition(":")
        if not value:
            if not part.isidentifier():
                raise ValueError(f"not a fixed path word: {part!r}")
            parts.append(part)
        elif kind == "session" and is_valid_session_id(value):
            parts += [kind, quote(value, safe="")]
        elif kind in _ID_KINDS and is_valid_id(value, _ID_KINDS[kind]):
            parts += [kind, value]
        else:
            raise ValueError(f"not a {kind} id: {value!r}")
    url = "/" + "/".join(parts)
    chosen = {k: str(v) for k, v in query.items() if v not in (None, "")}
    return esc(url + ("?" + urlencode(chosen) if chosen else ""))


def memory_link(memory_id: object, text: object = None) -> Markup:
    """A link to a memory's page, or the id as text when it is not a valid memory id."""
    if isinstance(memory_id, str) and is_valid_id(memory_id, "mem"):
        return h('<a href="$url"><code>$text</code></a>', url=href(f"memory:{memory_id}"), text=text or memory_id)
    return h("<code>$text</code>", text=text or memory_id)


def session_link(session_id: object) -> Markup:
    if isinstance(session_id, str) and is_valid_session_id(session_id):
        return h('<a href="$url"><code>$id</code></a>', url=href(f"session:{session_id}"), id=session_id)
    return h("<code>$id</code>", id=session_id)


def table(headers: Iterable[str], rows: Iterable[Iterable[object]]) -> Markup:
    """A table; each cell escaped unless it is ``Markup``."""
    head = join(h("<th>$c</th>", c=c) for c in headers)
    body = join(h("<tr>$cells</tr>", cells=join(h("<td>$c</td>", c=c) for c in row)) for row in rows)
    return h("<table><thead><tr>$head</tr></thead><tbody>$body</tbody></table>", head=head, body=body)


def definitions(items: Mapping[str, object]) -> Markup:
    """A definition list of ``items`` (values escaped unless ``Markup``)."""
    return h("<dl>$items</dl>", items=join(h("<dt>$k</dt><dd>$v</dd>", k=k, v=v) for k, v in items.items()))


def options(name: str, choices: Iterable[str], chosen: str | None, *, blank: str = "any") -> Markup:
    """A ``<select>`` named ``name`` over ``choices``, ``chosen`` selected, with a blank first choice."""
    items = [h('<option value="">$b</option>', b=blank)]
    for choice in choices:
        mark = Markup(" selected") if choice == chosen else Markup("")
        items.append(h('<option value="$v"$mark>$v</option>', v=choice, mark=mark))
    return h('<select name="$name" id="f-$name">$items</select>', name=name, items=join(items))


def hidden(name: str, value: object) -> Markup:
    return h('<input type="hidden" name="$name" value="$value">', name=name, value=value)


STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2430;background:#f6f7f9}
header{background:#1d2430;color:#fff;padding:.6em 1.2em;display:flex;gap:1.2em;align-items:center}
header a{color:#cfe3ff;text-decoration:none}header b{margin-right:1em}
main{padding:1em 1.6em;max-width:72em}
h1{font-size:1.4em;margin:.2em 0 .6em}h2{font-size:1.1em;margin:1.4em 0 .5em}
table{border-collapse:collapse;background:#fff;margin:.4em 0}td,th{border:1px solid #dde1e7;padding:.3em .55em;
vertical-align:top;text-align:left}th{background:#eef1f5}
.content{white-space:pre-wrap;background:#fff;border:1px solid #dde1e7;padding:.7em;border-radius:4px}
.status{font-size:.85em;padding:.05em .45em;border-radius:3px;background:#e4e8ee}
.status-active,.status-active_session{background:#d7f2dd}.status-superseded,.status-forgotten{background:#f5dede}
form.inline{display:inline}fieldset{background:#fff;border:1px solid #dde1e7;margin:.6em 0}
textarea{width:100%;min-height:4em}input[type=text]{min-width:22em}.error{background:#fde8e8;padding:.6em}
.why{color:#4a5566;font-size:.92em}dl{display:grid;grid-template-columns:max-content auto;gap:.2em 1em}
dt{font-weight:600}dd{margin:0}.event{background:#fff;border-left:4px solid #9db4d6;margin:.5em 0;padding:.4em .8em}
.filters select,.filters input{margin-right:.5em}.counts{display:flex;gap:2.5em;flex-wrap:wrap}
svg text{font:12px system-ui,sans-serif}
"""


def page(title: str, body: Markup, *, nav: Markup) -> Markup:
    """The whole document: ``title`` (escaped), the navigation and ``body``."""
    return h(
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>$title · cclg</title>'
        '<meta name="viewport" content="width=device-width"><style>$style</style></head>'
        "<body><header><b>cclg</b>$nav</header><main><h1>$title</h1>$body</main></body></html>",
        title=title,
        style=Markup(STYLE),
        nav=nav,
        body=body,
    )


# ---------------------------------------------------------------- the lineage graph

BOX_W, BOX_H, GAP_Y, LEFT = 420, 54, 46, 150


def lineage_svg(lineage: Mapping[str, Any], current: str) -> Markup:
    """The versions of a memory (``memory_lineage``'s members, oldest first) as boxes, and each patch
    as arrows from its targets to the versions it made, labelled with its operation: inline SVG."""
    members = sorted(lineage.get("members", []), key=lambda m: (str(m.get("created_at")), str(m.get("id"))))
    row = {m["id"]: i for i, m in enumerate(members)}
    height = max(1, len(members)) * (BOX_H + GAP_Y)
    parts = []
    for i, member in enumerate(members):
        y = i * (BOX_H + GAP_Y) + 10
        stroke = "#1d5fbf" if member["id"] == current else "#8a96a8"
        content = str(member.get("content", ""))
        short = content if len(content) <= 60 else content[:59] + "…"
        parts.append(
            h(
                '<g class="version" data-id="$id"><rect x="$x" y="$y" width="$w" height="$bh" rx="5" fill="#fff" '
                'stroke="$stroke" stroke-width="2"/><text x="$tx" y="$ty1">$id · $status</text>'
                '<text x="$tx" y="$ty2" fill="#4a5566">$short</text></g>',
                **{"id": member["id"], "x": LEFT, "y": y, "w": BOX_W, "bh": BOX_H, "stroke": stroke},
                **{"tx": LEFT + 10, "ty1": y + 20, "ty2": y + 40, "status": member.get("status"), "short": short},
            )
        )
    for step in lineage.get("steps", []):
        for target in step.get("targets", []):
            for new in step.get("new", []):
                if target in row and new in row:
                    parts.append(_edge(row[target], row[new], str(step.get("operation")), bool(step.get("undone"))))
    return h(
        '<svg class="lineage" xmlns="http://www.w3.org/2000/svg" width="$w" height="$h" role="img" '
        'aria-label="lineage graph"><defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" '
        'markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>'
        "$parts</svg>",
        w=LEFT + BOX_W + 20,
        h=height,
        parts=join(parts),
    )


def _edge(source: int, target: int, operation: str, undone: bool) -> Markup:
    """An arrow on the left of the boxes from row ``source`` to row ``target``, with its operation."""
    y1 = source * (BOX_H + GAP_Y) + 10 + BOX_H // 2
    y2 = target * (BOX_H + GAP_Y) + 10 + BOX_H // 2
    bend = LEFT - 30 - 12 * abs(target - source)
    dash = Markup(' stroke-dasharray="4 3"') if undone else Markup("")
    label = operation + (" (undone)" if undone else "")
    return h(
        '<g class="edge"><path d="M$x,$y1 C$b,$y1 $b,$y2 $x,$y2" fill="none" stroke="#555" stroke-width="1.6"'
        '$dash marker-end="url(#arrow)"/><text x="4" y="$ym">$label</text></g>',
        x=LEFT,
        y1=y1,
        y2=y2,
        b=bend,
        ym=(y1 + y2) // 2 + 4,
        dash=dash,
        label=label,
    )
