// Node SDK benchmarks (scripts/bench-node, figures in docs/benchmarks.md, section "Node SDK").
//
// 1. Loop time per model step, with a JavaScript tool, in the same run for three libraries:
//    - @openbot/sdk, memory:// mode: a Bot with one tool `echo(text)` served by a JS function and
//      a scripted model (core's ScriptedModel, from a file) that answers `steps - 1` times with one
//      call to `echo`, then with the text "done". Each Turn is a new Chat, `chat.send`, then
//      `execution.wait()` (which reads every event of the Turn into JavaScript).
//    - Vercel AI SDK (`ai`): `generateText` with `MockLanguageModelV2` (ai/test) scripted the same
//      way, the same `echo` tool (zod schema) and `stopWhen: stepCountIs(steps)`.
//    - OpenAI Agents SDK (`@openai/agents`): an Agent with the same tool and a custom Model whose
//      getResponse gives the same outputs; tracing disabled; `run(agent, input, { maxTurns })`.
//    Every Turn of every library is checked: `steps` model steps, `steps - 1` echo calls, "done".
//    CPU time per model step (process.cpuUsage, all threads) is reported beside the wall time.
//    Each library is warmed up (300 Turns), then the rounds alternate between the three so a
//    change in the machine's load falls on all alike. Figure: median over rounds of
//    (round time / model steps in the round).
// 2. The cost of one call from JavaScript into the native addon (`noop()`), in ns.
//
// Prints what it measures and, last, one JSON line with every figure.
// Usage: node loop.mjs [--steps 10] [--turns 200] [--rounds 15] [--warmup 300]
//                      [--peer-turns 100] [--noop-calls 5000000]
import { writeFileSync, mkdtempSync, rmSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';

import { Agent, Usage, run, setTracingDisabled, tool as agentsTool } from '@openai/agents';
import { generateText, stepCountIs, tool as aiTool } from 'ai';
import { MockLanguageModelV2 } from 'ai/test';
import { z } from 'zod';

const require = createRequire(import.meta.url);
const sdkPath = new URL('../../../packages-js/dist/index.js', import.meta.url).pathname;
const sdk = require(sdkPath);
const native = require(new URL('../../../packages-js/native.js', import.meta.url).pathname);

function option(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? fallback : Number(process.argv[i + 1]);
}
const STEPS = option('steps', 10);
const TURNS = option('turns', 200);
const ROUNDS = option('rounds', 15);
const WARMUP = option('warmup', 300);
const PEER_TURNS = option('peer-turns', 100);
const NOOP_CALLS = option('noop-calls', 5_000_000);

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const check = (ok, what) => {
  if (!ok) throw new Error(`benchmark check failed: ${what}`);
};

/** One library under test: its name, one Turn, and the Turns per round. */
async function warm(name, turn, turns) {
  for (let i = 0; i < WARMUP; i++) await turn();
  return { name, turn, turns, rounds: [], cpu: [] };
}

/** One round of `turns` Turns; µs per model step. */
async function round(lib) {
  const cpu = process.cpuUsage();
  const start = performance.now();
  for (let i = 0; i < lib.turns; i++) await lib.turn();
  lib.rounds.push(((performance.now() - start) * 1000) / (lib.turns * STEPS));
  const used = process.cpuUsage(cpu);
  lib.cpu.push((used.user + used.system) / (lib.turns * STEPS));
}

function report(lib) {
  const us = median(lib.rounds);
  const cpu = median(lib.cpu);
  console.log(`${lib.name}: ${us.toFixed(2)} µs per model step, CPU ${cpu.toFixed(2)} µs per model step (medians of ${ROUNDS} rounds of ${lib.turns} Turns; wall per round: ${lib.rounds.map((x) => x.toFixed(1)).join(', ')})`);
  return { us_per_step: us, cpu_us_per_step: cpu, rounds: lib.rounds, cpu_rounds: lib.cpu, turns: lib.turns };
}

// --- @openbot/sdk ------------------------------------------------------------------------------
async function openbot() {
  const dir = mkdtempSync(join(tmpdir(), 'openbot-bench-node-'));
  try {
    const steps = [];
    for (let i = 0; i < STEPS - 1; i++) steps.push({ tool_calls: [{ name: 'echo', arguments: { text: 'x' } }] });
    steps.push({ text: 'done' });
    const script = join(dir, 'script.json');
    writeFileSync(script, JSON.stringify({ steps, repeat: true }));
    let calls = 0;
    const client = await sdk.connect('memory://', {
      tools: {
        echo: ({ text }) => {
          calls++;
          return text;
        },
      },
    });
    const bot = await client.createBot({
      name: 'Bench',
      model: `scripted:${script}`,
      tools: [{ name: 'echo', description: 'Repeats the text.', input_schema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] } }],
    });
    let turns = 0;
    const turn = async () => {
      const chat = await bot.createChat();
      const execution = await chat.send('go');
      const info = await execution.wait();
      turns++;
      check(info.outcome === 'completed', `openbot outcome ${info.outcome}`);
      check(calls === turns * (STEPS - 1), `openbot echo calls ${calls} after ${turns} Turns`);
    };
    // One Turn checked in full: its events and its answer.
    const chat = await bot.createChat();
    const events = [];
    for await (const e of (await chat.send('go')).events()) events.push(e);
    turns++;
    check(events.filter((e) => e.type === 'model_step_started').length === STEPS, 'openbot model steps');
    check(events.filter((e) => e.type === 'tool_result' && !e.result.is_error).length === STEPS - 1, 'openbot tool results');
    check(events.filter((e) => e.type === 'text_delta').map((e) => e.text).join('') === 'done', 'openbot answer');
    return { lib: await warm('openbot (@openbot/sdk, memory://, JS tool)', turn, TURNS), close: () => client.close(), dir };
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
}

// --- Vercel AI SDK -----------------------------------------------------------------------------
async function vercel() {
  const usage = { inputTokens: 10, outputTokens: 5, totalTokens: 15 };
  const model = new MockLanguageModelV2({
    doGenerate: async ({ prompt }) => {
      const done = prompt.filter((m) => m.role === 'tool').length;
      if (done < STEPS - 1) {
        return {
          content: [{ type: 'tool-call', toolCallId: `call_${done + 1}`, toolName: 'echo', input: '{"text":"x"}' }],
          finishReason: 'tool-calls',
          usage,
          warnings: [],
        };
      }
      return { content: [{ type: 'text', text: 'done' }], finishReason: 'stop', usage, warnings: [] };
    },
  });
  let calls = 0;
  const tools = {
    echo: aiTool({
      description: 'Repeats the text.',
      inputSchema: z.object({ text: z.string() }),
      execute: async ({ text }) => {
        calls++;
        return text;
      },
    }),
  };
  let turns = 0;
  const turn = async () => {
    const result = await generateText({ model, tools, prompt: 'go', stopWhen: stepCountIs(STEPS) });
    turns++;
    check(result.text === 'done', `ai text ${result.text}`);
    check(result.steps.length === STEPS, `ai steps ${result.steps.length}`);
    check(calls === turns * (STEPS - 1), `ai echo calls ${calls}`);
  };
  return warm(`vercel ai ${version('ai')} (generateText, MockLanguageModelV2)`, turn, PEER_TURNS);
}

// --- OpenAI Agents SDK -------------------------------------------------------------------------
async function openaiAgents() {
  setTracingDisabled(true);
  let requests = 0;
  class ScriptedModel {
    async getResponse(request) {
      requests++;
      const input = Array.isArray(request.input) ? request.input : [];
      const done = input.filter((item) => item.type === 'function_call_result').length;
      const output =
        done < STEPS - 1
          ? [{ type: 'function_call', callId: `call_${done + 1}`, name: 'echo', arguments: '{"text":"x"}', status: 'completed' }]
          : [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'done' }] }];
      return { usage: new Usage(), output, responseId: `resp_${requests}` };
    }
    // eslint-disable-next-line require-yield
    async *getStreamedResponse() {
      throw new Error('not streamed in this benchmark');
    }
  }
  let calls = 0;
  const echo = agentsTool({
    name: 'echo',
    description: 'Repeats the text.',
    parameters: z.object({ text: z.string() }),
    execute: async ({ text }) => {
      calls++;
      return text;
    },
  });
  const agent = new Agent({ name: 'Bench', instructions: 'Echo.', model: new ScriptedModel(), tools: [echo] });
  let turns = 0;
  const turn = async () => {
    const before = requests;
    const result = await run(agent, 'go', { maxTurns: STEPS });
    turns++;
    check(result.finalOutput === 'done', `agents output ${result.finalOutput}`);
    check(requests - before === STEPS, `agents model requests ${requests - before}`);
    check(calls === turns * (STEPS - 1), `agents echo calls ${calls}`);
  };
  return warm(`openai agents ${version('@openai/agents')} (run, scripted Model)`, turn, PEER_TURNS);
}

function version(pkg) {
  const path = new URL(`node_modules/${pkg}/package.json`, import.meta.url).pathname;
  return JSON.parse(readFileSync(path, 'utf8')).version;
}

// --- the no-op native call ---------------------------------------------------------------------
function noopCall() {
  const loop = (fn) => {
    for (let i = 0; i < NOOP_CALLS / 10; i++) fn();
    const times = [];
    for (let r = 0; r < 7; r++) {
      const start = process.hrtime.bigint();
      for (let i = 0; i < NOOP_CALLS; i++) fn();
      times.push(Number(process.hrtime.bigint() - start) / NOOP_CALLS);
    }
    return median(times);
  };
  const nativeNs = loop(native.noop);
  const wrapperNs = loop(sdk.noop);
  const emptyJs = (() => {
    let sink = 0;
    const f = () => {
      sink++;
    };
    const ns = loop(f);
    check(sink > 0, 'empty function ran');
    return ns;
  })();
  console.log(`noop native call: ${nativeNs.toFixed(1)} ns (through the package's noop(): ${wrapperNs.toFixed(1)} ns; an empty JS function: ${emptyJs.toFixed(1)} ns); median of 7 loops of ${NOOP_CALLS} calls`);
  return { native_ns: nativeNs, package_ns: wrapperNs, empty_js_ns: emptyJs };
}

const noop = noopCall();
// Each library is warmed up first (WARMUP Turns); then the rounds alternate between the three,
// so that a change in the machine's load falls on all of them alike.
const ob = await openbot();
const libs = [ob.lib, await vercel(), await openaiAgents()];
for (let r = 0; r < ROUNDS; r++) for (const lib of libs) await round(lib);
await ob.close();
rmSync(ob.dir, { recursive: true, force: true });
const [ours, ai, agents] = libs.map(report);
const ratioAi = ai.us_per_step / ours.us_per_step;
const ratioAgents = agents.us_per_step / ours.us_per_step;
console.log(`ratio: openbot is ${ratioAi.toFixed(1)}x faster per model step than the Vercel AI SDK, ${ratioAgents.toFixed(1)}x faster than the OpenAI Agents SDK`);
const cpuAi = ai.cpu_us_per_step / ours.cpu_us_per_step;
const cpuAgents = agents.cpu_us_per_step / ours.cpu_us_per_step;
console.log(`CPU ratio: openbot uses ${cpuAi.toFixed(1)}x less CPU per model step than the Vercel AI SDK, ${cpuAgents.toFixed(1)}x less than the OpenAI Agents SDK`);
console.log(
  JSON.stringify({
    node: process.version,
    steps: STEPS,
    openbot: ours,
    vercel_ai: { version: version('ai'), ...ai },
    openai_agents: { version: version('@openai/agents'), ...agents },
    ratio_vs_vercel_ai: ratioAi,
    ratio_vs_openai_agents: ratioAgents,
    cpu_ratio_vs_vercel_ai: cpuAi,
    cpu_ratio_vs_openai_agents: cpuAgents,
    noop,
  }),
);
