"""The API's contract (web/api/responses.py): /openapi.json documents every status each route answers with the one
error model, parameters are never null, and the routes take what the schema says — no more, no less. (The whole
contract against a running app: tests/integration/test_web_api_fuzz.py runs schemathesis's command line.)"""

from __future__ import annotations

import json

import pytest

from web.app import create_app

SCHEMA = create_app().openapi()
UNSAFE = {"post", "put", "patch", "delete"}
OPERATIONS = [
    (method, path, operation)
    for path, item in SCHEMA["paths"].items()
    for method, operation in item.items()
    if method in {"get", *UNSAFE}
]
NOT_ONE_PERSONA = {("post", "/api/persona/import")}  # serves no one persona: no persona to miss


def ids(item):
    return f"{item[0].upper()} {item[1]}"


@pytest.mark.parametrize("method,path,operation", OPERATIONS, ids=[ids(o) for o in OPERATIONS])
def test_every_route_documents_the_statuses_it_can_answer(method, path, operation):
    documented = set(operation["responses"])
    assert {"400", "401"} <= documented  # a foreign Host; a token not carried
    assert ("404" in documented) != ((method, path) in NOT_ONE_PERSONA)  # over a deployment: no such persona
    assert ("403" in documented) == (method in UNSAFE or path == "/api/events")  # cross-site, or no CSRF header
    takes_input = bool(operation.get("parameters") or operation.get("requestBody"))
    if takes_input:
        assert "422" in documented
    for status, response in operation["responses"].items():
        if status.startswith("4"):
            assert response["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorOut"}
            assert response["description"]


def test_errors_are_one_model_and_no_parameter_is_null():
    assert "HTTPValidationError" not in json.dumps(SCHEMA)
    assert set(SCHEMA["components"]["schemas"]["ErrorOut"]["required"]) == {"error", "field", "status"}
    for _method, _path, operation in OPERATIONS:
        for parameter in operation.get("parameters", []):
            assert "null" not in json.dumps(parameter["schema"]), parameter


def test_a_405_names_the_methods_allowed(web):
    answer = web.client.request("TRACE", "/api/loop")
    assert answer.status_code == 405 and answer.headers["allow"] == "GET, PUT"
    assert answer.json() == {"error": "Method Not Allowed", "field": None, "status": 405}


def test_a_literal_path_is_not_taken_for_a_templated_one(web):
    assert web.client.get("/api/sessions/revive").status_code == 405  # not "session_id: not an integer"
    assert web.client.patch("/api/llms/selected", json={"priority": 1}).status_code == 405  # not a model "selected"
    assert web.client.get("/api/memory/kb").json()["tier"] == "kb"  # documented: GET /api/memory/kb
    assert web.client.get("/api/sessions/12345").status_code == 404


def test_a_query_parameter_the_route_does_not_take_is_refused(web):
    refused = web.client.get("/api/conversation?limt=5")
    assert refused.status_code == 422 and refused.json()["field"] == "limt"
    assert "after_id, limit" in refused.json()["error"]
    assert web.client.get("/api/conversation?limit=5").status_code == 200
    for value, status in (("true", 200), ("false", 200), ("0", 422), ("yes", 422)):
        assert web.client.get(f"/api/memory/core?archived={value}").status_code == status, value


def test_a_body_is_taken_as_its_schema_says(web):
    for bad in ({"text": "hi", "priority": True}, {"text": "hi", "priority": "5"}, {"text": "   "}, {"text": "\x1e"}):
        refused = web.client.post("/api/notes", json=bad)
        assert refused.status_code == 422, bad
    assert web.client.post("/api/notes", json={"text": "hi", "priority": 9.0}).json()["text"] == "hi"
    assert web.client.put("/api/drives/curiosity", json={"level": True}).status_code == 422
    assert web.client.put("/api/drives/curiosity", json={"level": 1}).status_code == 200


def test_an_empty_upload_is_no_file(web):
    for path in ("/api/persona/import", "/api/persona/cards", "/api/sessions/revive"):
        refused = web.client.post(path)
        assert refused.status_code == 422 and refused.json()["field"] == "file", path
