"""TypeScript: every operation as a typed method of the Node SDK (packages-js/src/operations.ts).

The file holds the operation table (`OPERATIONS`, each with its SDK method's name), the request
and answer types of each operation for the generic `Client.call` (`OperationTypes`), and the
abstract class `Operations` that `Client` extends: one method per operation, camelCase, typed
with the schema's components (schema.ts), checking its arguments' types and calling the native
addon's one generic `call`. An answer that is a Bot or a Chat becomes its handle; a paged list
(`limit` and `cursor` in, a page out) becomes a `Paged` async iterator over its items, with the
list's other query parameters as filters. The few operations the SDK writes by hand (in
index.ts, because they take friendlier input or stream) are named in HANDWRITTEN; they are in
the table and the types, and the SDK's tests check that `Client` has each of them.
"""

from __future__ import annotations

import re

from spec import ROOT, Operation, ref_name

OUT = ROOT / "packages-js" / "src" / "operations.ts"

# Operations whose Client method index.ts writes by hand, and its name there.
HANDWRITTEN = {
    "create_bot": "createBot",  # takes tool names given at connect
    "send": "send",  # text or content parts in, a Turn handle out
    "steer": "steer",
    "events": "events",  # an async iterator over the execution's event stream
    "get_plan_mode": "planMode",
    "put_plan_mode": "setPlanMode",  # (chatId, enabled)
}

# Schema components answered as a handle: the component, and the Operations hook that makes one.
HANDLES = {"Bot": ("Bot", "toBot"), "Chat": ("Chat", "toChat")}

# Schema components exported under another name (the handle classes take theirs), and those
# another module of the SDK exports (errors.ts).
RENAMED = {"Bot": "BotInfo", "Chat": "ChatInfo", "Execution": "ExecutionInfo"}
EXPORTED_ELSEWHERE = {"ErrorCode", "ErrorCategory"}

# Names a generated method must not take: the Client's own members.
RESERVED = {"call", "close", "execution", "native", "invoke", "connect", "constructor"}


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def method_name(op: Operation) -> str:
    return HANDWRITTEN.get(op.id) or camel(op.id)


def ts_type(schema: dict | None, handles: bool = False) -> str:
    """The TypeScript type of a schema: components from schema.ts, or their handles."""
    if not schema:
        return "unknown"
    name = ref_name(schema)
    if name:
        if handles and name in HANDLES:
            return HANDLES[name][0]
        if name in EXPORTED_ELSEWHERE:
            return f"Schemas['{name}']"
        return RENAMED.get(name, name)
    for option in schema.get("oneOf", []):
        if option.get("type") != "null":
            return f"{ts_type(option, handles)} | null"
    kind = schema.get("type")
    nullable = isinstance(kind, list) and "null" in kind
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "array":
        inner = ts_type(schema.get("items"), handles)
        text = f"({inner})[]" if "|" in inner else f"{inner}[]"
    else:
        text = {
            "string": "string",
            "integer": "number",
            "number": "number",
            "boolean": "boolean",
            "object": "Record<string, unknown>",
        }.get(kind or "", "unknown")
    return f"{text} | null" if nullable else text


def primitive(schema: dict | None, components: dict) -> tuple[str | None, bool]:
    """The primitive a schema checks as (`string`, `integer`, `number`, `boolean`, `object`,
    `array`), following references, and whether it may be null."""
    if not schema:
        return None, False
    name = ref_name(schema)
    if name:
        return primitive(components.get(name), components)
    options = schema.get("oneOf")
    if options:
        kinds = [o for o in options if o.get("type") != "null"]
        if len(kinds) == 1:
            return primitive(kinds[0], components)[0], len(kinds) < len(options)
        return None, False
    kind = schema.get("type")
    nullable = False
    if isinstance(kind, list):
        nullable = "null" in kind
        kinds = [k for k in kind if k != "null"]
        kind = kinds[0] if len(kinds) == 1 else None
    return kind, nullable


def shape(schema: dict | None, components: dict) -> str:
    """A compact description of an object's fields for the run-time check: `name: 'kind'`
    (`!` required, `?` may be absent or null)."""
    name = ref_name(schema)
    target = components.get(name) if name else schema
    if not target or target.get("type") != "object":
        return "{}"
    required = set(target.get("required", []))
    fields = []
    for field, field_schema in sorted(target.get("properties", {}).items()):
        kind, nullable = primitive(field_schema, components)
        if kind is None:
            continue
        mark = "!" if field in required and not nullable else "?"
        fields.append(f"{field}: '{kind}{mark}'")
    return "{ " + ", ".join(fields) + " }" if fields else "{}"


def query_shape(op: Operation, components: dict) -> str:
    fields = []
    for p in op.query_params:
        kind, _ = primitive(p.schema, components)
        if kind:
            fields.append(f"{p.name}: '{kind}{'!' if p.required else '?'}'")
    return "{ " + ", ".join(fields) + " }" if fields else "{}"


def query_type(op: Operation) -> str:
    fields = [
        f"{p.name}{'' if p.required else '?'}: {ts_type(p.schema)}" for p in op.query_params
    ]
    return "{ " + "; ".join(fields) + " }" if fields else "Record<string, never>"


def page_field(op: Operation, components: dict) -> tuple[str, dict | None]:
    """A paged answer's list field (`items`, or the one array of its page) and its item schema."""
    page = components.get(ref_name(op.answer_schema) or "", {})
    arrays = {
        name: s for name, s in page.get("properties", {}).items() if s.get("type") == "array"
    }
    if "items" in arrays:
        return "items", arrays["items"].get("items")
    if len(arrays) == 1:
        name, s = next(iter(arrays.items()))
        return name, s.get("items")
    raise SystemExit(f"{op.id}: a paged answer needs one list field (`items`)")


def comment(text: str, indent: str) -> str:
    lines, line = [], ""
    for word in text.split():
        if len(indent) + 3 + len(line) + len(word) > 99 and line:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    if line:
        lines.append(line)
    if len(lines) == 1 and len(indent) + len(lines[0]) + 7 <= 100:
        return f"{indent}/** {lines[0]} */\n"
    return f"{indent}/**\n" + "".join(f"{indent} * {l}\n" for l in lines) + f"{indent} */\n"


def answer_type(op: Operation) -> str:
    """A (not paged) method's answer: handles for Bots and Chats, `Bytes`, or nothing."""
    if op.answer == "bytes":
        return "Bytes"
    if op.answer == "empty":
        return "void"
    return ts_type(op.answer_schema, True)


def wrap(schema: dict | None, value: str) -> str:
    """The expression that turns an answer into its handles, if it holds any."""
    name = ref_name(schema)
    if name in HANDLES:
        return f"this.{HANDLES[name][1]}({value} as Schemas['{name}'])"
    if schema and schema.get("type") == "array" and ref_name(schema.get("items")) in HANDLES:
        item = ref_name(schema.get("items"))
        return f"({value} as Schemas['{item}'][]).map((info) => this.{HANDLES[item][1]}(info))"
    return f"{value} as {ts_type(schema)}"


def method(op: Operation, components: dict) -> str:
    name = method_name(op)
    where = f"'{name}'"
    args, checks, params = [], [], []
    for p in op.path_params:
        args.append(f"{p.name}: string")
        checks.append(f"    checkString({where}, '{p.name}', {p.name});")
        params.append(p.name)
    body = "undefined"
    if op.body == "json":
        args.append(f"body: {ts_type(op.body_schema)}")
        checks.append(f"    checkFields({where}, 'body', body, {shape(op.body_schema, components)});")
        body = "body"
    elif op.body == "bytes":
        args.append("data: Uint8Array | string")
        args.append("contentType: string")
        checks.append(f"    checkString({where}, 'contentType', contentType);")
        body = f"bytesOf({where}, data, contentType)"
    query = ""
    if op.query_params:
        required = any(p.required for p in op.query_params)
        args.append(f"options: {query_type(op)}" + ("" if required else " = {}"))
        checks.append(f"    checkFields({where}, 'options', options, {query_shape(op, components)});")
        query = "...options"
    param_list = ", ".join(params + ([query] if query else []))
    request = f"{{ {param_list} }}" if param_list else "{}"
    summary = op.summary or op.id
    doc = comment(f"{summary} `{op.method} {op.path}` (operation `{op.id}`).", "  ")
    if op.paged:
        field, item = page_field(op, components)
        item_type = ts_type(item, True)
        name_item = ref_name(item)
        each = (
            f"(info) => this.{HANDLES[name_item][1]}(info as Schemas['{name_item}'])"
            if name_item in HANDLES
            else f"(info) => info as {item_type}"
        )
        return (
            doc
            + f"  {name}({', '.join(args)}): Paged<{item_type}> {{\n"
            + "".join(c + "\n" for c in checks)
            + f"    return this.paged('{op.id}', {request}, '{field}', {each});\n"
            + "  }\n"
        )
    answer = answer_type(op)
    call = f"this.invoke('{op.id}', {request}, {body})"
    if op.answer == "empty":
        finish = f"    await {call};\n"
    elif op.answer == "bytes":
        finish = f"    return (await {call}) as Bytes;\n"
    else:
        finish = f"    return {wrap(op.answer_schema, f'(await {call})')};\n"
    return (
        doc
        + f"  async {name}({', '.join(args)}): Promise<{answer}> {{\n"
        + "".join(c + "\n" for c in checks)
        + finish
        + "  }\n"
    )


def table_entry(op: Operation) -> str:
    names = lambda params: "[" + ", ".join(f"'{p.name}'" for p in params) + "]"
    body = f"'{op.body}'" if op.body else "null"
    return (
        f"  {op.id}: {{ id: '{op.id}', sdkMethod: '{method_name(op)}', method: '{op.method}', "
        f"path: '{op.path}', tag: '{op.tag}', pathParams: {names(op.path_params)}, "
        f"queryParams: {names(op.query_params)}, body: {body}, answer: '{op.answer}', "
        f"paged: {'true' if op.paged else 'false'}, public: {'true' if op.public else 'false'}, "
        f"handwritten: {'true' if op.id in HANDWRITTEN else 'false'}, "
        f"memory: {'true' if op.memory else 'false'} }},\n"
    )


def types_entry(op: Operation) -> str:
    fields = [f"{p.name}: string" for p in op.path_params]
    fields += [
        f"{p.name}{'' if p.required else '?'}: {ts_type(p.schema)}" for p in op.query_params
    ]
    params = "{ " + "; ".join(fields) + " }" if fields else "Record<string, never>"
    body = {"json": ts_type(op.body_schema), "bytes": "BytesInput", None: "undefined"}[op.body]
    answer = {"bytes": "Bytes", "empty": "undefined"}.get(op.answer) or ts_type(op.answer_schema)
    return f"  {op.id}: {{ params: {params}; body: {body}; answer: {answer} }};\n"


def type_exports(components: dict) -> str:
    """A named type for every schema component, documented with its description."""
    out = []
    for name in sorted(components):
        if name in EXPORTED_ELSEWHERE:
            continue
        description = " ".join(components[name].get("description", name).split())
        out.append(comment(description, "") + f"export type {RENAMED.get(name, name)} = Schemas['{name}'];\n")
    return "".join(out)


def generate(operations: list[Operation], components: dict) -> list:
    for op in operations:
        name = method_name(op)
        if name in RESERVED or not re.fullmatch(r"[a-z][A-Za-z0-9]*", name):
            raise SystemExit(f"{op.id}: `{name}` cannot be a Client method")
    unknown = set(HANDWRITTEN) - {op.id for op in operations}
    if unknown:
        raise SystemExit(f"typescript.py: HANDWRITTEN names no operation: {sorted(unknown)}")
    handles = sorted({name for name, _ in HANDLES.values()})
    hooks = "".join(
        f"  /** @internal The {name} handle of its stored data. */\n"
        f"  protected abstract {hook}(info: Schemas['{component}']): {name};\n"
        for component, (name, hook) in sorted(HANDLES.items())
    )
    generated = [op for op in operations if op.id not in HANDWRITTEN]
    text = (
        "// Generated by scripts/generate-sdk (scripts/sdkgen/typescript.py) from\n"
        "// schema/openapi.json; do not edit.\n"
        "//\n"
        "// `OPERATIONS` is every operation of the HTTP API with the name of its Client method;\n"
        "// `OperationTypes` the types of each one's request and answer (for `Client.call`);\n"
        "// `Operations` a typed method for each one that index.ts does not write by hand.\n\n"
        "import type { components } from './schema';\n"
        f"import type {{ {', '.join(handles)} }} from './index';\n"
        "import { type Bytes, type BytesInput, type Paged, type Params, bytesOf, checkFields, "
        "checkString } from './runtime';\n\n"
        "type Schemas = components['schemas'];\n\n"
        + type_exports(components)
        + "\n"
        "/** One operation of the API, as schema/openapi.json declares it. */\n"
        "export interface OperationInfo {\n"
        "  /** Its `operationId`. */\n"
        "  readonly id: OperationId;\n"
        "  /** The name of its `Client` method. */\n"
        "  readonly sdkMethod: string;\n"
        "  /** The HTTP method, upper case. */\n"
        "  readonly method: string;\n"
        "  /** The path template, `{name}` for each path parameter. */\n"
        "  readonly path: string;\n"
        "  /** Its group (the OpenAPI tag). */\n"
        "  readonly tag: string;\n"
        "  /** Its path parameters, in the template's order. */\n"
        "  readonly pathParams: readonly string[];\n"
        "  /** Its query parameters. */\n"
        "  readonly queryParams: readonly string[];\n"
        "  /** What its request carries: a JSON document, bytes, or nothing. */\n"
        "  readonly body: 'json' | 'bytes' | null;\n"
        "  /** What it answers. */\n"
        "  readonly answer: 'json' | 'bytes' | 'empty';\n"
        "  /** A list answered page by page (`limit`, `cursor`): its method is a `Paged` iterator. */\n"
        "  readonly paged: boolean;\n"
        "  /** Needs no token. */\n"
        "  readonly public: boolean;\n"
        "  /** Its method is written by hand in index.ts (friendlier input, a stream). */\n"
        "  readonly handwritten: boolean;\n"
        "  /** The in-memory mode has it too (the others need a server: `InvalidInputError` there). */\n"
        "  readonly memory: boolean;\n"
        "}\n\n"
        "/** Every operation's `operationId`. */\n"
        "export type OperationId =\n"
        + "".join(f"  | '{op.id}'\n" for op in operations)
        + "  ;\n\n"
        "/** Every operation of the API by its `operationId`. */\n"
        "export const OPERATIONS: { readonly [K in OperationId]: OperationInfo } = {\n"
        + "".join(table_entry(op) for op in operations)
        + "};\n\n"
        "/** Each operation's path and query `params`, `body` and `answer`, in the wire format. */\n"
        "export interface OperationTypes {\n"
        + "".join(types_entry(op) for op in operations)
        + "}\n\n"
        "/**\n"
        " * A typed method for every operation of the API (index.ts writes the few in HANDWRITTEN\n"
        " * of the generator), each calling the one generic call path of the native addon.\n"
        " */\n"
        "export abstract class Operations {\n"
        "  /** @internal Runs one operation through the native addon's generic `call`. */\n"
        "  protected abstract invoke(id: OperationId, params: Params, body: unknown): Promise<unknown>;\n"
        "  /** @internal A paged list's items, page after page from `params.cursor`. */\n"
        "  protected abstract paged<T>(id: OperationId, params: Params, field: string, "
        "each: (info: unknown) => T): Paged<T>;\n"
        + hooks
        + "\n"
        + "\n".join(method(op, components) for op in generated)
        + "}\n"
    )
    return [(OUT, text)]
