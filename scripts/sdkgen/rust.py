"""Rust: the operation table and the typed `Operations` trait (core/src/client/operations.rs)."""

from __future__ import annotations

import re

from spec import ROOT, Operation, ref_name

OUT = ROOT / "core" / "src" / "client" / "operations.rs"


def rust_type(schema: dict | None) -> str:
    """The Rust type of a schema: a schema component by its name, lists as `Vec`."""
    if not schema:
        return "serde_json::Value"
    name = ref_name(schema)
    if name:
        return name
    if schema.get("type") == "array":
        return f"Vec<{rust_type(schema.get('items'))}>"
    for option in schema.get("oneOf", []):
        if option.get("type") != "null":
            return rust_type(option)
    return {"string": "String", "integer": "u64", "boolean": "bool"}.get(
        schema.get("type", ""), "serde_json::Value"
    )


def query_type(param) -> str:
    """A query parameter's argument type (optional unless required)."""
    inner = rust_type(param.schema)
    if inner == "String":
        inner = "&str"
    elif inner not in ("u64", "bool"):
        inner = f"&{inner}"
    return inner if param.required else f"Option<{inner}>"


def doc(text: str, indent: str) -> str:
    lines, line = [], ""
    for word in text.split():
        if len(indent) + 4 + len(line) + len(word) > 99 and line:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    if line:
        lines.append(line)
    return "".join(f"{indent}/// {l}\n" for l in lines)


def table_entry(op: Operation) -> str:
    names = lambda params: ", ".join(f'"{p.name}"' for p in params)
    body = {"json": "BodyKind::Json", "bytes": "BodyKind::Bytes", None: "BodyKind::None"}[op.body]
    answer = {"json": "AnswerKind::Json", "bytes": "AnswerKind::Bytes", "empty": "AnswerKind::Empty"}[
        op.answer
    ]
    client = f'Some("{op.client_method}")' if op.client_method else "None"
    return (
        "    Operation {\n"
        f'        id: "{op.id}",\n'
        f'        method: "{op.method}",\n'
        f'        path: "{op.path}",\n'
        f"        path_params: &[{names(op.path_params)}],\n"
        f"        query_params: &[{names(op.query_params)}],\n"
        f"        body: {body},\n"
        f"        answer: {answer},\n"
        f"        public: {'true' if op.public else 'false'},\n"
        f"        client_method: {client},\n"
        f"        memory: {'true' if op.memory else 'false'},\n"
        "    },\n"
    )


def method(op: Operation) -> str:
    args, sets = ["&self"], []
    for p in op.path_params:
        args.append(f"{p.name}: &(dyn std::fmt::Display + Sync)")
        sets.append(f'        request.param("{p.name}", {p.name}.to_string());')
    for p in op.query_params:
        args.append(f"{p.name}: {query_type(p)}")
        sets.append(f'        request.param("{p.name}", {p.name});')
    if op.body == "json":
        args.append(f"body: &{rust_type(op.body_schema)}")
        sets.append("        request.json(body)?;")
    elif op.body == "bytes":
        args.append("body: Vec<u8>")
        args.append("content_type: &str")
        sets.append("        request.bytes(body, content_type);")
    if op.answer == "json":
        answer, finish = rust_type(op.answer_schema), "self.call(OP, request).await?.decode()"
    elif op.answer == "bytes":
        answer, finish = "ApiBytes", "self.call(OP, request).await?.into_bytes()"
    else:
        answer, finish = "()", "self.call(OP, request).await.map(|_| ())"
    mutable = "mut " if sets else ""
    body = "\n".join(sets)
    return (
        doc(op.summary or op.id, "    ")
        + f"    async fn {op.id}({', '.join(args)}) -> Result<{answer}, Error> {{\n"
        + f'        const OP: &str = "{op.id}";\n'
        + f"        let {mutable}request = ApiRequest::default();\n"
        + (body + "\n" if body else "")
        + f"        {finish}\n"
        + "    }\n"
    )


def item_type(op: Operation, components: dict) -> str:
    """The item type of a paged operation's answer (`BotPage` -> `Bot`)."""
    page = components.get(ref_name(op.answer_schema) or "", {})
    return rust_type(page.get("properties", {}).get("items", {}).get("items"))


def all_method(op: Operation, components: dict) -> str:
    """For a paged operation, a method that follows the cursors and answers every item."""
    filters = [p for p in op.query_params if p.name not in ("limit", "cursor")]
    args = ["&self"] + [f"{p.name}: &(dyn std::fmt::Display + Sync)" for p in op.path_params]
    args += [f"{p.name}: {query_type(p)}" for p in filters]
    # The paged method takes path, then query parameters, in order: pass each by position.
    order = [p.name for p in op.path_params] + [
        p.name if p.name not in ("limit", "cursor") else ("None" if p.name == "limit" else "cursor.as_deref()")
        for p in op.query_params
    ]
    return (
        doc(f"Every item of `{op.id}`, following its pages to the end.", "    ")
        + f"    async fn {op.id}_all({', '.join(args)}) -> Result<Vec<{item_type(op, components)}>, Error> {{\n"
        + "        let mut items = Vec::new();\n"
        + "        let mut cursor: Option<String> = None;\n"
        + "        loop {\n"
        + f"            let page = self.{op.id}({', '.join(order)}).await?;\n"
        + "            items.extend(page.items);\n"
        + "            match page.next_cursor {\n"
        + "                Some(next) => cursor = Some(next),\n"
        + "                None => return Ok(items),\n"
        + "            }\n"
        + "        }\n"
        + "    }\n"
    )


def generate(operations: list[Operation], components: dict) -> tuple:
    methods = "\n".join(
        method(op) + ("\n" + all_method(op, components) if op.paged else "")
        for op in operations
        if not op.client_method
    )
    # The schema types the methods name, imported once.
    code = "\n".join(line for line in methods.splitlines() if not line.strip().startswith("///"))
    used = {name for name in components if re.search(rf"\b{name}\b", code)}
    text = (
        "//! Generated by scripts/generate-sdk from schema/openapi.json; do not edit.\n"
        "//!\n"
        "//! [`OPERATIONS`] is every operation of the HTTP API; [`Operations`] gives each one that\n"
        "//! the [`Client`] trait does not declare by hand a typed method, in both modes (in memory,\n"
        "//! an operation only a server has fails with `invalid_input`).\n\n"
        "// One argument per parameter of the API's operation, as the schema declares them.\n"
        "#![allow(clippy::too_many_arguments)]\n\n"
        "use async_trait::async_trait;\n"
        + (f"use openbot_schema::{{{', '.join(sorted(used))}}};\n" if used else "")
        + "\n"
        "use super::Client;\n"
        "use super::api::{AnswerKind, ApiBytes, ApiRequest, BodyKind, Operation};\n"
        "use crate::error::Error;\n\n"
        "/// Every operation of the HTTP API, as schema/openapi.json declares it.\n"
        "pub const OPERATIONS: &[Operation] = &[\n"
        + "".join(table_entry(op) for op in operations)
        + "];\n\n"
        "/// A typed method for each operation the [`Client`] trait does not declare by hand.\n"
        "#[async_trait]\n"
        "pub trait Operations: Client {\n"
        + methods
        + "}\n\n"
        "impl<C: Client + ?Sized> Operations for C {}\n"
    )
    return [(OUT, text)]
