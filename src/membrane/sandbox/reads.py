"""What a child may read (DESIGN rule 14: reads stay home).

A child's built-in file tools (``Read``, ``Glob``, ``Grep``) and every command it runs under an
OS sandbox see:

* its checkout (and, in a repository, the repository's work tree and git folder);
* the read roots the settings name (``read_paths``) and the host's ``SandboxPolicy`` adds;
* what programs need to run (:data:`SYSTEM_ROOTS`: ``/usr``, ``/bin``, ``/sbin``, ``/lib*``,
  ``/etc``, ``/opt``);

and never these, wherever they lie (:func:`hidden_places`): ``$MEMBRANE_HOME`` (the state of
every project, the socket folder, tokens), the system's secrets (:data:`SYSTEM_SECRETS`:
``/etc/shadow``, ``/etc/ssh``, ...) and the usual secret places of the home folder
(:data:`HOME_SECRETS`: ``~/.ssh``, ``~/.aws``, ``~/.config/gcloud``, ``~/.netrc``, ...), unless
a read root names that place (or a path inside it) exactly; ``$MEMBRANE_HOME`` stays hidden
even then. The most specific entry decides: a read root inside a hidden place is visible, a
hidden place inside a read root is not. The built-in tools also refuse ``.env`` files outside
the checkout.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from membrane.sandbox.paths import real_path

__all__ = [
    "HOME_SECRETS",
    "SYSTEM_ROOTS",
    "SYSTEM_SECRETS",
    "ReadScope",
    "hidden_places",
    "read_scope",
]

#: What programs need to run: read-only to every sandboxed command and to the built-in tools.
SYSTEM_ROOTS: tuple[str, ...] = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
)
#: Secrets inside the system roots.
SYSTEM_SECRETS: tuple[str, ...] = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/ssh",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssl/private",
    "/etc/security/opasswd",
    "/etc/krb5.keytab",
    "/etc/credstore",
    "/etc/credstore.encrypted",
    "/etc/wireguard",
    "/etc/ipsec.secrets",
    "/etc/NetworkManager/system-connections",
)
#: Secret places under the home folder (relative to it).
HOME_SECRETS: tuple[str, ...] = (
    ".ssh",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".docker",
    ".kube",
    ".gnupg",
    ".netrc",
    ".git-credentials",
    ".pgpass",
    ".password-store",
)


def hidden_places(home: Path | None = None, membrane_home: Path | None = None) -> tuple[Path, ...]:
    """Every place no child reads (real paths): ``membrane_home`` first (default:
    ``$MEMBRANE_HOME`` or ``~/.membrane``), then the system's and the home folder's secrets."""
    user_home = home if home is not None else Path.home()
    state = membrane_home if membrane_home is not None else _membrane_home(user_home)
    places = [state, *(Path(p) for p in SYSTEM_SECRETS)]
    places += [user_home / name for name in HOME_SECRETS]
    return tuple(dict.fromkeys(real_path(p) for p in places))


def _membrane_home(user_home: Path) -> Path:
    # As ``membrane.config.load.membrane_home``, without importing the settings loader.
    configured = os.environ.get("MEMBRANE_HOME")
    return Path(configured).expanduser() if configured else user_home / ".membrane"


@dataclass(frozen=True, slots=True)
class ReadScope:
    """The trees a child may read (``roots``) less the ``hidden`` places; ``state`` is the
    place hidden whatever a root says (``$MEMBRANE_HOME``). All paths real and absolute."""

    checkout: Path
    roots: tuple[Path, ...]
    hidden: tuple[Path, ...]
    state: Path

    def allows(self, path: Path) -> bool:
        """Whether a child may read ``path`` (made real here)."""
        return self.allows_real(real_path(path))

    def allows_real(self, real: Path) -> bool:
        if real.is_relative_to(self.state):
            return False
        root = _deepest(real, self.roots)
        if root is None:
            return False
        hidden = _deepest(real, self.hidden)
        if hidden is not None and len(hidden.parts) > len(root.parts):
            return False
        return not (_is_env_file(real) and not real.is_relative_to(self.checkout))

    def secret(self, real: Path) -> bool:
        """Whether ``real`` is, or lies in, a hidden place, or is a ``.env`` file outside the
        checkout: a read outside the roots that only a rule naming the exact path may ask
        about (``$MEMBRANE_HOME`` never)."""
        if real.is_relative_to(self.state) or _deepest(real, self.hidden) is not None:
            return True
        return _is_env_file(real) and not real.is_relative_to(self.checkout)

    def widened(self, real: Path) -> ReadScope:
        """This scope with ``real`` as one more read root (a read outside the roots that the
        host approved); the hidden places inside it stay hidden."""
        return replace(self, roots=(*self.roots, real))

    def visible_roots(self) -> tuple[Path, ...]:
        """The roots a sandbox shows (read-only unless it makes them writable)."""
        return tuple(root for root in self.roots if not root.is_relative_to(self.state))

    def holes(self) -> tuple[Path, ...]:
        """The hidden places inside a visible root, deeper than the deepest root that holds
        them: what a sandbox must cover up (a root deeper still is shown again on top)."""
        found = [self.state] if _inside_any(self.state, self.roots) else []
        for place in self.hidden:
            root = _deepest(place, self.roots)
            if root is not None and len(place.parts) > len(root.parts):
                found.append(place)
        return tuple(dict.fromkeys(found))


def _within(path: str, tree: str) -> bool:
    """``Path(path).is_relative_to(tree)`` for normalised absolute paths, on strings: this
    runs for every hidden place against every root at each sandboxed command."""
    return path == tree or path.startswith(tree if tree.endswith("/") else tree + "/")


def _deepest(path: Path, trees: Iterable[Path]) -> Path | None:
    """The deepest of ``trees`` that holds ``path`` (those that do all hold one another)."""
    text = str(path)
    best: Path | None = None
    length = -1
    for tree in trees:
        name = str(tree)
        if len(name) > length and _within(text, name):
            best, length = tree, len(name)
    return best


def _inside_any(path: Path, trees: Iterable[Path]) -> bool:
    text = str(path)
    return any(_within(text, str(tree)) for tree in trees)


def _is_env_file(path: Path) -> bool:
    return path.name == ".env" or path.name.startswith(".env.")


def read_scope(
    checkout: Path,
    *,
    read_paths: Sequence[Path] = (),
    repository: Sequence[Path] = (),
    home: Path | None = None,
    membrane_home: Path | None = None,
    system: bool = True,
) -> ReadScope:
    """The read scope of a child in ``checkout`` (made real here): ``read_paths`` are the read
    roots the settings and the host name; ``repository`` the checkout's repository (its work
    tree and git folder), read-only to the child like its checkout; ``system``: the system's
    folders too (:data:`SYSTEM_ROOTS`)."""
    root = real_path(checkout)
    places = hidden_places(home, membrane_home)
    state, secrets = places[0], places[1:]
    named = tuple(real_path(Path(p).expanduser()) for p in read_paths)
    system_roots = SYSTEM_ROOTS if system else ()
    system_trees = tuple(real_path(Path(p)) for p in system_roots if os.path.exists(p))
    roots = tuple(dict.fromkeys((root, *(real_path(p) for p in repository), *named, *system_trees)))
    # A secret place a read root names (or reaches into) is visible there: the deepest entry
    # decides, so a root equal to a hidden place, or inside it, shows what it names.
    hidden = secrets
    return ReadScope(checkout=root, roots=roots, hidden=hidden, state=state)
