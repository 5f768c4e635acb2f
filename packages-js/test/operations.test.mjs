// Every operation of the API is a typed Client method over one generic call path; paged lists
// are async iterators; the handles read well. In both modes where both have the behaviour.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, describe, test } from 'node:test';

import { modes, scriptedModel, sdk, stopServer } from './helpers.mjs';

after(stopServer);

const [memory, remote] = modes;
const someId = '019ad1c8-0000-7000-8000-000000000000';

/** The operations of schema/openapi.json, read now: the check never trusts the generated file. */
function schemaOperations() {
  const doc = JSON.parse(readFileSync(new URL('../../schema/openapi.json', import.meta.url), 'utf8'));
  const found = [];
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) found.push({ id: op.operationId, method: method.toUpperCase(), path });
  }
  return found;
}

const camel = (id) => id.replace(/_([a-z0-9])/g, (_, c) => c.toUpperCase());

/** Runs `body` with a fresh client of `mode`, closed afterwards. */
async function withClient(mode, body, options) {
  const client = await mode.connect(options);
  try {
    return await body(client);
  } finally {
    await client.close();
  }
}

describe('every operation has a method', () => {
  test('every operation of schema/openapi.json has a Client method of its name', () => {
    const missing = [];
    for (const op of schemaOperations()) {
      const entry = sdk.OPERATIONS[op.id];
      if (!entry) {
        missing.push(`${op.id}: not in OPERATIONS (run scripts/generate-sdk)`);
        continue;
      }
      assert.equal(entry.method, op.method, op.id);
      assert.equal(entry.path, op.path, op.id);
      if (typeof sdk.Client.prototype[entry.sdkMethod] !== 'function') missing.push(`${op.id}: no Client.${entry.sdkMethod}`);
      if (!entry.handwritten) assert.equal(entry.sdkMethod, camel(op.id), `${op.id} is named in camelCase`);
    }
    assert.deepEqual(missing, []);
  });

  test('every operation of OPERATIONS and every generated method is one of schema/openapi.json', () => {
    const ids = new Set(schemaOperations().map((op) => op.id));
    assert.deepEqual(Object.keys(sdk.OPERATIONS).filter((id) => !ids.has(id)), []);
    const methods = new Set(Object.values(sdk.OPERATIONS).map((op) => op.sdkMethod));
    const generated = Object.getOwnPropertyNames(sdk.Operations.prototype).filter(
      (name) => name !== 'constructor' && typeof sdk.Operations.prototype[name] === 'function',
    );
    assert.deepEqual(generated.filter((name) => !methods.has(name)), []);
    assert.equal(generated.length + Object.values(sdk.OPERATIONS).filter((op) => op.handwritten).length, ids.size);
  });
});

describe('the SDK page', () => {
  test('docs/sdk-node.md names every operation\'s method', () => {
    const page = readFileSync(new URL('../../docs/sdk-node.md', import.meta.url), 'utf8');
    const unnamed = Object.values(sdk.OPERATIONS)
      .map((op) => op.sdkMethod)
      .filter((name) => !page.includes(`\`${name}\``) && !page.includes(`.${name}(`));
    assert.deepEqual(unnamed, []);
  });
});

describe('the generic call path', () => {
  for (const mode of modes) {
    test(`an unknown operation is InvalidInputError with code, category and errorId (${mode.name})`, () =>
      withClient(mode, async (client) => {
        await assert.rejects(client.call('list_everything'), (e) => {
          assert.ok(e instanceof sdk.InvalidInputError, `not an InvalidInputError: ${e}`);
          assert.equal(e.code, 'invalid_input');
          assert.ok('category' in e && 'errorId' in e);
          assert.match(e.message, /not an operation of the API/);
          return true;
        });
      }));

    test(`a parameter the operation does not have is InvalidInputError (${mode.name})`, () =>
      withClient(mode, async (client) => {
        const bot = await client.createBot({ name: 'Params', model: scriptedModel({ steps: [] }) });
        await assert.rejects(client.call('get_bot', { params: { id: bot.id, colour: 'red' } }), sdk.InvalidInputError);
      }));

    test(`a generic call does what the typed method does (${mode.name})`, () =>
      withClient(mode, async (client) => {
        const info = await client.call('create_bot', { body: { name: 'Generic', model: scriptedModel({ steps: [] }) } });
        assert.equal(info.name ?? info.spec.name, 'Generic');
        assert.deepEqual((await client.call('get_bot', { params: { id: info.id } })).id, info.id);
        assert.equal((await client.getBot(info.id)).id, info.id);
        await assert.rejects(client.call('get_chat', { params: { id: someId } }), sdk.NotFoundError);
      }));
  }

  test('in memory every operation only a server has fails with InvalidInputError that says so', () =>
    withClient(memory, async (client) => {
      const serverOnly = Object.values(sdk.OPERATIONS).filter((op) => !op.memory);
      assert.ok(serverOnly.length > 20, `${serverOnly.length} server-only operations`);
      for (const op of serverOnly) {
        const params = Object.fromEntries([...op.pathParams, ...op.queryParams].map((name) => [name, 'x']));
        const body = op.body === 'bytes' ? { data: 'x', contentType: 'text/plain' } : op.body === 'json' ? {} : undefined;
        await assert.rejects(client.call(op.id, { params, body }), (e) => {
          assert.ok(e instanceof sdk.InvalidInputError, `${op.id}: ${e}`);
          assert.match(e.message, /needs an OpenBot server/, op.id);
          return true;
        });
      }
    }));
});

describe('paged lists', () => {
  /** A list of `total` numbers served `size` a page, recording the cursors asked for. */
  function numbers(total, size, start) {
    const asked = [];
    const list = new sdk.Paged(async (cursor) => {
      asked.push(cursor);
      const from = cursor === undefined ? 0 : Number(cursor);
      const items = Array.from({ length: Math.min(size, total - from) }, (_, i) => from + i);
      return from + size < total ? { items, nextCursor: String(from + size) } : { items };
    }, start);
    return { list, asked };
  }

  test('iterating a paged list reads every item, page after page, to the last page', async () => {
    const { list, asked } = numbers(7, 3);
    const seen = [];
    for await (const n of list) seen.push(n);
    assert.deepEqual(seen, [0, 1, 2, 3, 4, 5, 6]);
    assert.deepEqual(asked, [undefined, '3', '6']);
  });

  test('a page is asked for only when the items before it were read', async () => {
    const { list, asked } = numbers(100, 10);
    for await (const n of list) if (n === 4) break;
    assert.deepEqual(asked, [undefined]);
  });

  test('awaiting a paged list gives every item of every page', async () => {
    const { list, asked } = numbers(5, 2);
    assert.deepEqual(await list, [0, 1, 2, 3, 4]);
    assert.deepEqual(asked, [undefined, '2', '4']);
  });

  test('pages() gives each page with the cursor to resume from, starting at the given cursor', async () => {
    const { list } = numbers(5, 2, '2');
    const pages = [];
    for await (const page of list.pages()) pages.push(page);
    assert.deepEqual(pages, [{ items: [2, 3], nextCursor: '4' }, { items: [4] }]);
  });

  for (const mode of modes) {
    test(`a paged operation is an async iterator with its filters (${mode.name})`, () =>
      withClient(mode, async (client) => {
        const list = client.listUnknownOutcomes({ limit: 5 });
        assert.equal(typeof list[Symbol.asyncIterator], 'function');
        assert.deepEqual(await list.toArray(), []);
        assert.throws(() => client.listUnknownOutcomes({ limit: 'five' }), { name: 'TypeError', message: /options\.limit/ });
      }));
  }
});

describe('handles', () => {
  for (const mode of modes) {
    test(`a tool given once at connect is named by createBot, and turn.wait() gives the answer's text (${mode.name})`, () =>
      withClient(
        mode,
        async (client) => {
          const model = scriptedModel({ steps: [{ tool_calls: [{ id: 'c1', name: 'add', arguments: { a: 2, b: 3 } }] }, { text: '2 + 3 = 5' }] });
          const bot = await client.createBot({ name: 'Named tools', model, tools: ['add'] });
          assert.deepEqual(bot.spec.tools.map((t) => t.name), ['add']);
          assert.equal(bot.spec.tools[0].description, 'Adds two integers.');
          const chat = await bot.createChat();
          const turn = await chat.send('What is 2 + 3?');
          assert.ok(turn instanceof sdk.Turn);
          assert.equal(turn.chatId, chat.id);
          const end = await turn.wait();
          assert.equal(end.outcome, 'completed');
          assert.equal(end.text, '2 + 3 = 5');
          const history = await chat.history();
          assert.equal(history.at(-1).message.content[0].text, '2 + 3 = 5');
        },
        {
          tools: {
            add: {
              description: 'Adds two integers.',
              input_schema: { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'integer' } } },
              run: ({ a, b }) => a + b,
            },
          },
        },
      ));

    test(`createBot with a tool name connect has no definition for is InvalidInputError (${mode.name})`, () =>
      withClient(mode, async (client) => {
        await assert.rejects(client.createBot({ name: 'Unknown tool', model: 'scripted:x.json', tools: ['nope'] }), {
          name: 'InvalidInputError',
          message: /no tool `nope` was given to connect/,
        });
      }));

    test(`the flat calls give the same handles as the handles' own (${mode.name})`, () =>
      withClient(mode, async (client) => {
        const bot = await client.createBot({ name: 'Flat', model: scriptedModel({ steps: [{ text: 'hi' }] }) });
        const chat = await client.createChat({ bot_id: bot.id });
        assert.ok(chat instanceof sdk.Chat);
        const turn = await client.send(chat.id, 'Hello');
        assert.equal((await turn.wait()).text, 'hi');
        assert.equal((await client.history(chat.id)).length, 2);
        const bots = await client.listBots();
        assert.ok(bots.every((b) => b instanceof sdk.Bot));
        assert.ok(bots.some((b) => b.id === bot.id));
      }));
  }
});

describe('every group of operations (server)', () => {
  test('tokens: create, list and revoke', () =>
    withClient(remote, async (client) => {
      const created = await client.createToken({ name: 'ci', rights: [{ resource: 'bots', action: 'read' }] });
      assert.ok(created.secret.length > 10);
      assert.ok((await client.listTokens()).some((t) => t.id === created.token.id));
      await client.revokeToken(created.token.id);
      const again = await client.listTokens();
      assert.ok(!again.some((t) => t.id === created.token.id && !t.revoked_at));
    }));

  for (const mode of modes) {
    test(`files: upload bytes, read them back with their media type, delete (${mode.name})`, () =>
      withClient(mode, async (client) => {
        const stored = await client.uploadFile(Buffer.from('hello bytes'), 'text/plain', { name: 'hello.txt' });
        assert.equal(stored.size, 11);
        assert.equal((await client.getFile(stored.id)).name, 'hello.txt');
        const content = await client.fileContent(stored.id);
        assert.ok(Buffer.isBuffer(content.data));
        assert.equal(content.data.toString('utf8'), 'hello bytes');
        assert.match(content.contentType, /^text\/plain/);
        assert.ok((await client.listFiles()).some((f) => f.id === stored.id));
        await client.deleteFile(stored.id);
        await assert.rejects(client.getFile(stored.id), sdk.NotFoundError);
        await assert.rejects(client.uploadFile('x', 'text/plain', { name: 'a/b' }), sdk.InvalidInputError);
      }));

    test(`tools and delegates: register, list, remove, with bad input refused (${mode.name})`, () =>
      withClient(mode, async (client) => {
        const bot = await client.createBot({ name: 'Helper', model: scriptedModel({ steps: [] }) });
        const tool = await client.putTool('lookup', { url: 'https://tools.example.com/lookup', input_schema: { type: 'object' }, retry_safe: true });
        assert.equal(tool.retry_safe, true);
        assert.ok((await client.listTools()).some((t) => t.name === 'lookup'));
        // The outbound policy refuses the cloud metadata address in both modes.
        await assert.rejects(client.putTool('meta', { url: 'http://169.254.169.254/', input_schema: { type: 'object' } }), sdk.InvalidInputError);
        await client.deleteTool('lookup');
        await assert.rejects(client.deleteTool('lookup'), sdk.NotFoundError);
        const delegate = await client.putDelegate('helper', { bot_id: bot.id, description: 'Helps.' });
        assert.equal(delegate.bot_id, bot.id);
        assert.ok((await client.listDelegates()).some((d) => d.name === 'helper'));
        await client.deleteDelegate('helper');
        await bot.delete();
      }));
  }

  test('members, invitations and organizations', () =>
    withClient(remote, async (client) => {
      const members = await client.listMembers();
      assert.ok(members.some((m) => m.role === 'owner'));
      const invited = await client.createInvitation({ email: 'ada@example.com', role: 'member' });
      assert.ok((await client.listInvitations()).some((i) => i.id === invited.invitation.id));
      await client.revokeInvitation(invited.invitation.id);
      await assert.rejects(client.acceptInvitation({ secret: invited.secret }), sdk.OpenBotError);
      const organizations = await client.listOrganizations();
      assert.ok(organizations.length >= 1);
      const made = await client.createOrganization({ name: 'Second' });
      assert.equal(made.organization.name, 'Second');
    }));

  test('models, budgets, tools, delegates and approval rules', () =>
    withClient(remote, async (client) => {
      const provider = await client.putProvider('openai', { api_key: 'sk-test-not-real' });
      assert.equal(provider.has_key, true);
      assert.ok((await client.listProviders()).some((p) => p.kind === 'openai'));
      await client.deleteProvider('openai');

      const bot = await client.createBot({ name: 'Budgeted', model: scriptedModel({ steps: [] }) });
      const budget = await client.putBudget('bot', bot.id, { max_cost_micros: 1000 });
      assert.equal(budget.max_cost_micros, 1000);
      assert.ok((await client.listBudgets()).some((b) => b.target_id === bot.id));
      await client.deleteBudget('bot', bot.id);

      const tool = await client.putTool('lookup', { url: 'http://127.0.0.1:9/lookup', input_schema: { type: 'object' } });
      assert.equal(tool.name, 'lookup');
      assert.ok((await client.listTools()).some((t) => t.name === 'lookup'));
      await client.deleteTool('lookup');
      const delegate = await client.putDelegate('helper', { bot_id: bot.id, description: 'Helps.' });
      assert.equal(delegate.bot_id, bot.id);
      assert.ok((await client.listDelegates()).some((d) => d.name === 'helper'));
      await client.deleteDelegate('helper');

      const rule = await client.createRule({ tool: 'pay', action: 'ask' });
      assert.ok((await client.listRules()).some((r) => r.id === rule.id));
      await client.deleteRule(rule.id);
      await assert.rejects(client.getApproval(someId), sdk.NotFoundError);
    }));

  test('node and sessions: health answers; a session is started, and ending one needs its cookie', () =>
    withClient(remote, async (client) => {
      assert.equal((await client.health()).status, 'ok');
      const session = await client.createSession();
      assert.ok(Date.parse(session.expires_at) > Date.now());
      // The session is the cookie a browser keeps; a client that sends a token has none to end.
      await assert.rejects(client.endSession(), { name: 'UnauthorizedError', message: /no session cookie/ });
    }));

  test('chats: listChats gives Chat handles', () =>
    withClient(remote, async (client) => {
      const bot = await client.createBot({ name: 'Lister', model: scriptedModel({ steps: [] }) });
      const chat = await bot.createChat();
      const chats = await client.listChats();
      assert.ok(chats.every((c) => c instanceof sdk.Chat));
      assert.ok(chats.some((c) => c.id === chat.id));
    }));
});

describe('the outbound option of connect', () => {
  const local = { url: 'http://127.0.0.1:9/lookup', input_schema: { type: 'object' } };

  test('in memory, an HTTP tool on loopback is refused unless the allow list names loopback', async () => {
    const plain = await sdk.connect('memory://');
    await assert.rejects(plain.putTool('local', local), sdk.InvalidInputError);
    await plain.close();
    const allowed = await sdk.connect('memory://', { outbound: 'loopback' });
    assert.equal((await allowed.putTool('local', local)).name, 'local');
    await allowed.close();
  });

  test('an allow list that does not parse is InvalidInputError', async () => {
    await assert.rejects(sdk.connect('memory://', { outbound: '10.0.0.0/99' }), sdk.InvalidInputError);
    await assert.rejects(sdk.connect('memory://', { outbound: 7 }), TypeError);
  });
});
