// This machine as a Computer in memory mode: a Bot works in a real terminal and on files inside
// the allowed folders (docs/computers.md).
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

import { collect, scriptedModel, sdk, serverBinary, startServer, tempDir, textOf } from './helpers.mjs';

test('a Bot in memory writes a file and reads it back through a terminal', async () => {
  const folder = tempDir('openbot-node-computer-');
  const client = await sdk.connect('memory://', { computer: { folders: [folder] } });
  try {
    const model = scriptedModel({
      steps: [
        { tool_calls: [{ id: 'w', name: 'computer_file_write', arguments: { path: 'note.txt', content: 'from node\n' } }] },
        { tool_calls: [{ id: 's', name: 'computer_terminal_start', arguments: { command: 'cat note.txt' } }] },
        { tool_calls: [{ id: 'r', name: 'computer_terminal_read', arguments: { session_id: 't1', wait_ms: 5000 } }] },
        { text: 'done' },
      ],
    });
    const bot = await client.createBot({ name: 'Operator', model, tools: [...sdk.COMPUTER_TOOLS] });
    const events = await collect((await (await bot.createChat()).send('go')).events());
    const results = events.filter((e) => e.type === 'tool_result').map((e) => e.result);
    assert.equal(results.length, 3);
    assert.ok(results.every((r) => !r.is_error), JSON.stringify(results));
    assert.equal(readFileSync(join(folder, 'note.txt'), 'utf8'), 'from node\n');
    const output = JSON.parse(textOf(results[2].output));
    assert.match(output.chunks.map((c) => c.text).join(''), /from node/);
  } finally {
    await client.close();
  }
});

test('a Computer without terminal offers the file tools only, inside its folders', async () => {
  const folder = tempDir('openbot-node-computer-');
  const outside = tempDir('openbot-node-outside-');
  writeFileSync(join(outside, 'secret.txt'), 'keep out');
  const client = await sdk.connect('memory://', { computer: { folders: [folder], terminal: false } });
  try {
    const model = scriptedModel({
      steps: [
        { tool_calls: [{ id: 'o', name: 'computer_file_read', arguments: { path: join(outside, 'secret.txt') } }] },
        { tool_calls: [{ id: 's', name: 'computer_terminal_start', arguments: {} }] },
        { text: 'done' },
      ],
    });
    const bot = await client.createBot({ name: 'Reader', model, tools: [...sdk.COMPUTER_TOOLS] });
    const events = await collect((await (await bot.createChat()).send('go')).events());
    const results = events.filter((e) => e.type === 'tool_result').map((e) => e.result);
    assert.equal(results.length, 2);
    assert.equal(results[0].is_error, true);
    assert.match(textOf(results[0].output), /outside the folders/);
    // The terminal tools are not offered: the model's call names an unknown tool.
    assert.equal(results[1].is_error, true, JSON.stringify(results[1]));
    assert.match(textOf(results[1].output), /unknown tool/);
  } finally {
    await client.close();
  }
});

test('a Computer folder that does not exist is an InvalidInputError at connect', async () => {
  const missing = join(tempDir('openbot-node-computer-'), 'nope');
  assert.ok(!existsSync(missing));
  await assert.rejects(sdk.connect('memory://', { computer: { folders: [missing] } }), sdk.InvalidInputError);
  await assert.rejects(sdk.connect('memory://', { computer: { folders: [] } }), sdk.InvalidInputError);
});

test('a Computer with a server is an InvalidInputError: a server pairs its Computers', async () => {
  await assert.rejects(
    sdk.connect('http://127.0.0.1:9', { computer: { folders: [tempDir()] } }),
    sdk.InvalidInputError,
  );
});

test('a paired machine granted to a Bot runs its command, and a member reads the output by cursor', async () => {
  const server = await startServer();
  const client = await sdk.connect(server.url, { token: server.token });
  const folder = tempDir('openbot-node-machine-');
  let agent;
  try {
    const pairing = await client.startPairing({ name: 'node-box' });
    const computer = await client.approvePairing({ code: pairing.code });
    const claim = await client.claimPairing(pairing.id, { secret: pairing.secret });
    const saved = join(folder, 'computer.json');
    writeFileSync(saved, JSON.stringify({ server: server.url, computer_id: computer.id, credential: claim.credential }));
    agent = spawn(serverBinary(), ['computer', 'run', '--json', '--credential-file', saved, '--folder', folder], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    await new Promise((resolve) => {
      createInterface({ input: agent.stdout }).on('line', (line) => {
        if (JSON.parse(line).event === 'linked') resolve();
      });
    });
    const model = scriptedModel({
      steps: [
        { tool_calls: [{ id: 's', name: 'computer_terminal_start', arguments: { command: 'echo from-the-machine' } }] },
        { text: 'started' },
      ],
    });
    // On a server the Bot names the Computer tools; the grant routes them to the machine.
    const tools = sdk.COMPUTER_TOOLS.map((name) => ({ name, description: 'A Computer tool.', input_schema: { type: 'object' } }));
    const bot = await client.createBot({ name: 'Operator', model, tools });
    const grant = await client.grantComputer(computer.id, bot.id, { ask: false });
    assert.equal(grant.ask, false);
    const events = await collect((await (await bot.createChat()).send('go')).events());
    const result = events.find((e) => e.type === 'tool_result').result;
    assert.equal(result.is_error, false, JSON.stringify(result));
    const session = JSON.parse(textOf(result.output)).id;
    let cursor = 0;
    let text = '';
    for (let i = 0; i < 20; i++) {
      const out = await client.terminalOutput(computer.id, session, { after: cursor, wait_ms: 2000 });
      cursor = out.next_cursor;
      text += out.chunks.map((c) => c.text).join('');
      if (out.exited) break;
    }
    assert.match(text, /from-the-machine/);
    await client.revokeComputer(computer.id, bot.id);
    await assert.rejects(client.revokeComputer(computer.id, bot.id), sdk.NotFoundError);
  } finally {
    agent?.kill('SIGKILL');
    await client.close();
    await server.stop();
  }
});

test('a Connector a paired machine publishes is an App whose tool a Bot calls over the link', async () => {
  const mcp = process.env.OPENBOT_MCP_DIR ?? join(process.env.HOME, '.cache/openbot/mcp');
  const python = join(mcp, 'venv/bin/python');
  assert.ok(existsSync(python), `the MCP test servers are not installed in ${mcp}: run scripts/mcp-install`);
  const fixture = new URL('../../server/tests/support/mcp_fixture.py', import.meta.url).pathname;
  const server = await startServer();
  const client = await sdk.connect(server.url, { token: server.token });
  const folder = tempDir('openbot-node-connector-');
  const log = join(folder, 'fixture.log');
  let agent;
  try {
    const pairing = await client.startPairing({ name: 'node-connector' });
    const computer = await client.approvePairing({ code: pairing.code, shared: true });
    const claim = await client.claimPairing(pairing.id, { secret: pairing.secret });
    const saved = join(folder, 'computer.json');
    writeFileSync(saved, JSON.stringify({ server: server.url, computer_id: computer.id, credential: claim.credential }));
    const connector = `notes=${python} ${fixture} --log ${log} --delay 0`;
    agent = spawn(serverBinary(), ['computer', 'run', '--json', '--credential-file', saved, '--folder', folder, '--connector', connector], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    await new Promise((resolve) => {
      createInterface({ input: agent.stdout }).on('line', (line) => {
        if (JSON.parse(line).event === 'linked') resolve();
      });
    });
    const app = await client.registerApp({ name: 'notes', transport: { type: 'connector', computer_id: computer.id, connector: 'notes' } });
    assert.equal(app.transport.type, 'connector');
    const connection = await client.openAppConnection(app.id, { auth: 'none' });
    const found = await client.discoverAppTools(app.id, connection.id);
    const read = found.tools.find((t) => t.name === 'read_note');
    assert.equal(read.annotations.readOnlyHint, true);
    const model = scriptedModel({
      steps: [
        { tool_calls: [{ id: 'n', name: 'notes__write_note', arguments: { text: 'milk' } }] },
        { text: 'noted' },
      ],
    });
    const bot = await client.createBot({ name: 'Noter', model, tools: [{ name: 'notes__write_note', description: '-', input_schema: { type: 'object' } }] });
    const events = await collect((await (await bot.createChat()).send('go')).events());
    const result = events.find((e) => e.type === 'tool_result').result;
    assert.equal(result.is_error, false, JSON.stringify(result));
    assert.equal(textOf(result.output), 'write_note: milk');
    const calls = readFileSync(log, 'utf8').split('\n').filter((line) => line.startsWith('call write_note'));
    assert.equal(calls.length, 1, calls.join('\n'));
  } finally {
    agent?.kill('SIGKILL');
    await client.close();
    await server.stop();
  }
});
