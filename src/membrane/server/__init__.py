"""The machine runtime: JSON-RPC 2.0 over a Unix socket (``membrane serve``) and its client.

``Server`` owns the socket and the projects it serves; ``Client`` talks to it. The wire
contract (every method, param and error), identity, roles and rate limits are in
docs/server.md.
"""

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
