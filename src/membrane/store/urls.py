"""A state URL: whether text names a PostgreSQL database, and the URL as logs and errors show it
(its password masked). Both the store that opens the database and the choice of a command's
state read them."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

__all__ = ["is_postgres_url", "redact_url"]


def is_postgres_url(value: str) -> bool:
    """Whether ``value`` names a PostgreSQL database (``postgresql://`` or ``postgres://``)."""
    return value.startswith(("postgresql://", "postgres://"))


def redact_url(url: str) -> str:
    """``url`` with its password (if any) replaced by ``***``: what logs and errors show."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return "postgresql://***"
    if password is not None:
        host = parts.netloc.rsplit("@", 1)[-1]
        parts = parts._replace(netloc=f"{parts.username or ''}:***@{host}")
    if "password" in parts.query:
        fields = [
            "password=***" if item.split("=", 1)[0] == "password" else item
            for item in parts.query.split("&")
        ]
        parts = parts._replace(query="&".join(fields))
    return urlunsplit(parts)
