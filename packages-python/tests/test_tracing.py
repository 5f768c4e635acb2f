"""enable_tracing (docs/observability.md): a memory-mode Turn's GenAI spans reach an OTLP/HTTP
receiver as protobuf. The Turn runs in a fresh interpreter: export is turned on once per
process."""

from __future__ import annotations

import http.server
import subprocess
import sys
import textwrap
import threading

PROGRAM = """
import json, sys, tempfile
import openbot_platform as openbot

script = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
json.dump({"steps": [{"tool_calls": [{"id": "call_1", "name": "add", "arguments": {"a": 2, "b": 3}}]},
                     {"text": "Five."}]}, script)
script.close()

assert openbot.enable_tracing(ENDPOINT, service_name="python-sdk-test") is True
client = openbot.connect_sync("memory://", tools={"add": lambda a, b: str(a + b)})
bot = client.create_bot(name="Adder", model="scripted:" + script.name,
                        tools=[{"name": "add", "input_schema": {"type": "object"}}])
turn = client.send(client.create_chat(bot), "secret-sum-4417")
turn.wait()
client.close()
openbot.flush_tracing()
print("done", flush=True)
"""


class _Receiver(http.server.BaseHTTPRequestHandler):
    bodies: list[tuple[str, str, bytes]] = []

    def do_POST(self) -> None:  # noqa: N802 (the handler's method name)
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        _Receiver.bodies.append((self.path, self.headers.get("content-type", ""), body))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_enable_tracing_exports_a_turn_as_genai_spans_over_otlp_http() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        program = f"ENDPOINT = {endpoint!r}\n" + textwrap.dedent(PROGRAM)
        done = subprocess.run(
            [sys.executable, "-c", program], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        assert "done" in done.stdout
        assert _Receiver.bodies, "the receiver got an export"
        assert all(
            path == "/v1/traces" and kind == "application/x-protobuf"
            for path, kind, _ in _Receiver.bodies
        )
        sent = b"".join(body for _, _, body in _Receiver.bodies)
        # Protobuf keeps strings as they are: span names and attributes are in the bytes.
        for expected in [b"invoke_agent Adder", b"execute_tool add", b"chat ", b"python-sdk-test"]:
            assert expected in sent, expected
        assert b"secret-sum-4417" not in sent, "no message text without the opt-in"
    finally:
        server.shutdown()
