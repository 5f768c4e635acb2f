// The Client's behaviours, one a test, in both modes.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, test } from 'node:test';

import { collect, modes, replyOf, scriptedModel, sdk, startServer, stopServer, textOf } from './helpers.mjs';

const addTool = {
  name: 'add',
  description: 'Adds two integers.',
  input_schema: {
    type: 'object',
    properties: { a: { type: 'integer' }, b: { type: 'integer' } },
    required: ['a', 'b'],
  },
};

/** A script whose first step calls `tool`, then answers `text`. */
function callThenAnswer(tool, args, text) {
  return { steps: [{ tool_calls: [{ id: 'call_1', name: tool, arguments: args }] }, { text }] };
}

after(stopServer);

const fixture = (name) => join(dirname(fileURLToPath(import.meta.url)), 'fixtures', name);

for (const mode of modes) {
  describe(`client (${mode.name})`, () => {
    /** Runs `body` with a fresh client, closed afterwards. */
    async function withClient(options, body) {
      const client = await mode.connect(options);
      try {
        return await body(client);
      } finally {
        await client.close();
      }
    }

    test('createBot gives a Bot with an ID, its spec and revision 1', () =>
      withClient({}, async (client) => {
        const bot = await client.createBot({ name: 'Greeter', model: scriptedModel({ steps: [] }) });
        assert.match(bot.id, /^[0-9a-f-]{36}$/);
        assert.equal(bot.spec.name, 'Greeter');
        assert.equal(bot.revision, 1);
        assert.ok(bot instanceof sdk.Bot);
      }));

    test('getBot and listBots read a created Bot', () =>
      withClient({}, async (client) => {
        const bot = await client.createBot({ name: 'Reader', model: scriptedModel({ steps: [] }) });
        assert.deepEqual((await client.getBot(bot.id)).info, bot.info);
        assert.ok((await client.listBots()).some((b) => b.id === bot.id));
      }));

    test('update with a stale revision fails with ConflictError and changes nothing', () =>
      withClient({}, async (client) => {
        const bot = await client.createBot({ name: 'Old', model: scriptedModel({ steps: [] }) });
        const updated = await bot.update({ name: 'New', revision: 1 });
        assert.equal(updated.revision, 2);
        await assert.rejects(bot.update({ name: 'Stale', revision: 1 }), sdk.ConflictError);
        assert.equal((await client.getBot(bot.id)).spec.name, 'New');
      }));

    test('send starts a Turn and wait gives its completed state', () =>
      withClient({}, async (client) => {
        const bot = await client.createBot({ name: 'Greeter', model: scriptedModel({ steps: [{ text: 'Hello!' }] }) });
        const chat = await bot.createChat();
        const execution = await chat.send('Hi');
        assert.equal(execution.receipt?.disposition, 'started');
        const info = await execution.wait();
        assert.equal(info.state, 'completed');
        assert.equal(info.outcome, 'completed');
        const history = await chat.history();
        assert.deepEqual(
          history.map((e) => [e.message.role, textOf(e.message.content)]),
          [
            ['user', 'Hi'],
            ['assistant', 'Hello!'],
          ],
        );
      }));

    test('events are an async iterator numbered from 1 without gaps', () =>
      withClient({}, async (client) => {
        const bot = await client.createBot({ name: 'Streamer', model: scriptedModel({ steps: [{ deltas: ['a', 'b', 'c'] }] }) });
        const execution = await (await bot.createChat()).send('Go');
        const events = await collect(execution.events());
        assert.deepEqual(
          events.map((e) => e.sequence),
          events.map((_, i) => i + 1),
        );
        assert.equal(events[0].type, 'turn_started');
        assert.equal(events[events.length - 1].type, 'turn_ended');
        assert.equal(replyOf(events), 'abc');
      }));

    test('events(after) resumes after a cursor', () =>
      withClient({}, async (client) => {
        const bot = await client.createBot({ name: 'Resumer', model: scriptedModel({ steps: [{ text: 'done' }] }) });
        const execution = await (await bot.createChat()).send('Go');
        const all = await collect(execution.events());
        const rest = await collect(client.events(execution.id, 2));
        assert.deepEqual(rest, all.slice(2));
      }));

    test('leaving the event loop early cancels nothing', () =>
      withClient({}, async (client) => {
        const model = scriptedModel({ steps: [{ deltas: ['slow', ' answer'], delay_ms: 50 }] });
        const bot = await client.createBot({ name: 'Slow', model });
        const execution = await (await bot.createChat()).send('Go');
        for await (const event of execution.events()) {
          if (event.type === 'turn_started') break;
        }
        assert.equal((await execution.wait()).outcome, 'completed');
      }));

    test('an async JavaScript function serves a Bot tool', () =>
      withClient({ tools: { add: async ({ a, b }) => String(a + b) } }, async (client) => {
        const model = scriptedModel(callThenAnswer('add', { a: 2, b: 3 }, '5'));
        const bot = await client.createBot({ name: 'Adder', model, tools: [addTool] });
        const events = await collect((await (await bot.createChat()).send('2+3?')).events());
        const result = events.find((e) => e.type === 'tool_result');
        assert.equal(result.result.is_error, false);
        assert.equal(textOf(result.result.output), '5');
      }));

    test('a sync function that returns a non-string gives the model its JSON', () => {
      const seen = [];
      const tools = {
        add: ({ a, b }, context) => {
          seen.push(context);
          return { sum: a + b };
        },
      };
      return withClient({ tools }, async (client) => {
        const model = scriptedModel(callThenAnswer('add', { a: 4, b: 5 }, 'nine'));
        const bot = await client.createBot({ name: 'Adder', model, tools: [addTool] });
        const execution = await (await bot.createChat()).send('4+5?');
        const events = await collect(execution.events());
        const result = events.find((e) => e.type === 'tool_result');
        assert.deepEqual(JSON.parse(textOf(result.result.output)), { sum: 9 });
        assert.equal(seen.length, 1);
        assert.equal(seen[0].executionId, execution.id);
        assert.equal(seen[0].callId, 'call_1');
        assert.equal(seen[0].step, 1);
      });
    });

    test('a tool that throws gives the model its message and the caller the thrown Error itself', () => {
      const thrown = new RangeError('no numbers today');
      return withClient({ tools: { add: () => { throw thrown; } } }, async (client) => {
        const model = scriptedModel(callThenAnswer('add', { a: 1, b: 2 }, 'sorry'));
        const bot = await client.createBot({ name: 'Breaker', model, tools: [addTool] });
        const execution = await (await bot.createChat()).send('1+2?');
        const events = await collect(execution.events());
        const result = events.find((e) => e.type === 'tool_result');
        assert.equal(result.result.is_error, true);
        assert.match(textOf(result.result.output), /no numbers today/);
        assert.equal(result.error, thrown);
        assert.equal((await execution.wait()).outcome, 'completed');
      });
    });

    test('an async tool that rejects with a non-Error value gives that value back', () =>
      withClient({ tools: { add: async () => Promise.reject('plain string') } }, async (client) => {
        const model = scriptedModel(callThenAnswer('add', { a: 1, b: 2 }, 'sorry'));
        const bot = await client.createBot({ name: 'Breaker', model, tools: [addTool] });
        const events = await collect((await (await bot.createChat()).send('1+2?')).events());
        const result = events.find((e) => e.type === 'tool_result');
        assert.equal(result.error, 'plain string');
        assert.match(textOf(result.result.output), /plain string/);
      }));

    test('a tool result that is not JSON gives the model an error result', () =>
      withClient({ tools: { add: () => ({ big: 1n }) } }, async (client) => {
        const model = scriptedModel(callThenAnswer('add', { a: 1, b: 2 }, 'sorry'));
        const bot = await client.createBot({ name: 'Big', model, tools: [addTool] });
        const events = await collect((await (await bot.createChat()).send('1+2?')).events());
        const result = events.find((e) => e.type === 'tool_result');
        assert.equal(result.result.is_error, true);
        assert.ok(result.error instanceof TypeError, `not a TypeError: ${result.error}`);
        assert.match(textOf(result.result.output), /BigInt/);
      }));

    test('cancelling the Turn aborts the signal of a running tool', () => {
      let aborted;
      const abortSeen = new Promise((resolve) => (aborted = resolve));
      const tools = {
        add: (_args, { signal }) =>
          new Promise((_, reject) => {
            signal.addEventListener('abort', () => {
              aborted(signal.reason);
              reject(signal.reason);
            });
          }),
      };
      return withClient({ tools }, async (client) => {
        const model = scriptedModel(callThenAnswer('add', { a: 1, b: 2 }, 'never'));
        const bot = await client.createBot({ name: 'Long', model, tools: [addTool] });
        const execution = await (await bot.createChat()).send('1+2?');
        for await (const event of execution.events()) {
          if (event.type === 'tool_call') break;
        }
        await execution.cancel();
        // The tool's threadsafe functions never keep the process alive: the timer does, while
        // this test waits for the abort to arrive.
        let timer;
        const reason = await Promise.race([
          abortSeen,
          new Promise((_, reject) => {
            timer = setTimeout(() => reject(new Error('the signal was not aborted within 10 s')), 10_000);
          }),
        ]).finally(() => clearTimeout(timer));
        assert.ok(reason instanceof sdk.CancelledError);
        await assert.rejects(execution.wait(), sdk.CancelledError);
      });
    });

    test('a Bot tool with no function waits for deliverToolResult', () =>
      withClient({}, async (client) => {
        const model = scriptedModel(callThenAnswer('add', { a: 2, b: 2 }, 'four'));
        const bot = await client.createBot({ name: 'Host', model, tools: [addTool] });
        const execution = await (await bot.createChat()).send('2+2?');
        let delivered = false;
        for await (const event of execution.events()) {
          if (event.type === 'tool_call' && !delivered) {
            delivered = true;
            await execution.deliverToolResult({
              call_id: event.call.id,
              name: event.call.name,
              output: [{ type: 'text', text: '4' }],
            });
          }
        }
        assert.ok(delivered);
        assert.equal((await execution.wait()).outcome, 'completed');
      }));

    test('deliverToolResult for a call that is not open fails with ConflictError', () =>
      withClient({}, async (client) => {
        const bot = await client.createBot({ name: 'Done', model: scriptedModel({ steps: [{ text: 'ok' }] }) });
        const execution = await (await bot.createChat()).send('Hi');
        await execution.wait();
        await assert.rejects(
          execution.deliverToolResult({ call_id: 'nope', name: 'add', output: [{ type: 'text', text: '1' }] }),
          sdk.ConflictError,
        );
      }));

    test('the same command key and input give the same execution', () =>
      withClient({}, async (client) => {
        const bot = await client.createBot({ name: 'Once', model: scriptedModel({ steps: [{ text: 'ok' }], repeat: true }) });
        const chat = await bot.createChat();
        const first = await chat.send('Hi', { commandKey: 'greet-1' });
        const again = await chat.send('Hi', { commandKey: 'greet-1' });
        assert.equal(again.id, first.id);
      }));

    test('the same command key with other input fails with ConflictError', () =>
      withClient({}, async (client) => {
        const bot = await client.createBot({ name: 'Once', model: scriptedModel({ steps: [{ text: 'ok' }], repeat: true }) });
        const chat = await bot.createChat();
        await chat.send('Hi', { commandKey: 'greet-2' });
        await assert.rejects(chat.send('Bye', { commandKey: 'greet-2' }), (e) => {
          assert.ok(e instanceof sdk.ConflictError);
          assert.equal(e.code, 'conflict');
          return true;
        });
      }));

    test('a cancelled execution makes wait throw CancelledError', () =>
      withClient({}, async (client) => {
        const model = scriptedModel({ steps: [{ deltas: ['a', 'b', 'c', 'd'], delay_ms: 2000 }] });
        const bot = await client.createBot({ name: 'Slow', model });
        const execution = await (await bot.createChat()).send('Go');
        for await (const event of execution.events()) {
          if (event.type === 'model_step_started') break;
        }
        await execution.cancel();
        await assert.rejects(execution.wait(), (e) => {
          assert.ok(e instanceof sdk.CancelledError);
          assert.equal(e.code, 'cancelled');
          return true;
        });
        assert.equal((await execution.info()).state, 'cancelled');
      }));

    test('stop cancels the running Turn and queued input runs next', () =>
      withClient({}, async (client) => {
        const model = scriptedModel({ steps: [{ deltas: ['slow'], delay_ms: 5000 }, { text: 'second' }] });
        const bot = await client.createBot({ name: 'Stopper', model });
        const chat = await bot.createChat();
        const first = await chat.send('first');
        const second = await chat.send('second');
        assert.equal(second.receipt?.disposition, 'queued');
        for await (const event of first.events()) {
          if (event.type === 'model_step_started') break;
        }
        await chat.stop();
        await assert.rejects(first.wait(), sdk.CancelledError);
        assert.equal((await second.wait()).outcome, 'completed');
      }));

    test('a failed Turn makes wait throw RequestFailedError with category and errorId', () =>
      withClient({}, async (client) => {
        const bot = await client.createBot({ name: 'Broken', model: scriptedModel({ steps: [{ error: 'unauthorized' }] }) });
        const execution = await (await bot.createChat()).send('Hi');
        await assert.rejects(execution.wait(), (e) => {
          assert.ok(e instanceof sdk.RequestFailedError, `not a RequestFailedError: ${e}`);
          assert.equal(e.code, 'request_failed');
          assert.equal(typeof e.category, 'string');
          assert.match(e.errorId, /^[0-9a-f-]{36}$/);
          return true;
        });
      }));

    test('an unknown ID fails with NotFoundError carrying its code', () =>
      withClient({}, async (client) => {
        await assert.rejects(client.getChat('019ad1c8-0000-7000-8000-000000000000'), (e) => {
          assert.ok(e instanceof sdk.NotFoundError);
          assert.ok(e instanceof sdk.OpenBotError);
          assert.equal(e.code, 'not_found');
          assert.equal(e.category, undefined);
          assert.equal(e.errorId, undefined);
          return true;
        });
      }));

    test('a string that is not an ID fails with InvalidInputError', () =>
      withClient({}, async (client) => {
        await assert.rejects(client.getBot('not-an-id'), sdk.InvalidInputError);
      }));

    test('a deleted Chat is not found', () =>
      withClient({}, async (client) => {
        const bot = await client.createBot({ name: 'Temp', model: scriptedModel({ steps: [] }) });
        const chat = await bot.createChat();
        await chat.delete();
        await assert.rejects(client.getChat(chat.id), sdk.NotFoundError);
      }));

    test('a closed client fails with ClosedError', async () => {
      const client = await mode.connect({});
      await client.close();
      await assert.rejects(async () => client.listBots().toArray(), (e) => {
        assert.ok(e instanceof sdk.ClosedError);
        assert.equal(e.code, 'closed');
        return true;
      });
    });

    test('closing the client ends a pending wait with ClosedError', async () => {
      const client = await mode.connect({});
      const model = scriptedModel({ steps: [{ deltas: ['a', 'b'], delay_ms: 3000 }] });
      const bot = await client.createBot({ name: 'Slow', model });
      const execution = await (await bot.createChat()).send('Go');
      const waiting = assert.rejects(execution.wait(), sdk.ClosedError);
      await client.close();
      await waiting;
    });

    test('steer joins the running Turn and the model sees it', () =>
      withClient({}, async (client) => {
        const model = scriptedModel({ steps: [{ deltas: ['thinking'], delay_ms: 1500 }, { text: 'done' }] });
        const bot = await client.createBot({ name: 'Steered', model, tools: [addTool] });
        const chat = await bot.createChat();
        const first = await chat.send('Go');
        for await (const event of first.events()) {
          if (event.type === 'model_step_started') break;
        }
        const steered = await chat.steer('Also this');
        assert.equal(steered.receipt?.disposition, 'steered');
        assert.equal(steered.id, first.id);
        const events = await collect(first.events());
        const input = events.find((e) => e.type === 'input_steered');
        assert.equal(textOf(input.input), 'Also this');
      }));

    test('a Bot with no Chats can be deleted and is then not found', () =>
      withClient({}, async (client) => {
        const bot = await client.createBot({ name: 'Gone', model: scriptedModel({ steps: [] }) });
        await bot.delete();
        await assert.rejects(client.getBot(bot.id), sdk.NotFoundError);
      }));

    test('a client with tools does not keep the process alive', async () => {
      // The child connects the same way this mode does; the remote mode passes the server's URL.
      const probe = await mode.connect({});
      await probe.close();
      const { uri, token } = mode.target();
      const model = scriptedModel(callThenAnswer('add', { a: 1, b: 1 }, 'two'));
      const child = spawn(process.execPath, [fixture('tool-then-exit.mjs'), uri, token ?? '', model], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      let stdout = '';
      child.stdout.on('data', (d) => (stdout += d));
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      const [code, signal] = await once(child, 'exit');
      clearTimeout(timer);
      assert.equal(signal, null, 'the process did not exit by itself within 20 s');
      assert.equal(code, 0);
      assert.equal(stdout.trim(), 'completed');
    });

    test('wrong argument types throw TypeError before anything is sent', () =>
      withClient({}, async (client) => {
        await assert.rejects(client.createBot('Greeter'), { name: 'TypeError', message: /createBot: `spec` must be an object, not string Greeter/ });
        await assert.rejects(client.getBot(42), { name: 'TypeError', message: /getBot: `id` must be a string, not number 42/ });
        const bot = await client.createBot({ name: 'Typed', model: scriptedModel({ steps: [] }) });
        const chat = await bot.createChat();
        await assert.rejects(chat.send({ text: 'Hi' }), { name: 'TypeError', message: /send: `input` must be a string or an array of content parts/ });
        await assert.rejects(chat.send('Hi', { commandKey: 7 }), { name: 'TypeError', message: /options\.commandKey/ });
        assert.throws(() => client.events(bot.id, -1), { name: 'TypeError', message: /`after` must be a whole number from 0/ });
      }));
  });
}

describe('a server that goes away', () => {
  test('a server killed while events are read ends the iterator with UnavailableError', async () => {
    const server = await startServer();
    const client = await sdk.connect(server.url, { token: server.token });
    try {
      const model = scriptedModel({ steps: [{ deltas: ['a', 'b', 'c'], delay_ms: 1000 }] });
      const bot = await client.createBot({ name: 'Doomed', model });
      const execution = await (await bot.createChat()).send('Go');
      const seen = [];
      await assert.rejects(
        (async () => {
          for await (const event of execution.events()) {
            seen.push(event.type);
            if (event.type === 'model_step_started') server.kill();
          }
        })(),
        (e) => {
          assert.ok(e instanceof sdk.UnavailableError, `not an UnavailableError: ${e}`);
          assert.equal(e.code, 'unavailable');
          return true;
        },
      );
      assert.ok(!seen.includes('turn_ended'));
    } finally {
      await client.close();
      await server.stop();
    }
  });
});

describe('connect', () => {
  test('wrong argument types throw TypeError', async () => {
    await assert.rejects(sdk.connect(42), { name: 'TypeError', message: /connect: `uri` must be a string, not number 42/ });
    await assert.rejects(sdk.connect('memory://', { tools: { add: 'sum' } }), {
      name: 'TypeError',
      message: /`options.tools.add` must be a function, not string sum/,
    });
    await assert.rejects(sdk.connect('memory://', { token: 1 }), { name: 'TypeError', message: /options\.token/ });
  });

  test('an unknown scheme fails with InvalidInputError', async () => {
    await assert.rejects(sdk.connect('ftp://example'), sdk.InvalidInputError);
  });

  test('a server that is down fails with UnavailableError', async () => {
    // A port nothing listens on: bind one, then close it.
    const { createServer } = await import('node:net');
    const port = await new Promise((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const { port } = s.address();
        s.close(() => resolve(port));
      });
    });
    await assert.rejects(
      (async () => {
        const client = await sdk.connect(`http://127.0.0.1:${port}`, { token: 'x' });
        await client.listBots();
      })(),
      (e) => {
        assert.ok(e instanceof sdk.UnavailableError, `not an UnavailableError: ${e}`);
        assert.equal(e.code, 'unavailable');
        return true;
      },
    );
  });

  test('a client of several nodes goes on at the next when one is down', async () => {
    const { createServer } = await import('node:net');
    const port = await new Promise((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const { port } = s.address();
        s.close(() => resolve(port));
      });
    });
    const server = await startServer();
    const client = await sdk.connect(`http://127.0.0.1:${port},${server.url}`, { token: server.token });
    try {
      const model = scriptedModel({ steps: [{ text: 'from the next node' }] });
      const bot = await client.createBot({ name: 'Failover', model });
      const chat = await bot.createChat();
      const execution = await chat.send('Hi', { commandKey: 'several-node' });
      const again = await chat.send('Hi', { commandKey: 'several-node' });
      assert.equal(again.id, execution.id, 'the same command key on the next node is the same Turn');
      assert.equal(replyOf(await collect(execution.events())), 'from the next node');
    } finally {
      await client.close();
      await server.stop();
    }
  });

  test('a server list with an empty entry fails with InvalidInputError', async () => {
    await assert.rejects(sdk.connect('http://127.0.0.1:9,', { token: 'x' }), sdk.InvalidInputError);
  });

  test('the no-op native call returns nothing', () => {
    assert.equal(sdk.noop(), undefined);
  });
});
