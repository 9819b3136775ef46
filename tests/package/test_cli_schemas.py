"""The JSON each ``--json`` of the command line prints, validated against its schema in
docs/schemas (which docs/cli.md links): a field added, renamed or retyped fails here until
the schema, and so the reference, says it too."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from keyshared import cli

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "docs" / "schemas"
EXAMPLES = ROOT / "docs" / "examples"


def registry() -> Registry:
    resources = []
    for path in sorted(SCHEMAS.glob("*.json")):
        schema = json.loads(path.read_text(encoding="utf-8"))
        resources.append((schema["$id"], Resource.from_contents(schema)))
    return Registry().with_resources(resources)


def validator(name: str) -> Draft202012Validator:
    schema = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
    return Draft202012Validator(schema, registry=registry())


def printed(*argv: str) -> str:
    out = io.StringIO()
    assert cli.main(list(argv), out) == 0
    return out.getvalue()


def ex(name: str) -> str:
    return str(EXAMPLES / name)


#: (schema, command): every JSON output of the command line, on the docs' examples.
OUTPUTS: list[tuple[str, list[str]]] = [
    ("layout.json", ["layout", "--segments", "2", "--json"]),
    ("layout.json", ["layout", "--layout", ex("migrated-12.json"), "--json"]),
    ("layout-response.json", ["layout", "--segments", "2", "--response"]),
    (
        "layout-response.json",
        ["layout", "--segments", "2", "--response", "--pulsar-version", "5.0.0-M1"],
    ),
    ("route.json", ["route", "order-1", "order-2", "--json"]),
    ("route.json", ["route", "order-1", "--json", "--pulsar-version", "5.0.0-M1"]),
    ("decision.json", ["decide", ex("snapshot.json"), "--json"]),
    ("decide-apply.json", ["decide", ex("snapshot.json"), "--apply", "--json"]),
    (
        "audit.json",
        [
            "audit",
            "--keys",
            ex("keys.csv"),
            "--from",
            "kafka",
            "--partitions",
            "12",
            "--to-partitions",
            "16",
            "--json",
        ],
    ),
    (
        "audit.json",
        [
            "audit",
            "--keys",
            ex("keys.csv"),
            "--from",
            "pulsar:JavaStringHash",
            "--partitions",
            "12",
            "--to-layout",
            ex("migrated-12.json"),
            "--json",
        ],
    ),
    ("explain.json", ["explain", ex("held.json"), "--subscription", "sub", "--json"]),
    (
        "explain.json",
        [
            "explain",
            ex("held.json"),
            "--subscription",
            "sub",
            "--leave",
            "newcomer",
            "--key",
            "key-7",
            "--keys",
            ex("held.keys.txt"),
            "--json",
        ],
    ),
    (
        "explain.json",
        [
            "explain",
            ex("held.json"),
            "--subscription",
            "sub",
            "--key-encoding",
            "hex",
            "--key",
            "ff0080",
            "--json",
        ],
    ),
    (
        "explain-scalable.json",
        [
            "explain",
            ex("split-merge.json"),
            "--subscription",
            "sub",
            "--key-encoding",
            "base64",
            "--key",
            "/wCA",
            "--json",
        ],
    ),
    (
        "explain-scalable.json",
        [
            "explain",
            ex("split-merge.json"),
            "--subscription",
            "sub",
            "--consumer",
            "c0",
            "--key",
            "order-1",
            "--json",
        ],
    ),
    (
        "verify.json",
        ["verify", "--check", str(ROOT / "docs/examples/verify-record.json"), "--json"],
    ),
]


def test_every_schema_is_a_valid_one() -> None:
    for path in sorted(SCHEMAS.glob("*.json")):
        Draft202012Validator.check_schema(json.loads(path.read_text(encoding="utf-8")))


@pytest.mark.parametrize(
    ("schema", "argv"), OUTPUTS, ids=lambda v: " ".join(v) if isinstance(v, list) else v
)
def test_the_output_is_what_its_schema_says(schema: str, argv: list[str]) -> None:
    text = printed(*argv)
    documents: list[Any] = (
        [json.loads(line) for line in text.splitlines()]
        if schema == "route.json"
        else [json.loads(text)]
    )
    for document in documents:
        errors = sorted(validator(schema).iter_errors(document), key=str)
        assert not errors, f"{schema}: {errors[0].message} at {list(errors[0].absolute_path)}"


def test_every_json_output_has_a_schema_and_the_reference_names_it() -> None:
    """Each subcommand with --json (or --response) is validated above, and docs/cli.md links
    each schema."""
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    with_json = {
        name
        for name, child in sub.choices.items()  # type: ignore[union-attr]
        if any(o in ("--json", "--response") for a in child._actions for o in a.option_strings)
    }
    assert with_json <= {argv[0] for _, argv in OUTPUTS}
    reference = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    for path in SCHEMAS.glob("*.json"):
        assert f"schemas/{path.name}" in reference, f"docs/cli.md does not link {path.name}"


def test_a_failed_verify_is_what_its_schema_says(tmp_path: Path) -> None:
    """The verdict's violations too: a saved run with one acknowledgement taken out."""
    record = json.loads((ROOT / "docs/examples/verify-record.json").read_text())
    events = record["scenarios"][0]["events"]
    events.remove(next(e for e in events if e[0] == "ack"))
    (tmp_path / "record.json").write_text(json.dumps(record))
    out = io.StringIO()
    assert cli.main(["verify", "--check", str(tmp_path / "record.json"), "--json"], out) == 1
    document = json.loads(out.getvalue())
    assert document["verdict"]["first"]["rule"] == "lost"
    errors = sorted(validator("verify.json").iter_errors(document), key=str)
    assert not errors, f"verify.json: {errors[0].message} at {list(errors[0].absolute_path)}"
