"""The `sandbox` setting: loading, choosing a backend, and refusing one the machine lacks."""

from __future__ import annotations

from pathlib import Path

import pytest

from membrane.config.load import load_settings
from membrane.errors import SandboxUnavailable, SettingsError
from membrane.sandbox import MachineSupport, Sandbox, SandboxPolicy, choose_backend

NONE = MachineSupport(
    bwrap=None, bwrap_reason="no bwrap here", landlock_abi=0, landlock_reason="no landlock here"
)
LANDLOCK_ONLY = MachineSupport(
    bwrap=None, bwrap_reason="no bwrap here", landlock_abi=3, landlock_reason="ABI 3"
)


def test_settings_choose_the_sandbox_and_the_network(tmp_path: Path) -> None:
    (tmp_path / ".membrane").mkdir()
    (tmp_path / ".membrane" / "config.toml").write_text(
        'sandbox = "landlock"\nsandbox_network = true\n'
    )
    settings = load_settings(project=tmp_path, home=tmp_path / "home")
    assert SandboxPolicy.from_settings(settings) == SandboxPolicy("landlock", network=True)
    default = load_settings(project=None, home=tmp_path / "home")
    assert SandboxPolicy.from_settings(default) == SandboxPolicy("auto", network=False)


def test_an_unknown_sandbox_value_is_a_settings_error(tmp_path: Path) -> None:
    (tmp_path / ".membrane").mkdir()
    (tmp_path / ".membrane" / "config.toml").write_text('sandbox = "docker"\n')
    with pytest.raises(SettingsError) as caught:
        load_settings(project=tmp_path, home=tmp_path / "home")
    assert caught.value.data["key"] == "sandbox"


def test_auto_picks_the_strongest_backend_the_machine_offers() -> None:
    assert choose_backend("auto", NONE) == "guard"
    assert choose_backend("auto", LANDLOCK_ONLY) == "landlock"
    assert choose_backend("guard", LANDLOCK_ONLY) == "guard"


def test_a_named_backend_the_machine_lacks_is_refused_never_downgraded(tmp_path: Path) -> None:
    with pytest.raises(SandboxUnavailable) as caught:
        Sandbox.for_checkout(SandboxPolicy("bubblewrap"), tmp_path, support=LANDLOCK_ONLY)
    assert caught.value.code == "sandbox-unavailable"
    assert caught.value.data == {"backend": "bubblewrap", "reason": "no bwrap here"}
    with pytest.raises(SandboxUnavailable):
        choose_backend("landlock", NONE)
