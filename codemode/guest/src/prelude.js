// Runs before the program, in the same realm. It captures the host functions and the
// built-ins it needs in this closure, removes the host functions from the global object,
// and installs a frozen `tools` object, a bounded `console`, and a seeded Math.random.
// Nothing here is a security boundary: the host checks every call again.
(function () {
  "use strict";
  const g = globalThis;
  const hostCall = g.__openbot_call;
  const hostConsole = g.__openbot_console;
  const hostFinish = g.__openbot_finish;
  const input = g.__openbot_input;
  delete g.__openbot_call;
  delete g.__openbot_console;
  delete g.__openbot_finish;
  delete g.__openbot_input;

  const parse = JSON.parse;
  const stringify = JSON.stringify;
  const freeze = Object.freeze;
  const define = Object.defineProperty;
  const StringCtor = String;
  const cfg = parse(input);

  function describe(e) {
    try {
      if (e !== null && typeof e === "object") {
        const out = { name: StringCtor(e.name || "Error"), message: StringCtor(e.message || "") };
        if (typeof e.code === "string") out.code = e.code;
        if (typeof e.stack === "string") out.stack = e.stack;
        return out;
      }
      return { name: "Error", message: StringCtor(e) };
    } catch (_) {
      return { name: "Error", message: "the thrown value could not be read" };
    }
  }

  function finish(result) {
    let text;
    try {
      text = stringify(result);
    } catch (e) {
      text = stringify({ ok: false, error: { name: "TypeError", message: "the return value is not JSON: " + describe(e).message } });
    }
    hostFinish(text);
  }

  // Seeded per run by the host (mulberry32): the same call draws the same numbers on replay.
  let seed = cfg.seed >>> 0;
  function random() {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  define(Math, "random", { value: random, writable: false, configurable: false });

  function text(value) {
    if (typeof value === "string") return value;
    try {
      const s = stringify(value);
      return s === undefined ? StringCtor(value) : s;
    } catch (_) {
      return StringCtor(value);
    }
  }
  function logger(level) {
    return function (...args) {
      let line = "";
      for (let i = 0; i < args.length; i++) line += (i ? " " : "") + text(args[i]);
      hostConsole(level, line);
    };
  }
  const consoleObject = freeze({
    log: logger(0), info: logger(0), debug: logger(0), warn: logger(1), error: logger(2),
  });
  define(g, "console", { value: consoleObject, writable: false, configurable: false });

  /** A failed tool call: `code` is the stable error code, `tool` the tool's name. */
  class ToolError extends Error {
    constructor(tool, code, message) {
      super(message);
      this.name = "ToolError";
      this.tool = tool;
      this.code = code;
    }
  }
  define(g, "ToolError", { value: ToolError, writable: false, configurable: false });

  const tools = Object.create(null);
  for (const name of cfg.tools) {
    const call = async function (args) {
      const request = stringify({ tool: name, arguments: args === undefined ? {} : args });
      if (request === undefined) throw new TypeError("tool arguments must be JSON");
      const reply = parse(hostCall(request));
      if (reply.ok === true) return reply.value;
      throw new ToolError(name, StringCtor(reply.error.code), StringCtor(reply.error.message));
    };
    define(call, "name", { value: name });
    tools[name] = freeze(call);
  }
  define(g, "tools", { value: freeze(tools), writable: false, configurable: false });

  const AsyncFunction = Object.getPrototypeOf(async function () {}).constructor;
  let main;
  try {
    main = AsyncFunction(cfg.code);
  } catch (e) {
    finish({ ok: false, error: describe(e) });
    return;
  }
  main().then(
    (value) => finish({ ok: true, value: value === undefined ? null : value }),
    (e) => finish({ ok: false, error: describe(e) }),
  );
})();
