"""A small real MCP server (the `mcp` Python SDK, installed beside mcp-server-time) whose tools the
App tests steer: how long a call takes, what its declaration says, and a log of what it received.

    python mcp_fixture.py --log FILE [--delay SECONDS] [--once-marker FILE]
                          [--description-file FILE] [--http PORT] [--stubborn]

With `--stubborn` (stdio), the server does not stop when its client closes: it ignores
SIGTERM and stays after its input ends, so a close can end only by a kill, after the
client's close has given up.

With `--once-marker`, only the first call (of any process) takes the delay: it creates the
marker; later calls find it and answer at once.

Tools: `write_note` (no hints: a write that must not be repeated blindly) and `read_note`
(readOnlyHint). Each call appends `pid <process>` and `call <tool> <request id> <text>` to
the log, then
`done <tool>` or `cancelled <tool>` (a `notifications/cancelled` from the client); over HTTP
an `X-Fixture-Key` request header is logged as `header x-fixture-key <value>`.
"""

import argparse
import asyncio
import os

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

parser = argparse.ArgumentParser()
parser.add_argument("--log", required=True)
parser.add_argument("--delay", type=float, default=0.0)
parser.add_argument("--once-marker")
parser.add_argument("--description-file")
parser.add_argument("--http", type=int)
parser.add_argument("--stubborn", action="store_true")
args = parser.parse_args()

description = "Writes a note."
if args.description_file:
    with open(args.description_file) as f:
        description = f.read().strip()


def log(line: str) -> None:
    with open(args.log, "a") as f:
        f.write(line + "\n")


def request_id(ctx: Context) -> str:
    meta = getattr(ctx.request_context, "meta", None)
    if meta is None:
        return "-"
    value = getattr(meta, "model_extra", None) or {}
    if not value and isinstance(meta, dict):
        value = meta
    return str(value.get("openbot/requestId", "-"))


server = MCPServer("fixture")


async def run(tool: str, text: str, ctx: Context) -> str:
    log(f"pid {os.getpid()}")
    log(f"call {tool} {request_id(ctx)} {text}")
    headers = ctx.headers or {}
    if "x-fixture-key" in headers:
        log(f"header x-fixture-key {headers['x-fixture-key']}")
    delay = args.delay
    if args.once_marker:
        try:
            with open(args.once_marker, "x"):
                pass
        except FileExistsError:
            delay = 0.0
    try:
        await asyncio.sleep(delay)
    except asyncio.CancelledError:
        log(f"cancelled {tool}")
        raise
    log(f"done {tool}")
    return f"{tool}: {text}"


@server.tool(description=description)
async def write_note(text: str, ctx: Context) -> str:
    return await run("write_note", text, ctx)


@server.tool(description="Reads a note.", annotations=ToolAnnotations(readOnlyHint=True))
async def read_note(text: str, ctx: Context) -> str:
    return await run("read_note", text, ctx)


if args.http:
    server.run("streamable-http", host="127.0.0.1", port=args.http)
else:
    if args.stubborn:
        import signal
        import time

        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    server.run()
    if args.stubborn:
        log("stdin closed; staying")
        time.sleep(60)
