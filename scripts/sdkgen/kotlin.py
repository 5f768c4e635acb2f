"""Kotlin and Swift (uniffi): every operation as a typed method of the mobile `Client`.

Writes two files:

- bindings/mobile/src/operations.rs: one `#[uniffi::export]` method per operation over the one
  generic `Client::call` of the core. uniffi turns each into a `suspend fun` in Kotlin (camelCase)
  and an `async` method in Swift; requests and answers are the schema's own types (the schema
  crate derives their records behind its `uniffi` feature), so nothing is copied by hand.
- bindings/mobile/kotlin/src/main/kotlin/openbot/Operations.kt: the table of operation IDs to
  Kotlin method names (the SDK's coverage test reads it), and for each list a Kotlin `Flow`
  (`<method>Flow`, with the list's filters) that walks its pages; a list the API still answers
  whole gets the same Flow over its one answer, so code written against it keeps working when
  the list becomes paged.

`events` is the hand-written `observe` (a resumable stream of events), not a generated method.
"""

from __future__ import annotations

from spec import ROOT, Operation, ref_name

RUST_OUT = ROOT / "bindings" / "mobile" / "src" / "operations.rs"
KOTLIN_OUT = ROOT / "bindings" / "mobile" / "kotlin" / "src" / "main" / "kotlin" / "openbot" / "Operations.kt"

# Operations a hand-written method of the binding gives instead of a generated one (value: the
# Rust method's name; uniffi makes it camelCase).
HAND_WRITTEN = {"events": "observe"}

# The Kotlin package of the schema's records (schema/uniffi.toml).
SCHEMA_PACKAGE = "uniffi.openbot.schema"


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def method_name(op: Operation) -> str:
    """The Rust method of an operation; Kotlin and Swift see it in camelCase."""
    return HAND_WRITTEN.get(op.id, op.id)


def scalar(schema: dict) -> tuple[str, str] | None:
    """The Rust and Kotlin types of a scalar schema, or None for anything else."""
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    unsigned = schema.get("minimum", -1) >= 0
    if kind == "integer":
        wide = schema.get("format") == "int64"
        if unsigned:
            return ("u64", "ULong") if wide else ("u32", "UInt")
        return ("i64", "Long") if wide else ("i32", "Int")
    if kind == "string":
        return "String", "String"
    if kind == "boolean":
        return "bool", "Boolean"
    return None


def rust_type(schema: dict | None) -> str:
    if not schema:
        return "schema::JsonValue"
    name = ref_name(schema)
    if name:
        return f"schema::{name}"
    if schema.get("type") == "array":
        return f"Vec<{rust_type(schema.get('items'))}>"
    found = scalar(schema)
    return found[0] if found else "schema::JsonValue"


def kotlin_type(schema: dict | None) -> str:
    if not schema:
        return "String"
    name = ref_name(schema)
    if name:
        return f"{SCHEMA_PACKAGE}.{name}"
    if schema.get("type") == "array":
        return f"List<{kotlin_type(schema.get('items'))}>"
    found = scalar(schema)
    return found[1] if found else "String"


def doc(text: str, indent: str, mark: str = "///") -> str:
    lines, line = [], ""
    for word in text.split():
        if len(indent) + len(mark) + 1 + len(line) + len(word) > 99 and line:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    if line:
        lines.append(line)
    return "".join(f"{indent}{mark} {l}\n" for l in lines)


def rust_method(op: Operation) -> str:
    args, sets, defaults = ["&self"], [], []
    for p in op.path_params:
        # Path parameters are text: the core checks them (an ID that is no UUID is
        # `invalid_input`, in both modes), so a malformed one is an error, not a crash.
        args.append(f"{p.name}: String")
        sets.append(f'        request.param("{p.name}", {p.name});')
    for p in op.query_params:
        inner = rust_type(p.schema)
        if p.required:
            args.append(f"{p.name}: {inner}")
        else:
            args.append(f"{p.name}: Option<{inner}>")
            defaults.append(f"{p.name} = None")
        sets.append(f'        request.param("{p.name}", {p.name});')
    if op.body == "json":
        args.append(f"body: {rust_type(op.body_schema)}")
        sets.append("        request.json(&body).map_err(from_core)?;")
    elif op.body == "bytes":
        args.append("body: Vec<u8>")
        args.append("content_type: String")
        sets.append("        request.bytes(body, &content_type);")
    if op.answer == "json":
        answer = rust_type(op.answer_schema)
        finish = "answer.decode().map_err(from_core)"
    elif op.answer == "bytes":
        answer = "ApiBytes"
        finish = "Ok(answer.into_bytes().map_err(from_core)?.into())"
    else:
        answer, finish = "()", "Ok(())"
    attribute = f"    #[uniffi::method(default({', '.join(defaults)}))]\n" if defaults else ""
    mutable = "mut " if sets else ""
    bound = "answer" if op.answer != "empty" else "_answer"
    return (
        doc(op.summary or op.id, "    ")
        + f"    /// (`{op.method} {op.path}`, operation `{op.id}`)\n"
        + attribute
        + f"    pub async fn {method_name(op)}({', '.join(args)}) -> Result<{answer}, OpenBotError> {{\n"
        + f"        let {mutable}request = ApiRequest::default();\n"
        + "".join(s + "\n" for s in sets)
        + f'        let {bound} = self.call_operation("{op.id}", request).await?;\n'
        + f"        {finish}\n"
        + "    }\n"
    )


def rust_file(operations: list[Operation]) -> str:
    methods = [rust_method(op) for op in operations if op.id not in HAND_WRITTEN]
    return (
        "//! Generated by scripts/generate-sdk (scripts/sdkgen/kotlin.py) from schema/openapi.json;\n"
        "//! do not edit.\n"
        "//!\n"
        "//! Every operation of the HTTP API as a method of the mobile [`Client`], over the one generic\n"
        "//! `Client::call` of the core: the same in both modes (in memory, an operation only a server\n"
        "//! has fails with `invalid_input`). Requests and answers are the schema's types.\n\n"
        "// One argument per parameter of the API's operation, as the schema declares them.\n"
        "#![allow(clippy::too_many_arguments)]\n\n"
        "use openbot_core::ApiRequest;\n"
        "use openbot_schema as schema;\n\n"
        "use crate::client::{ApiBytes, Client};\n"
        "use crate::error::{OpenBotError, from_core};\n\n"
        "#[uniffi::export]\n"
        "impl Client {\n" + "\n".join(methods) + "}\n"
    )


def page_items(op: Operation, components: dict) -> tuple[str, dict] | None:
    """The list field of a paged answer (`items`, or a list's older name) and its item schema."""
    component = components.get(ref_name(op.answer_schema) or "", {})
    lists = {
        name: prop
        for name, prop in component.get("properties", {}).items()
        if prop.get("type") == "array"
    }
    if "items" in lists:
        return "items", lists["items"]["items"]
    if len(lists) == 1:
        name, prop = next(iter(lists.items()))
        return name, prop["items"]
    return None


def kotlin_flow(op: Operation, components: dict) -> str:
    found = page_items(op, components)
    if not found:
        raise SystemExit(f"{op.id}: a paged answer needs one list field (`items`)")
    field, item = found
    params, passes = [], []
    for p in op.path_params:
        params.append(f"{camel(p.name)}: String")
        passes.append(camel(p.name))
    for p in op.query_params:
        if p.name == "cursor":
            passes.append("cursor")
            continue
        kind = kotlin_type(p.schema)
        if p.required:
            params.append(f"{camel(p.name)}: {kind}")
        else:
            params.append(f"{camel(p.name)}: {kind}? = null")
        passes.append(camel(p.name))
    name = camel(method_name(op))
    return (
        "/**\n"
        + doc(
            f"Every item of `{name}`, page after page ({op.summary.rstrip('.')}). `limit` is the "
            "size of each page; the next page is asked for only when the collector wants more.",
            "",
            " *",
        )
        + " */\n"
        f"fun Client.{name}Flow({', '.join(params)}): Flow<{kotlin_type(item)}> =\n"
        f"    pagedFlow({{ cursor -> {name}({', '.join(passes)}) }}, {{ it.{camel(field)} }}, {{ it.nextCursor }})\n"
    )


def is_list(op: Operation) -> bool:
    """A list operation: paged, or (until it is paged) answering a whole JSON list."""
    return op.paged or (op.answer == "json" and (op.answer_schema or {}).get("type") == "array")


def kotlin_list_flow(op: Operation) -> str:
    """The Flow of a list the API answers whole: the same name and filters as a paged one's."""
    params, passes = [], []
    for p in op.path_params:
        params.append(f"{camel(p.name)}: String")
        passes.append(camel(p.name))
    for p in op.query_params:
        kind = kotlin_type(p.schema)
        params.append(f"{camel(p.name)}: {kind}" if p.required else f"{camel(p.name)}: {kind}? = null")
        passes.append(camel(p.name))
    name = camel(method_name(op))
    item = kotlin_type(op.answer_schema.get("items"))
    return (
        "/**\n"
        + doc(
            f"Every item of `{name}` ({op.summary.rstrip('.')}), as a Flow: the API answers this "
            "list whole today; once it is paged, this asks page after page with the same filters.",
            "",
            " *",
        )
        + " */\n"
        f"fun Client.{name}Flow({', '.join(params)}): Flow<{item}> =\n"
        f"    pagedFlow({{ _: String? -> {name}({', '.join(passes)}) }}, {{ it }}, {{ null }})\n"
    )


def kotlin_file(operations: list[Operation], components: dict) -> str:
    rows = "".join(
        f'    "{op.id}" to "{camel(method_name(op))}",\n' for op in operations
    )
    flows = "\n".join(
        kotlin_flow(op, components) if op.paged else kotlin_list_flow(op)
        for op in operations
        if is_list(op)
    )
    return (
        "// Generated by scripts/generate-sdk (scripts/sdkgen/kotlin.py) from schema/openapi.json;\n"
        "// do not edit.\n\n"
        "package uniffi.openbot\n\n"
        "import kotlinx.coroutines.flow.Flow\n\n"
        "/** Every operation of the HTTP API, by its `operationId`, and the `Client` method for it. */\n"
        "val OPERATION_METHODS: Map<String, String> = linkedMapOf(\n"
        + rows
        + ")\n\n"
        + flows
    )


def generate(operations: list[Operation], components: dict) -> list:
    return [
        (RUST_OUT, rust_file(operations)),
        (KOTLIN_OUT, kotlin_file(operations, components)),
    ]
