"""The version the package says and the changelog agree: Cargo.toml holds the one version,
and between releases it is the next one's development version, which the changelog's
Unreleased section names; the last released section is older."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.version import Version

import keyshared as ks
from keyshared import cli

ROOT = Path(__file__).resolve().parents[2]


def cargo_version() -> Version:
    cargo = tomllib.loads((ROOT / "Cargo.toml").read_text(encoding="utf-8"))
    return Version(cargo["workspace"]["package"]["version"])


def test_the_changelog_names_the_version_cargo_holds() -> None:
    version = cargo_version()
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    released = [Version(v) for v in re.findall(r"^## (\d+\.\d+\.\d+)\b", changelog, re.M)]
    if version.is_devrelease or version.is_prerelease:
        unreleased = changelog.split("## Unreleased", 1)[1].split("\n## ", 1)[0]
        assert f"`{version}`" in unreleased
        assert all(r < version for r in released)
    else:
        assert released and released[0] == version


def test_version_says_the_hash_and_the_profiles() -> None:
    said = cli.version_text(ks.__version__).splitlines()
    assert said == [
        f"keyshared {ks.__version__}",
        f"key hash: HASH_VERSION {ks.HASH_VERSION} (MurmurHash3_x86_32, seed 0)",
        "Pulsar profiles: master, 5.0.0-M1, 4.2, 4.0 (scalable topics: master, 5.0.0-M1;"
        " load balancer: 4.0, 4.2); default master",
    ]
