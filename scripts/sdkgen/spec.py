"""The API's operations, read once from schema/openapi.json for every SDK generator.

Each generator (rust.py, and one per language) turns these into that language's methods; none
reads the OpenAPI document itself, so a rule about operations (which are paged, which take
bytes, how parameters are named) is written here once.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OPENAPI = ROOT / "schema" / "openapi.json"

# Operations the core `Client` trait declares by hand, because they do more than one request
# (send and steer watch their execution for host tools; delete_chat waits for the deletion;
# events is `observe`, a resumable stream). Value: the Client method's name.
CLIENT_METHODS = {
    "create_bot": "create_bot",
    "get_bot": "get_bot",
    "list_bots": "list_bots",
    "update_bot": "update_bot",
    "delete_bot": "delete_bot",
    "create_chat": "create_chat",
    "get_chat": "get_chat",
    "send": "send",
    "steer": "steer",
    "stop": "stop",
    "delete_chat": "delete_chat",
    "history": "history",
    "get_execution": "get_execution",
    "events": "observe",
    "cancel_execution": "cancel_execution",
    "deliver_tool_result": "deliver_tool_result",
    "list_approvals": "list_approvals",
    "decide_approval": "decide_approval",
    "list_unknown_outcomes": "list_unknown_outcomes",
    "decide_outcome": "decide_outcome",
    "pause_execution": "pause_execution",
    "resume_execution": "resume_execution",
    "get_plan_mode": "plan_mode",
    "put_plan_mode": "set_plan_mode",
}

# Operations no Client method declares that the in-memory Client answers too, by the same
# IDs and shapes (core/src/memory/client/operations.rs): what makes sense in one process. Every
# other operation without a Client method needs a server (`invalid_input` in memory).
MEMORY_OPERATIONS = {
    "list_tools",
    "put_tool",
    "delete_tool",
    "list_delegates",
    "put_delegate",
    "delete_delegate",
    "list_files",
    "upload_file",
    "get_file",
    "delete_file",
    "file_content",
    "list_memories",
    "create_memory",
    "get_memory",
    "update_memory",
    "delete_memory",
    "search_memories",
    "get_memory_settings",
    "put_memory_settings",
    "register_app",
    "list_apps",
    "get_app",
    "remove_app",
    "open_app_connection",
    "list_app_connections",
    "get_app_connection",
    "remove_app_connection",
    "discover_app_tools",
    "run_code",
}


@dataclass
class Param:
    """A path or query parameter."""

    name: str
    location: str  # "path" or "query"
    schema: dict
    required: bool
    description: str = ""


@dataclass
class Operation:
    """One API operation."""

    id: str
    method: str  # upper case
    path: str
    summary: str
    tag: str
    params: list[Param] = field(default_factory=list)
    body: str | None = None  # "json" or "bytes"
    body_schema: dict | None = None
    answer: str = "empty"  # "empty", "json" or "bytes"
    answer_schema: dict | None = None
    public: bool = False  # needs no token

    @property
    def path_params(self) -> list[Param]:
        return [p for p in self.params if p.location == "path"]

    @property
    def query_params(self) -> list[Param]:
        """The query parameters, filters first and then the page's `limit` and `cursor`, so that
        every SDK takes a list's filters first (`list_approvals("pending")`)."""
        query = [p for p in self.params if p.location == "query"]
        return sorted(query, key=lambda p: p.name in ("limit", "cursor"))

    @property
    def paged(self) -> bool:
        """A list answered page by page: `limit` and `cursor` in, `items` and `next_cursor` out."""
        names = {p.name for p in self.query_params}
        return "cursor" in names and "limit" in names and self.answer == "json"

    @property
    def client_method(self) -> str | None:
        return CLIENT_METHODS.get(self.id)

    @property
    def memory(self) -> bool:
        """Whether `memory://` answers it: a Client method's, or one of MEMORY_OPERATIONS."""
        return self.client_method is not None or self.id in MEMORY_OPERATIONS


def ref_name(schema: dict | None) -> str | None:
    """The component a schema names (`#/components/schemas/Bot` -> `Bot`), if it is a reference."""
    if schema and "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    return None


def load(path: Path = OPENAPI) -> tuple[list[Operation], dict]:
    """The operations in document order (sorted by path, then method), and the components."""
    doc = json.loads(path.read_text())
    operations = []
    for route, methods in doc["paths"].items():
        template = set(re.findall(r"{(\w+)}", route))
        for method, op in methods.items():
            params = []
            for p in op.get("parameters", []):
                location = p["in"]
                if location == "path" and p["name"] not in template:
                    raise SystemExit(
                        f"{op['operationId']}: parameter `{p['name']}` is declared in the path "
                        f"but `{route}` has no such segment (use parameter_in = Query)"
                    )
                params.append(
                    Param(
                        name=p["name"],
                        location=location,
                        schema=p.get("schema", {}),
                        required=p.get("required", False),
                        description=p.get("description", ""),
                    )
                )
            body = body_schema = None
            content = op.get("requestBody", {}).get("content", {})
            if "application/json" in content:
                body, body_schema = "json", content["application/json"].get("schema")
            elif content:
                body = "bytes"
            answer, answer_schema = "empty", None
            for code, response in sorted(op["responses"].items()):
                if not code.startswith("2"):
                    continue
                kinds = response.get("content", {})
                if "application/json" in kinds:
                    answer, answer_schema = "json", kinds["application/json"].get("schema")
                elif kinds:
                    answer = "bytes"
                break
            operations.append(
                Operation(
                    id=op["operationId"],
                    method=method.upper(),
                    path=route,
                    summary=" ".join(op.get("summary", "").split()),
                    tag=(op.get("tags") or ["api"])[0],
                    params=params,
                    body=body,
                    body_schema=body_schema,
                    answer=answer,
                    answer_schema=answer_schema,
                    public=op.get("security") is None,
                )
            )
    ids = [o.id for o in operations]
    duplicates = {i for i in ids if ids.count(i) > 1}
    if duplicates:
        raise SystemExit(f"operation IDs used twice: {sorted(duplicates)}")
    return operations, doc.get("components", {}).get("schemas", {})


def write(path: Path, text: str, check: bool) -> bool:
    """Writes a generated file, or with `check` says whether it is stale. True when up to date."""
    current = path.read_text() if path.exists() else None
    if current == text:
        return True
    if check:
        print(f"stale: {path.relative_to(ROOT)} (run scripts/generate-sdk)")
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(f"wrote {path.relative_to(ROOT)}")
    return True
