"""The web panel: static files (HTML, CSS, ES modules) served at /ui next to the HTTP API.

The files hold code only, never data: every figure the panel shows comes from an API route the
browser calls with the bearer token (kept in the tab's sessionStorage, never in a URL). So the
files themselves need no token, and every data route answers 401 without one. No build step, no
CDN: what is in static/ is what the browser runs.
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

STATIC = Path(__file__).parent / "static"
PREFIX = "/ui"
# The page may load only its own files and talk only to its own origin; nothing may frame it.
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; "
    "script-src 'self'; connect-src 'self'; frame-ancestors 'none'; "
    "base-uri 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def is_panel_path(path: str) -> bool:
    return path == PREFIX or path.startswith(PREFIX + "/")


class _Files(StaticFiles):
    async def get_response(self, path: str, scope) -> Response:
        resp = await super().get_response(path, scope)
        resp.headers.update(HEADERS)
        return resp


def routes() -> list:
    async def to_index(request: Request) -> Response:
        return RedirectResponse(PREFIX + "/", status_code=307)

    return [
        Route(PREFIX, to_index, methods=["GET"]),
        Mount(PREFIX, app=_Files(directory=STATIC, html=True), name="panel"),
    ]
