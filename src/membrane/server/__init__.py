"""The machine runtime: JSON-RPC 2.0 over a Unix socket (``membrane serve``) and its client.

``Server`` owns the socket and the projects it serves; ``Client`` talks to it. The wire
contract (every method, param and error), identity, roles and rate limits are in
docs/server.md.
"""

from __future__ import annotations

import typing

from membrane._lazy import lazy_exports as _lazy_exports

if typing.TYPE_CHECKING:
    from membrane.server.client import Client, identity_from_env
    from membrane.server.host import ProjectHost, project_id_of
    from membrane.server.identity import Caller, TokenBook
    from membrane.server.server import Server, Service
    from membrane.server.transport import default_socket_path

__all__ = [
    "Caller",
    "Client",
    "ProjectHost",
    "Server",
    "Service",
    "TokenBook",
    "default_socket_path",
    "identity_from_env",
    "project_id_of",
]

# Nothing is imported until a name is first used, so importing the package (and the CLI's
# start) pays only for what is touched.
__getattr__, __dir__ = _lazy_exports(
    __name__,
    {
        "Client": "membrane.server.client",
        "identity_from_env": "membrane.server.client",
        "ProjectHost": "membrane.server.host",
        "project_id_of": "membrane.server.host",
        "Caller": "membrane.server.identity",
        "TokenBook": "membrane.server.identity",
        "Server": "membrane.server.server",
        "Service": "membrane.server.server",
        "default_socket_path": "membrane.server.transport",
    },
    globals(),
)
