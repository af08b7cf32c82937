"""``idem-harness init`` on OpenAPI documents written for these tests (3.0 YAML and 3.1 JSON,
$refs into components and into other files, several operations, some without the header), on
a loopback URL, without a document, and on bad input.  The drafted files must load; that they
run is tests/init_probe/test_two_commands.py's job.  No service is needed here."""

from __future__ import annotations

import functools
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from harness._target import Target, placeholders
from harness.cli._init import init
from harness.http.drafting._openapi_bodies import body_template
from harness.targets._loader import load_target
from tests.init_probe.conftest import DOCUMENTS


def draft(*args: str) -> Result:
    return CliRunner().invoke(init, list(args))


def drafted(tmp_path: Path, *args: str) -> tuple[Target, str]:
    output = tmp_path / "target.toml"
    done = draft(*args, "-o", str(output))
    assert done.exit_code == 0, done.output
    return load_target(output), output.read_text()


def test_a_30_yaml_document_with_refs_into_another_file(tmp_path: Path) -> None:
    target, text = drafted(tmp_path, "--openapi", str(DOCUMENTS / "payments-3.0.yaml"))
    assert [o.label for o in target.keyed_operations] == ["POST /charges"]  # not the refund
    endpoint = target.endpoint
    assert endpoint.body == {"amount": "{amount}", "currency": "usd"}  # required fields; example
    assert endpoint.resource_field == "id"
    assert endpoint.invalid_values == {"amount": [0, 1.5]}  # minimum 1, an integer
    assert (target.key.header, target.key.max_length, target.key.pattern) == (
        "Idempotency-Key", 255, None)
    assert target.tenant is not None and target.tenant.format == "Bearer {tenant}"
    assert target.url == "http://127.0.0.1:8000"  # the document's server
    effects = target.effects.model_dump()
    assert (effects["url"], effects["query"], effects["ids"]) == (
        "/_admin/effects", {"tenant": "{tenant}", "key": "{key}"}, "charge_ids")
    assert target.promises.mode == "strict"  # the header is required
    assert "FILL IN" in text and "idem-harness probe --target THIS_FILE --write" in text
    assert "lease" in text and "replay_header" in text  # unknown promises, shown commented out


def test_a_31_json_document_with_two_keyed_operations(tmp_path: Path) -> None:
    target, _ = drafted(tmp_path, "--openapi", str(DOCUMENTS / "ledger-3.1.json"),
                        "--start", "{python} -m tests.corpus.services.two_routes --port {port}",
                        "--ready-path", "/healthz")
    charge, payout = target.keyed_operations
    assert (charge.name, charge.path, payout.name, payout.path) == (
        "charge", "/charges", "payout", "/payouts")  # the PATCH without a key is left out
    assert charge.key_scope == payout.key_scope
    assert payout.body == {"amount": "{amount}", "destination": "ba_123"}  # 3.1 `examples`
    assert charge.invalid_values == {"amount": [0, 1.5]}  # exclusiveMinimum 0 (3.1 form)
    assert target.key.max_length == 100
    assert charge.valid_values == {"currency": ["usd", "eur"]}  # the schema's enum
    assert target.start is not None and target.start.ready_path == "/healthz"
    assert target.clock is not None and target.clock.kind == "faketime"
    assert target.url is None
    assert target.effects.model_dump()["url"] == "/test/effects"


def test_the_document_from_a_loopback_url_with_refs_fetched_the_same_way(
        tmp_path: Path) -> None:
    handler = functools.partial(_Quiet, directory=str(DOCUMENTS))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            url = f"http://127.0.0.1:{server.server_address[1]}/payments-3.0.yaml"
            target, _ = drafted(tmp_path, "--openapi", url, "--base-url",
                                "http://127.0.0.1:9000/api")
        finally:
            server.shutdown()
    assert target.url == "http://127.0.0.1:9000"
    assert target.endpoint.path == "/api/charges"  # the base path goes in front of each path
    assert target.effects.model_dump()["url"] == "/api/_admin/effects"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_a_remote_document_or_reference_is_refused(tmp_path: Path) -> None:
    done = draft("--openapi", "http://192.0.2.7/openapi.yaml", "-o", str(tmp_path / "t.toml"))
    assert done.exit_code == 2 and "not a loopback address" in done.output
    document = yaml.safe_load((DOCUMENTS / "payments-3.0.yaml").read_text())
    document["paths"]["/charges"]["post"]["requestBody"]["content"]["application/json"][
        "schema"] = {"$ref": "http://192.0.2.7/schemas.yaml#/ChargeRequest"}
    (tmp_path / "remote-ref.yaml").write_text(yaml.safe_dump(document))
    (tmp_path / "schemas.yaml").write_text((DOCUMENTS / "schemas.yaml").read_text())
    done = draft("--openapi", str(tmp_path / "remote-ref.yaml"), "-o", str(tmp_path / "t.toml"))
    assert done.exit_code == 2 and "not a loopback address" in done.output
    assert not (tmp_path / "t.toml").exists()


def test_no_operation_declares_the_header_lists_the_writes(tmp_path: Path) -> None:
    patch = _operation()
    patch["parameters"] = [{"name": "id", "in": "path", "required": True,
                            "schema": {"type": "string"}}]
    document = _document({
        "/orders": {"post": _operation(), "get": _operation()},
        "/orders/{id}": {"patch": patch},
    })
    source = tmp_path / "plain.json"
    source.write_text(json.dumps(document))
    done = draft("--openapi", str(source), "-o", str(tmp_path / "t.toml"))
    assert done.exit_code == 2
    assert "no operation declares an Idempotency-Key header" in done.output
    assert "POST /orders, PATCH /orders/{id}" in done.output and "--operation" in done.output
    assert not (tmp_path / "t.toml").exists()
    target, text = drafted(tmp_path, "--openapi", str(source), "--operation", "PATCH /orders/{id}")
    assert target.endpoint.method == "PATCH" and target.endpoint.path == "/orders/test"
    assert "FILL IN the path: {id} became 'test'" in text


def test_an_api_key_scheme_names_the_tenant_header(tmp_path: Path) -> None:
    operation = _operation(key={"maxLength": 64, "pattern": "^[A-Za-z0-9-]+$"})
    operation["security"] = [{"account": []}]
    document = _document({"/orders": {"post": operation}})
    document["components"] = {"securitySchemes": {
        "account": {"type": "apiKey", "in": "header", "name": "X-Account"}}}
    source = tmp_path / "keyed.yaml"
    source.write_text(yaml.safe_dump(document))
    target, _ = drafted(tmp_path, "--openapi", str(source))
    assert target.tenant is not None
    assert (target.tenant.header, target.tenant.format) == ("X-Account", "{tenant}")
    assert (target.key.max_length, target.key.pattern) == (64, "^[A-Za-z0-9-]+$")
    assert target.promises.mode == "lax"  # the header is optional in this document


def test_without_a_document_the_same_skeleton(tmp_path: Path) -> None:
    target, text = drafted(tmp_path, "--url", "http://127.0.0.1:8080/v1", "--path", "/charges")
    assert target.url == "http://127.0.0.1:8080" and target.endpoint.path == "/v1/charges"
    assert set(placeholders(target.endpoint.body)) & {"amount", "nonce"}
    assert "[effects]" in text and "FILL IN" in text and "[promises]" in text


@pytest.mark.parametrize(("content", "expected"), [
    (None, "the file does not exist"),
    ("a: [unclosed", "neither JSON nor YAML"),
    ('{"swagger": "2.0", "info": {}, "paths": {}}', "not OpenAPI 3.0 or 3.1 (swagger 2.0)"),
    ('{"openapi": "3.0.3", "info": {"title": "t"}, "paths": {"/x": {"post": {}}}}',
     "is not a valid OpenAPI 3.0.3 document"),
    ('{"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": {"/x": {"post": '
     '{"parameters": [{"$ref": "missing.yaml#/P"}], "responses": {"200": {"description": '
     '"ok"}}}}}}', "missing.yaml"),
])
def test_bad_documents_exit_2_with_the_problem(tmp_path: Path, content: str | None,
                                               expected: str) -> None:
    source = tmp_path / "api.json"
    if content is not None:
        source.write_text(content)
    done = draft("--openapi", str(source), "-o", str(tmp_path / "t.toml"))
    assert done.exit_code == 2, done.output
    assert expected in done.output and "fix:" in done.output
    assert "Traceback" not in done.output
    assert not (tmp_path / "t.toml").exists()


def test_an_existing_file_is_kept_unless_forced(tmp_path: Path) -> None:
    output = tmp_path / "target.toml"
    output.write_text("mine\n")
    args = ["--url", "http://127.0.0.1:8080", "--path", "/charges", "-o", str(output)]
    done = draft(*args)
    assert done.exit_code == 2 and "--force" in done.output
    assert output.read_text() == "mine\n"
    assert draft(*args, "--force").exit_code == 0
    load_target(output)
    assert [p.name for p in tmp_path.iterdir()] == ["target.toml"]  # no temporary file left


@pytest.mark.parametrize(("args", "expected"), [
    (["--path", "/charges", "--start", "python -m app"], "must contain {port}"),
    (["--path", "charges"], "must start with /"),
    ([], "give --openapi"),
    (["--openapi", "x.yaml", "--path", "/charges"], "with --openapi give --base-url"),
    (["--url", "ftp://127.0.0.1", "--path", "/c"], "is not an http URL"),
])
def test_bad_options_exit_2(tmp_path: Path, args: list[str], expected: str) -> None:
    done = draft(*args, "-o", str(tmp_path / "t.toml"))
    assert done.exit_code == 2 and expected in done.output


def test_body_templates_follow_the_schema() -> None:
    schema = {"allOf": [
        {"type": "object", "required": ["quantity"],
         "properties": {"quantity": {"type": "integer", "minimum": 1, "maximum": 10}}},
        {"required": ["reference", "sku"],
         "properties": {"reference": {"type": "string", "pattern": "^R[0-9]{6}$"},
                        "sku": {"type": "string", "enum": ["basic", "pro"]}}},
    ]}
    body = body_template(schema)
    # Nothing can vary within the schema's rules: a nonce field is added, and said so.
    assert body.template == {"quantity": 1, "reference": "FILL-IN", "sku": "basic",
                             "idem_nonce": "{nonce}"}
    assert body.needs_attention
    assert any("reference" in n and "pattern" in n for n in body.notes)
    # An enum's other values are declared valid, so a reuse probe changes sku alone to each.
    assert body.valid_values == {"sku": ["basic", "pro"]}
    varied = body_template({"type": "object", "required": ["note"],
                            "properties": {"note": {"type": "string"},
                                           "id": {"type": "string", "readOnly": True}}})
    assert varied.template == {"note": "{nonce}"} and not varied.needs_attention


def _operation(key: dict[str, Any] | None = None) -> dict[str, Any]:
    operation: dict[str, Any] = {"responses": {"200": {"description": "ok"}}}
    if key is not None:
        operation["parameters"] = [{"name": "Idempotency-Key", "in": "header",
                                    "schema": {"type": "string", **key}}]
    operation["requestBody"] = {"content": {"application/json": {"schema": {
        "type": "object", "properties": {"amount": {"type": "integer"}}}}}}
    return operation


def _document(paths: dict[str, Any]) -> dict[str, Any]:
    return {"openapi": "3.0.3", "info": {"title": "Orders", "version": "1"}, "paths": paths}


@pytest.fixture(autouse=True)
def _no_leftovers(tmp_path: Path) -> Iterator[None]:
    yield
    assert not list(tmp_path.glob(".*.tmp"))
