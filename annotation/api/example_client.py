"""A client that knows nothing but the OpenAPI schema: it lists questions and rates one item as an annotator.

Run against a running platform::

    python -m annotation.api.example_client --base-url http://127.0.0.1:8000 --username annotator1 --password orca-demo

It gets a token from ``/api/auth/token/`` (the one path written here: the schema is served to logged-in users
only), downloads ``/api/schema/`` (OpenAPI 3, JSON), finds each operation by its ``operationId``, checks the token
operation is the one it used (``auth_token_create``), asks the queue for the next item
(``assignments_next_create``), submits a rating for it (``ratings_create``, score 1–5 and feedback codes from ORCA
paper, Appendix A) and lists the questions it may read (``questions_list``: an annotator's own items). It prints
one JSON object with what it did.
Standard library only (urllib), so any Python 3.11 can run it without installing this project. No Django import.

Exit status: 0 on success (including "nothing left to rate"), 1 when a request fails (the HTTP status and the
server's message are printed).
"""
from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.parse
import urllib.request

SCHEMA_PATH = "/api/schema/"
#: Where a token is had: the only path written here, because the schema needs a login to be read.
TOKEN_PATH = "/api/auth/token/"
#: The operations this client uses, by operationId (drf-spectacular names them <resource>_<action>).
OPERATIONS = ("auth_token_create", "questions_list", "assignments_next_create", "ratings_create")


class ApiError(RuntimeError):
    """A request answered with an HTTP error; ``str()`` gives the operation, status and the server's body."""


class SchemaClient:
    """Calls operations of an OpenAPI 3 schema by operationId, with token authentication once logged in."""

    def __init__(self, *, base_url: str, username: str, password: str, timeout_s: float = 30.0):
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.token: str | None = None
        self.token = self._request("POST", TOKEN_PATH, body={"username": username, "password": password})[1]["token"]
        self.schema = self._request("GET", SCHEMA_PATH, accept="application/vnd.oai.openapi+json")[1]
        self.operations: dict[str, tuple[str, str, dict]] = {}
        for path, item in self.schema.get("paths", {}).items():
            for method, operation in item.items():
                if isinstance(operation, dict) and "operationId" in operation:
                    self.operations[operation["operationId"]] = (method.upper(), path, operation)
        missing = [name for name in OPERATIONS if name not in self.operations]
        if "auth_token_create" in self.operations and self.operations["auth_token_create"][1] != TOKEN_PATH:
            raise ApiError(f"the schema at {self.base_url}{SCHEMA_PATH} moved auth_token_create away from "
                           f"{TOKEN_PATH}")
        if missing:
            raise ApiError(f"the schema at {self.base_url}{SCHEMA_PATH} has no operation {', '.join(missing)}")

    def _request(self, method: str, path: str, *, body: dict | None = None, query: dict | None = None,
                 accept: str = "application/json") -> tuple[int, object]:
        url = self.base_url + path + ("?" + urllib.parse.urlencode(query) if query else "")
        headers = {"Accept": accept}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Token {self.token}"
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                raw = response.read()
                return response.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as error:
            raise ApiError(
                f"{method} {path}: HTTP {error.code}: {error.read().decode(errors='replace')[:500]}"
            ) from None

    def request_fields(self, operation_id: str) -> tuple[set[str], set[str]]:
        """(all properties, required properties) of the operation's JSON request body, from the schema."""
        content = self.operations[operation_id][2].get("requestBody", {}).get("content", {})
        schema = content.get("application/json", {}).get("schema", {})
        if "$ref" in schema:
            schema = self.schema["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
        return set(schema.get("properties", {})), set(schema.get("required", []))

    def call(self, operation_id: str, *, body: dict | None = None, query: dict | None = None,
             path_params: dict | None = None) -> tuple[int, object]:
        """Call an operation by operationId; returns (HTTP status, decoded JSON or None). Raises ApiError."""
        method, path, _ = self.operations[operation_id]
        for name, value in (path_params or {}).items():
            path = path.replace("{" + name + "}", urllib.parse.quote(str(value)))
        return self._request(method, path, body=body, query=query)


def rate_one_item(*, base_url: str, username: str, password: str, score: int = 4, codes: str = "",
                  comment: str = "") -> dict:
    """Log in, take the next assignment, rate it and list the questions one may read.

    Returns ``{"questions": total count, "first_questions": [{"id", "external_id", "question"}...] (up to 5),
    "rated": {"rating", "candidate", "score", "codes"} or None when nothing is left to rate}``.

    Raises:
        ApiError: the schema lacks an operation, or a request failed (e.g. HTTP 400 for wrong credentials).
    """
    client = SchemaClient(base_url=base_url, username=username, password=password)

    rated = None
    status, assignment = client.call("assignments_next_create", body={})
    if status != 204 and assignment:
        fields, required = client.request_fields("ratings_create")
        body = {"candidate": assignment["candidate"]["id"], "assignment": assignment["id"], "score": score,
                "codes": codes, "comment": comment}
        body = {key: value for key, value in body.items() if key in fields}
        if not required <= set(body):
            raise ApiError(f"ratings_create needs fields this client does not know: {sorted(required - set(body))}")
        _, rating = client.call("ratings_create", body=body)
        rated = {"rating": rating["id"], "candidate": rating["candidate"], "score": rating["score"],
                 "codes": rating["codes"]}

    # Annotators list the questions of their own items, each at the version they rated ("version"); experts and
    # admins every question at its current version.
    _, page = client.call("questions_list")
    first = [
        {"id": q["id"], "external_id": q.get("external_id"),
         "question": (q.get("current_version") or q.get("version") or {}).get("question_text")}
        for q in page["results"][:5]
    ]
    return {"questions": page["count"], "first_questions": first, "rated": rated}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:8000")
    parser.add_argument("--username", required=True)
    parser.add_argument("--password", required=True)
    parser.add_argument("--score", type=int, default=4, choices=range(1, 6), help="correctness 1-5 (default 4)")
    parser.add_argument("--codes", default="", help="feedback codes, any of QARUE (ORCA paper, Appendix A)")
    parser.add_argument("--comment", default="")
    args = parser.parse_args(argv)
    try:
        result = rate_one_item(base_url=args.base_url, username=args.username, password=args.password,
                               score=args.score, codes=args.codes, comment=args.comment)
    except (ApiError, urllib.error.URLError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
