"""What ``init`` reads out of a document beyond its operations, and how it refuses one it
cannot read: a replay header the success answer declares is promised (not left as FILL IN), and a
dangling $ref is named in a line, not by dumping the whole document into the error."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from harness.cli._init import init
from harness.targets._loader import load_target

DOCUMENT = {
    "openapi": "3.0.3",
    "info": {"title": "Charges", "version": "1"},
    "servers": [{"url": "http://127.0.0.1:9000"}],
    "paths": {"/charges": {"post": {
        "parameters": [{"in": "header", "name": "Idempotency-Key", "required": True,
                        "schema": {"type": "string"}}],
        "requestBody": {"content": {"application/json": {
            "schema": {"$ref": "#/components/schemas/Charge"}}}},
        "responses": {"201": {"description": "created", "headers": {
            "Idempotent-Replayed": {"description": "true on a replay",
                                    "schema": {"type": "string"}}}}},
    }}},
    "components": {"schemas": {"Charge": {
        "type": "object", "required": ["amount"],
        "properties": {"amount": {"type": "integer", "description": "x" * 400}}}}},
}


def _init(tmp_path: Path, document: dict[str, object]) -> tuple[int, str, Path]:
    source = tmp_path / "openapi.yaml"
    source.write_text(yaml.safe_dump(document))
    output = tmp_path / "target.toml"
    done = CliRunner().invoke(init, ["--openapi", str(source), "-o", str(output)])
    return done.exit_code, done.output, output


def test_a_replay_header_the_success_answer_declares_is_promised(tmp_path: Path) -> None:
    code, said, output = _init(tmp_path, DOCUMENT)
    assert code == 0, said
    text = output.read_text()
    assert 'replay_header = "Idempotent-Replayed"' in text
    assert "declared by the document's 201 answer of POST /charges" in text
    assert "# replay_header" not in text  # not a FILL IN comment
    assert load_target(output).promises.replay_header == "Idempotent-Replayed"


def test_a_dangling_ref_is_named_without_the_document(tmp_path: Path) -> None:
    broken = {**DOCUMENT, "paths": {"/charges": {"post": {
        **DOCUMENT["paths"]["/charges"]["post"],  # type: ignore[index]
        "requestBody": {"content": {"application/json": {
            "schema": {"$ref": "#/components/schemas/Missing"}}}}}}}}
    code, said, output = _init(tmp_path, broken)
    assert code == 2
    assert "#/components/schemas/Missing does not exist" in said
    assert "x" * 50 not in said and "'openapi'" not in said and len(said) < 600
    assert not output.exists()
