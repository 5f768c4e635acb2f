// Shared test helpers: the two modes, a real `openbot serve` for the remote mode, scripted models.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

import * as sdk from '../dist/index.js';

export { sdk };

/** The `openbot` binary: $OPENBOT_BIN, or the `ci` build in $CARGO_TARGET_DIR. */
export function serverBinary() {
  if (process.env.OPENBOT_BIN) return process.env.OPENBOT_BIN;
  const target = process.env.CARGO_TARGET_DIR || join(homedir(), '.cache', 'openbot', 'target');
  return join(target, 'ci', 'openbot');
}

/** A folder removed when the process exits. */
export function tempDir(prefix = 'openbot-node-test-') {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Writes a scripted model's script to a fresh file; gives the model spec `scripted:<path>`. */
let scripts = 0;
let scriptDir;
export function scriptedModel(script) {
  scriptDir ??= tempDir('openbot-node-scripts-');
  const file = join(scriptDir, `script-${process.pid}-${++scripts}.json`);
  writeFileSync(file, JSON.stringify(script));
  return `scripted:${file}`;
}

/**
 * Starts `openbot serve` on a fresh SQLite data folder and 127.0.0.1:0; gives its URL, the admin
 * token, its data folder and a stop function. With `options.data` (and the `token` it printed
 * on its first start) it serves that folder again, as a restarted node; `options.leaseMs` sets
 * how soon work of a dead node is taken over.
 */
export async function startServer(options = {}) {
  const bin = serverBinary();
  if (!existsSync(bin)) {
    throw new Error(`no server binary at ${bin}: build it with cargo build --profile ci -p openbot-server --bin openbot`);
  }
  const data = options.data ?? tempDir('openbot-node-server-');
  if (!options.data) execFileSync(bin, ['migrate', '--data-dir', data], { stdio: ['ignore', 'ignore', 'inherit'] });
  const lease = options.leaseMs === undefined ? [] : ['--lease-ms', String(options.leaseMs)];
  const child = spawn(bin, ['serve', '--data-dir', data, '--bind', '127.0.0.1:0', ...lease, '--scripted-dir', tmpdir()], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // A process killed by a signal keeps `exitCode` null and sets `signalCode`.
  const exited = () => child.exitCode !== null || child.signalCode !== null;
  const stop = () => {
    if (!exited()) child.kill('SIGKILL');
  };
  process.on('exit', stop);
  // Only a first start prints the admin token.
  const token = options.token
    ? Promise.resolve(options.token)
    : new Promise((resolve) => {
        createInterface({ input: child.stdout }).once('line', resolve);
      });
  let stderr = '';
  const url = new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stderr });
    lines.on('line', (line) => {
      stderr += `${line}\n`;
      const found = line.match(/listening on (http:\/\/[0-9.:]+)/);
      if (found) resolve(found[1]);
    });
    child.once('exit', (code) => reject(new Error(`openbot serve exited with ${code}:\n${stderr}`)));
  });
  const timeout = new Promise((_, reject) => {
    const timer = setTimeout(() => reject(new Error(`openbot serve did not start in 30 s:\n${stderr}`)), 30_000);
    timer.unref();
  });
  const [u, t] = await Promise.race([Promise.all([url, token]), timeout]);
  return {
    url: u,
    token: t.trim(),
    data,
    /** SIGKILL: the server is gone at once. */
    kill: () => stop(),
    stop: async () => {
      if (exited()) return;
      const done = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await done;
    },
  };
}

/**
 * The two modes. Each gives `connect(options)` for a fresh client; the remote mode starts one
 * server per test file the first time it is used, and stops it at `stopAll()`.
 */
let server;
let started;
export const modes = [
  {
    name: 'memory',
    connect: (options = {}) => sdk.connect('memory://', options),
    target: () => ({ uri: 'memory://' }),
  },
  {
    name: 'remote',
    connect: async (options = {}) => {
      server ??= startServer();
      const { url, token } = await server;
      started = { uri: url, token };
      return sdk.connect(url, { token, ...options });
    },
    /** The server's URL and token; only after `connect` started it. */
    target: () => {
      if (!started) throw new Error('the server was not started');
      return started;
    },
  },
];

export async function stopServer() {
  if (server) {
    const s = await server.catch(() => undefined);
    await s?.stop();
    server = undefined;
  }
}

/** Collects an execution's events. */
export async function collect(iterable) {
  const events = [];
  for await (const event of iterable) events.push(event);
  return events;
}

/** The text of an event list's last model step (its last attempt). */
export function replyOf(events) {
  const starts = events.filter((e) => e.type === 'model_step_started');
  const last = starts[starts.length - 1];
  if (!last) return '';
  return events
    .filter((e) => e.type === 'text_delta' && e.step === last.step && e.attempt === last.attempt)
    .map((e) => e.text)
    .join('');
}

/** The text parts of content, joined. */
export function textOf(content) {
  return content.filter((p) => p.type === 'text').map((p) => p.text).join('');
}
