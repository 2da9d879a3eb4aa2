"""``membrane console``: a local web page over one project, a client of the runtime.

Server-rendered pages (Starlette), server-sent events for the live tree and inbox, and htmx
(one vendored file, ``static/htmx.min.js``, with its license beside it) for the editor's live
explain. ``build_app`` takes its collaborators (``Parts``) and a ``Guard`` (the token, the
CSRF token and the console's own address).
"""

from __future__ import annotations

from membrane.console.app import Parts, build_app
from membrane.console.security import Guard

__all__ = ["Guard", "Parts", "build_app"]
