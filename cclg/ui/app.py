"""``cclg ui``: the web view's Starlette application, its guard, its corrections and its server.

Every request passes ``Guard`` first:

- its Host header must be this server's own (``127.0.0.1:PORT`` or ``localhost:PORT``), so a page of
  another site that rebinds its name to 127.0.0.1 is refused (DNS rebinding);
- it must carry the token printed with the URL: once in the query (``?token=``), which is answered
  with a redirect that drops it and sets an ``HttpOnly``, ``SameSite=Strict`` cookie, then the cookie;
- a write (POST) must also carry the CSRF token each form holds, and come from this origin.

The pages send no script (the Content-Security-Policy forbids any), and every correction is one
library call, the one the command line makes (``api.patch``, ``api.forget``, ``api.label``,
``api.promote``, ``api.resolve``, ``api.purge_memory``): a patch with its reason in the ledger, which
the memory's page shows at once. The server binds 127.0.0.1 only, on a free port unless told one.
"""

from __future__ import annotations

import hmac
import secrets
import socket
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from cclg import api
from cclg.errors import CclgError
from cclg.ui import pages
from cclg.ui.html import Markup, h, href, join, page

Endpoint = Callable[[Request], Awaitable[Response]]

HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",  # "no-referrer" makes Chromium send "Origin: null" with a form
    "Cache-Control": "no-store",
}
NAV = (("Overview", "overview"), ("Memories", "memories"), ("Sessions", "sessions"), ("Rules and sensors", "rules"),
       ("Code", "code"))  # fmt: skip


class Guard:
    """The checks every request passes (the module's docstring): the Host, the token, the CSRF token."""

    def __init__(self, token: str, port: int) -> None:
        self.token = token
        self.port = port
        self.hosts = {f"127.0.0.1:{port}", f"localhost:{port}"}
        self.cookie = f"cclg_ui_{port}"
        self.csrf = hmac.new(token.encode(), b"csrf", "sha256").hexdigest()

    def refusal(self, request: Request) -> Response | None:
        """Why ``request`` is refused (a response), or None when it may go on (reads only: see ``write_refusal``)."""
        if request.headers.get("host", "") not in self.hosts:
            return refused(403, "This server answers only to its own address (127.0.0.1 or localhost, its port).")
        given = request.query_params.get("token")
        if given is not None and _same(given, self.token):
            rest = {k: v for k, v in request.query_params.items() if k != "token"}
            response = RedirectResponse(request.url.path + ("?" + urlencode(rest) if rest else ""), status_code=303)
            response.set_cookie(self.cookie, self.token, httponly=True, samesite="strict", path="/")
            return response
        if not _same(request.cookies.get(self.cookie, ""), self.token):
            return refused(403, "Open the address `cclg ui` printed: it holds the token this server asks for.")
        return None

    def write_refusal(self, request: Request, form: Any) -> Response | None:
        origin = request.headers.get("origin")
        if origin is not None and origin.removeprefix("http://") not in self.hosts:
            return refused(403, "A write must come from this server's own pages.")
        if not _same(str(form.get("csrf", "")), self.csrf):
            return refused(403, "This form has no valid CSRF token: reload the page and try again.")
        return None


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


def refused(status: int, message: str) -> Response:
    body = page("Refused", h('<p class="error">$m</p>', m=message), nav=Markup(""))
    return HTMLResponse(body, status_code=status, headers=HEADERS)


def nav() -> Markup:
    return join(h('<a href="$u">$t</a>', u=href(path), t=title) for title, path in NAV)


# ---------------------------------------------------------------- the application


def create_app(store: api.Store, token: str, port: int) -> Starlette:
    """The web view of ``store``, answering only to ``127.0.0.1:port``/``localhost:port`` with ``token``."""
    guard = Guard(token, port)
    doctor = pages.DoctorCache()
    doctor.refresh(store)

    def reader(render: Callable[..., tuple[str, Markup]], *args: Any, param: str | None = None) -> Endpoint:
        async def endpoint(request: Request) -> Response:
            stop = guard.refusal(request)
            if stop is not None:
                return stop
            form = pages.Form(request.query_params, guard.csrf, notice=request.query_params.get("done", ""))
            extra = (request.path_params[param],) if param else ()
            try:
                title, body = await run_in_threadpool(render, store, form, *args, *extra)
            except CclgError as exc:
                return _error(exc)
            return HTMLResponse(page(title, _notice(form.notice) + body, nav=nav()), headers=HEADERS)

        return endpoint

    routes = [
        Route("/", reader(pages.overview, doctor)),
        Route("/overview", reader(pages.overview, doctor)),
        Route("/doctor", reader(pages.doctor_page, doctor)),
        Route("/memories", reader(pages.memories)),
        Route("/memory/{memory_id}", reader(pages.memory, param="memory_id")),
        Route("/sessions", reader(pages.sessions)),
        Route("/session/{session_id}", reader(pages.session, param="session_id")),
        Route("/rules", reader(pages.rules)),
        Route("/code", reader(pages.code)),
    ]
    for verb, correct in CORRECTIONS.items():
        routes.append(Route(f"/memory/{{memory_id}}/{verb}", _writer(store, guard, correct), methods=["POST"]))
    return Starlette(routes=routes)


Correction = Callable[[api.Store, str, Any], tuple[str, str]]


def _writer(store: api.Store, guard: Guard, correct: Correction) -> Endpoint:
    """A POST route: the guard and the CSRF check, then ``correct`` (one library call), then a redirect to
    the page of the memory it leaves to look at, with what it wrote."""

    async def endpoint(request: Request) -> Response:
        stop = guard.refusal(request)
        if stop is not None:
            return stop
        form = await request.form()
        stop = guard.write_refusal(request, form)
        if stop is not None:
            return stop
        memory_id = request.path_params["memory_id"]
        if not pages.valid_memory_id(memory_id):
            return refused(404, "Not a memory id.")
        try:
            shown, done = await run_in_threadpool(correct, store, memory_id, form)
        except CclgError as exc:
            return _error(exc)
        return RedirectResponse(href(f"memory:{shown}", done=done), status_code=303)

    return endpoint


def _error(exc: CclgError) -> Response:
    body = h('<p class="error" id="error">$m</p><p>Nothing was written: go back to correct the form.</p>', m=str(exc))
    return HTMLResponse(page("Not done", body, nav=nav()), status_code=400, headers=HEADERS)


def _notice(done: str) -> Markup:
    if not done:
        return Markup("")
    return h('<p class="notice" id="notice">Done: $d.</p>', d=done)


# ---------------------------------------------------------------- the corrections: one library call each


def _reason(form: Any) -> str:
    return str(form.get("reason", "")).strip()


def _patch(store: api.Store, memory_id: str, form: Any) -> tuple[str, str]:
    operation = str(form.get("operation", ""))
    if operation not in ("supersede", "refine", "expand", "narrow"):
        raise api.UsageError("choose supersede, refine, expand or narrow")
    content = str(form.get("content", "")).replace("\r\n", "\n")
    result = api.patch(store, operation, [memory_id], contents=[content], reason=_reason(form))
    return (result.new_nodes[0].id if result.new_nodes else memory_id), f"{operation} {result.patch.id}"


def _label(store: api.Store, memory_id: str, form: Any) -> tuple[str, str]:
    trust, sensitivity, retention = (str(form.get(k, "")) or None for k in ("trust", "sensitivity", "retention"))
    result = api.label(
        store, memory_id, reason=_reason(form), trust=trust, sensitivity=sensitivity, retention=retention
    )
    return (result.new_nodes[0].id if result.new_nodes else memory_id), f"label {result.patch.id}"


def _forget(store: api.Store, memory_id: str, form: Any) -> tuple[str, str]:
    result = api.forget(store, memory_id, reason=_reason(form) or "forgotten at the user's request")
    return memory_id, f"forget {result.patch.id}"


def _promote(store: api.Store, memory_id: str, form: Any) -> tuple[str, str]:
    result = api.promote(store, memory_id, reason=_reason(form) or "kept beyond its session at the user's request")
    return (result.new_nodes[0].id if result.new_nodes else memory_id), f"promote {result.patch.id}"


def _resolve(store: api.Store, memory_id: str, form: Any) -> tuple[str, str]:
    others = [o for o in str(form.get("others", "")).split() if o != memory_id]
    content = str(form.get("content", "")).replace("\r\n", "\n")
    result = api.resolve(store, [memory_id, *others], content=content, reason=_reason(form))
    return (result.new_nodes[0].id if result.new_nodes else memory_id), f"resolve_conflict {result.patch.id}"


def _purge(store: api.Store, memory_id: str, form: Any) -> tuple[str, str]:
    """A purge only when the id typed in the form is the memory's full id (nothing is erased otherwise)."""
    typed = str(form.get("confirm", "")).strip()
    result = api.purge_memory(
        store, memory_id, reason=_reason(form) or "purged at the user's request", confirm_id=typed
    )
    return memory_id, f"purge {result.patch_id} ({result.status})"


CORRECTIONS: dict[str, Correction] = {
    "patch": _patch,
    "label": _label,
    "forget": _forget,
    "promote": _promote,
    "resolve": _resolve,
    "purge": _purge,
}


# ---------------------------------------------------------------- the server


def bind(port: int = 0) -> socket.socket:
    """A listening socket on 127.0.0.1 (``port`` 0: a free one)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Inherited by each connection: the body leaves with the headers, not one delayed ACK (40 ms) later.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        sock.close()
        raise api.UsageError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}") from None
    sock.listen(64)
    return sock


def serve(store: api.Store, *, port: int = 0, announce: Callable[[str], None], open_browser: bool = False) -> None:
    """Serve the view of ``store`` until interrupted: binds, tells ``announce`` the URL (with its token),
    opens a browser if asked."""
    import uvicorn

    sock = bind(port)
    port = sock.getsockname()[1]
    token = secrets.token_urlsafe(24)
    url = f"http://127.0.0.1:{port}/?token={token}"
    announce(url)
    if open_browser:
        import webbrowser

        webbrowser.open(url)
    config = uvicorn.Config(create_app(store, token, port), log_level="warning", access_log=False, lifespan="off")
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
