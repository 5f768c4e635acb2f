// @openbot/sdk: OpenBot for Node.js.
//
// `connect("memory://")` runs Bots, Chats and Turns in this process; `connect("http://host:port",
// { token })` talks to an OpenBot server. Both give the same classes, so code written against one
// runs unchanged against the other. The work is done by the Rust core through the native addon
// (native.d.ts). Every operation of the API is a method of `Client`, generated from
// schema/openapi.json into operations.ts (types, argument checks, one generic native `call`);
// this file adds the handles (`Bot`, `Chat`, `Turn`), tools, event streams and the few methods
// that take friendlier input. Data objects keep the wire format of the schema (snake_case
// fields, as in the HTTP API).

import * as native from '../native';
import { InvalidInputError, CancelledError, RequestFailedError, fromNative } from './errors';
import { OPERATIONS, Operations, type OperationId, type OperationInfo, type OperationTypes } from './operations';
import type {
  BotInfo,
  BotSpec,
  ChatInfo,
  ContentPart,
  Event,
  ExecutionInfo,
  PlanMode,
  SendInput,
  SendReceipt,
  ToolDefinition,
  ToolResult,
} from './operations';
import { type Bytes, type BytesInput, type Page, Paged, type Params, checkObject, checkString, describe } from './runtime';

export * from './errors';
export * from './operations';
export { Paged };
export type { Bytes, BytesInput, Page };

/** An event of one `type`, e.g. `EventOf<'text_delta'>`. */
export type EventOf<T extends Event['type']> = Extract<Event, { type: T }>;
/**
 * A `tool_result` event as `events()` gives it: when a tool of this client threw, `error` is
 * the value it threw, unchanged.
 */
export type ToolResultEvent = EventOf<'tool_result'> & { error?: unknown };
/** An event as `events()` gives it: a `tool_result` carries what your tool threw. */
export type ObservedEvent = Exclude<Event, { type: 'tool_result' }> | ToolResultEvent;
/**
 * A `child_started` event: a tool call of this execution started child work (`child_id`, of
 * `kind` `tool_job` or `turn`) with events of its own; its result reaches the Chat as a notice.
 */
export type ChildStartedEvent = EventOf<'child_started'>;
/** An `approval_requested` event: the call waits for the decision on request `request_id`. */
export type ApprovalRequestedEvent = EventOf<'approval_requested'>;
/** A `job_ended` event: the last event of a tool job, with its end `state`. */
export type JobEndedEvent = EventOf<'job_ended'>;

/**
 * How an execution ended, as `wait()` gives it: its final state (`state`, `outcome`, `usage`,
 * `last_sequence`, ...) and `text`, the answer of its last model step (empty for work without
 * a model, such as a tool job).
 */
export type ExecutionEnd = ExecutionInfo & { text: string };

/** What a tool function knows about the call it serves. */
export interface ToolContext {
  /** The execution the call belongs to. */
  executionId: string;
  /** The model step that asked for the call. */
  step: number;
  /** The model's ID of the call. */
  callId: string;
  /** Stays the same if this exact call is retried; pass it to services that deduplicate writes. */
  idempotencyKey: string;
  /** Aborted (with a `CancelledError`) when the Turn is cancelled; long tools should stop then. */
  signal: AbortSignal;
}

/**
 * A tool in your code: called with the arguments the model gave (already checked against the
 * Bot's schema for the tool). A string is given to the model as is; any other value as JSON.
 * What it throws becomes an error result for the model (with the error's message), and the
 * thrown value itself is the `error` of the `tool_result` event.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type ToolFunction = (args: any, context: ToolContext) => unknown;

/**
 * A tool given once, at `connect`: what the model reads (`description`, `input_schema`, as in
 * a `ToolDefinition`) and the function that runs it. A Bot then names it: `tools: ['add']`.
 */
export interface Tool {
  /** What the tool does, for the model. */
  description?: string;
  /** The JSON Schema its arguments must match. */
  input_schema: Record<string, unknown>;
  /** The function that serves its calls. */
  run: ToolFunction;
}

/** Options of `connect`. */
export interface ConnectOptions {
  /** An API token, for a server. */
  token?: string;
  /**
   * Your tools by name, given once: a `Tool` (its definition and function; a Bot names it in
   * `createBot`), or a bare function for a Bot tool defined in full elsewhere. Used in both modes.
   */
  tools?: Record<string, Tool | ToolFunction>;
  /**
   * Which internal addresses the Bots' HTTP tools may reach in memory mode, written as
   * `OPENBOT_OUTBOUND_ALLOW` is (`'loopback, 10.1.0.0/16'`; `'none'` allows nothing internal).
   * Unset: `OPENBOT_OUTBOUND_ALLOW`, else internal addresses are refused. A server keeps its
   * own policy.
   */
  outbound?: string;
  /**
   * Attaches this machine as a Computer in memory mode (docs/computers.md): a Bot that names
   * the Computer tools (`COMPUTER_TOOLS`, by name in `createBot`) works in terminal sessions
   * here and reads and writes text files inside `folders`. `terminal: false` offers the file
   * tools only. A server's Computers are paired machines: with a server this is an error.
   */
  computer?: { folders: string[]; terminal?: boolean };
}

/**
 * The tools a Bot gets on a Computer: the four terminal tools, then the two file tools, as the
 * core declares them. Name them in `createBot`; their definitions come from the Computer.
 */
export const COMPUTER_TOOLS: readonly string[] = Object.freeze(native.computerTools());

/** What `createBot` takes: a `BotSpec` whose tools may be names of tools given to `connect`. */
export type NewBot = Omit<BotSpec, 'tools'> & { tools?: (ToolDefinition | string)[] };

/** Input for `send` and `steer`: text, or content parts. */
export type Input = string | ContentPart[];

/** Options of `send` and `steer`. */
export interface SendOptions {
  /** Your name for this request, 1-200 characters: a retry with it gets the same receipt. */
  commandKey?: string;
}

/** A request of the generic `Client.call`: its path and query `params`, and its body. */
export interface CallRequest<K extends OperationId> {
  /** Path and query parameters by name. */
  params?: OperationTypes[K]['params'];
  /** The JSON body, or bytes (`{ data, contentType }`), for an operation that takes one. */
  body?: OperationTypes[K]['body'];
}

// ---------------------------------------------------------------------------------------------
// Argument checks: wrong types throw TypeError with a clear message before anything is sent.

function checkCursor(where: string, value: unknown): number {
  if (value === undefined) return 0;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new TypeError(`${where}: \`after\` must be a whole number from 0, not ${describe(value)}`);
  }
  return value;
}

function toSendInput(where: string, input: unknown, options: unknown): SendInput {
  let content: ContentPart[];
  if (typeof input === 'string') {
    content = [{ type: 'text', text: input }];
  } else if (Array.isArray(input)) {
    content = input as ContentPart[];
  } else {
    throw new TypeError(`${where}: \`input\` must be a string or an array of content parts, not ${describe(input)}`);
  }
  const sendInput: SendInput = { content };
  if (options !== undefined) {
    const { commandKey } = checkObject(where, 'options', options);
    if (commandKey !== undefined) sendInput.command_key = checkString(where, 'options.commandKey', commandKey);
  }
  return sendInput;
}

/**
 * Runs a native call; its errors become `OpenBotError`s. A native call answers at once when its
 * work is already done (most in-memory calls), else with a Promise.
 */
async function call<T>(native: () => T | Promise<T>): Promise<T> {
  try {
    return await native();
  } catch (e) {
    throw fromNative(e);
  }
}

/** Path and query parameters for the native call: left-out ones (undefined, null) are not sent. */
function present(params: Params): Params {
  const out: Params = {};
  for (const [name, value] of Object.entries(params)) {
    if (value !== undefined && value !== null) out[name] = value;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Tools: what a tool threw, kept for the `tool_result` event of its call; the abort controller of
// each running call.

/** How many thrown values a client keeps for events not yet read. */
const KEPT_TOOL_ERRORS = 1000;

class ToolErrors {
  private readonly errors = new Map<string, unknown>();

  set(executionId: string, callId: string, error: unknown): void {
    this.errors.set(`${executionId}/${callId}`, error);
    if (this.errors.size > KEPT_TOOL_ERRORS) {
      const oldest = this.errors.keys().next();
      if (!oldest.done) this.errors.delete(oldest.value);
    }
  }

  attach(event: Event): ObservedEvent {
    if (event.type === 'tool_result' && event.result.is_error) {
      const key = `${event.execution_id}/${event.result.call_id}`;
      if (this.errors.has(key)) (event as ToolResultEvent).error = this.errors.get(key);
    }
    return event as ObservedEvent;
  }
}

function messageOf(thrown: unknown): string {
  if (thrown instanceof Error) return thrown.message || thrown.name;
  return typeof thrown === 'string' ? thrown : `the tool threw ${describe(thrown)}`;
}

/** A running tool call: its abort controller, made when its signal is first read. */
interface RunningCall {
  controller?: AbortController;
  /** Set when the Turn was cancelled before the signal was read. */
  reason?: unknown;
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    (typeof value === 'object' || typeof value === 'function') &&
    value !== null &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

function wrapTool(name: string, fn: ToolFunction, errors: ToolErrors, running: Map<string, RunningCall>): native.ToolHandler {
  return {
    name,
    // Never throws nor rejects. A synchronous function's answer goes back at once, with no
    // Promise in between; an async one's through its Promise.
    call: (invocation: native.ToolInvocation): native.ToolReply | Promise<native.ToolReply> => {
      const key = `${invocation.executionId}/${invocation.callId}`;
      const call: RunningCall = {};
      running.set(key, call);
      const context: ToolContext = {
        executionId: invocation.executionId,
        step: invocation.step,
        callId: invocation.callId,
        idempotencyKey: invocation.idempotencyKey,
        // Most tools never read it: the controller is made on first use.
        get signal(): AbortSignal {
          if (!call.controller) {
            call.controller = new AbortController();
            if ('reason' in call) call.controller.abort(call.reason);
          }
          return call.controller.signal;
        },
      };
      const failed = (thrown: unknown): native.ToolReply => {
        running.delete(key);
        errors.set(invocation.executionId, invocation.callId, thrown);
        return { text: messageOf(thrown), isError: true };
      };
      const succeeded = (value: unknown): native.ToolReply => {
        running.delete(key);
        try {
          const text = typeof value === 'string' ? value : value === undefined ? '' : JSON.stringify(value);
          return { text: text ?? '', isError: false };
        } catch (thrown) {
          return failed(thrown);
        }
      };
      let value: unknown;
      try {
        value = fn(invocation.arguments, context);
      } catch (thrown) {
        return failed(thrown);
      }
      if (isThenable(value)) return Promise.resolve(value).then(succeeded, failed);
      return succeeded(value);
    },
    abort: (target: native.ToolAbort): void => {
      const call = running.get(`${target.executionId}/${target.callId}`);
      if (!call) return;
      const reason = new CancelledError('cancelled', `execution ${target.executionId} was cancelled`);
      if (call.controller) call.controller.abort(reason);
      else call.reason = reason;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// The classes.

/**
 * A connection to OpenBot: in this process (`memory://`) or to a server (`http://host:port`).
 * Every operation of the API is one of its methods (see `OPERATIONS`), with the schema's types;
 * in memory an operation only a server has fails with `InvalidInputError` that says so.
 */
export class Client extends Operations {
  /** @internal */
  readonly native: native.NativeClient;
  /** @internal */
  readonly toolErrors: ToolErrors;
  /** @internal The definitions of the tools given to `connect`, for `createBot` by name. */
  readonly toolDefinitions: ReadonlyMap<string, ToolDefinition>;

  private constructor(nativeClient: native.NativeClient, toolErrors: ToolErrors, definitions: Map<string, ToolDefinition>) {
    super();
    this.native = nativeClient;
    this.toolErrors = toolErrors;
    this.toolDefinitions = definitions;
  }

  /**
   * Connects. `memory://` runs everything in this process (nothing survives it);
   * `http://host:port` or `https://...` names a server, with `options.token`.
   */
  static async connect(uri: string, options: ConnectOptions = {}): Promise<Client> {
    checkString('connect', 'uri', uri);
    checkObject('connect', 'options', options);
    const token = options.token === undefined ? undefined : checkString('connect', 'options.token', options.token);
    const outbound = options.outbound === undefined ? undefined : checkString('connect', 'options.outbound', options.outbound);
    const toolErrors = new ToolErrors();
    const running = new Map<string, RunningCall>();
    const handlers: native.ToolHandler[] = [];
    const definitions = new Map<string, ToolDefinition>();
    if (options.tools !== undefined) {
      for (const [name, tool] of Object.entries(checkObject('connect', 'options.tools', options.tools))) {
        let fn = tool;
        if (typeof tool === 'object' && tool !== null && !Array.isArray(tool)) {
          const { description, input_schema: schema, run } = tool as Record<string, unknown>;
          if (description !== undefined) checkString('connect', `options.tools.${name}.description`, description);
          checkObject('connect', `options.tools.${name}.input_schema`, schema);
          definitions.set(name, {
            name,
            ...(description === undefined ? {} : { description: description as string }),
            input_schema: schema as ToolDefinition['input_schema'],
          });
          fn = run;
        }
        if (typeof fn !== 'function') {
          const what = fn === tool ? `options.tools.${name}` : `options.tools.${name}.run`;
          throw new TypeError(`connect: \`${what}\` must be a function, not ${describe(fn)}`);
        }
        handlers.push(wrapTool(name, fn as ToolFunction, toolErrors, running));
      }
    }
    let computerFolders: string[] | undefined;
    let computerTerminal: boolean | undefined;
    if (options.computer !== undefined) {
      const computer = checkObject('connect', 'options.computer', options.computer);
      const folders = computer.folders;
      if (!Array.isArray(folders)) {
        throw new TypeError(`connect: \`options.computer.folders\` must be an array, not ${describe(folders)}`);
      }
      computerFolders = folders.map((f: unknown, i: number) => checkString('connect', `options.computer.folders[${i}]`, f));
      if (computer.terminal !== undefined && typeof computer.terminal !== 'boolean') {
        throw new TypeError(`connect: \`options.computer.terminal\` must be a boolean, not ${describe(computer.terminal)}`);
      }
      computerTerminal = computer.terminal as boolean | undefined;
      // The Computer gives the definitions; a Bot names its tools.
      for (const name of COMPUTER_TOOLS) {
        if (!definitions.has(name)) {
          definitions.set(name, { name, input_schema: { type: 'object' } as unknown as ToolDefinition['input_schema'] });
        }
      }
    }
    const nativeClient = await call(() =>
      native.connect(uri, token, handlers, outbound, computerFolders, computerTerminal),
    );
    return new Client(nativeClient, toolErrors, definitions);
  }

  /**
   * Runs any operation of the API by its `operationId` (see `OPERATIONS`), with its path and
   * query `params` and its `body`, in the wire format; gives its answer (`undefined` for none,
   * `{ data, contentType }` for bytes). The typed methods are built on this one call. An unknown
   * operation fails with `InvalidInputError`, as does, in memory, one that only a server has.
   */
  async call<K extends OperationId>(operationId: K, request: CallRequest<K> = {}): Promise<OperationTypes[K]['answer']> {
    checkString('call', 'operationId', operationId);
    const { params = {}, body } = checkObject('call', 'request', request);
    checkObject('call', 'request.params', params);
    // In both modes a parameter the operation lacks is refused before anything is sent.
    const op: OperationInfo | undefined = Object.hasOwn(OPERATIONS, operationId) ? OPERATIONS[operationId] : undefined;
    for (const name of Object.keys(params as Params)) {
      if (op && !op.pathParams.includes(name) && !op.queryParams.includes(name)) {
        throw new InvalidInputError('invalid_input', `${operationId} has no parameter \`${name.slice(0, 64)}\``);
      }
    }
    return (await this.invoke(operationId, params as Params, body)) as OperationTypes[K]['answer'];
  }

  /** @internal */
  protected async invoke(id: OperationId, params: Params, body: unknown): Promise<unknown> {
    const bytes = Object.hasOwn(OPERATIONS, id) && OPERATIONS[id].body === 'bytes' && body !== undefined;
    let answer: native.NativeAnswer;
    if (bytes) {
      const { data, contentType } = checkObject(id, 'body', body);
      checkString(id, 'body.contentType', contentType);
      if (typeof data !== 'string' && !(data instanceof Uint8Array)) {
        throw new TypeError(`${id}: \`body.data\` must be a Uint8Array or a string, not ${describe(data)}`);
      }
      const buffer = typeof data === 'string' ? Buffer.from(data, 'utf8') : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
      answer = await call(() => this.native.call(id, present(params), undefined, buffer, contentType as string));
    } else {
      answer = await call(() => this.native.call(id, present(params), body));
    }
    if (answer.data !== undefined && answer.data !== null) {
      return { data: answer.data, contentType: answer.contentType ?? 'application/octet-stream' } satisfies Bytes;
    }
    return answer.json ?? undefined;
  }

  /** @internal */
  protected paged<T>(id: OperationId, params: Params, field: string, each: (info: unknown) => T): Paged<T> {
    const { cursor, ...filters } = params;
    return new Paged(async (at) => {
      const page = (await this.invoke(id, { ...filters, cursor: at }, undefined)) as Record<string, unknown>;
      const items = Array.isArray(page[field]) ? (page[field] as unknown[]) : [];
      const next = page.next_cursor;
      return { items: items.map(each), ...(typeof next === 'string' ? { nextCursor: next } : {}) };
    }, typeof cursor === 'string' ? cursor : undefined);
  }

  /** @internal */
  protected toBot(info: BotInfo): Bot {
    return new Bot(this, info);
  }

  /** @internal */
  protected toChat(info: ChatInfo): Chat {
    return new Chat(this, info);
  }

  /**
   * Creates a Bot. Its `tools` may name tools given to `connect` with their definitions
   * (`tools: ['add']`), beside full `ToolDefinition`s; a name `connect` had no definition for
   * fails with `InvalidInputError` and nothing is sent.
   */
  async createBot(spec: NewBot): Promise<Bot> {
    checkObject('createBot', 'spec', spec);
    const { tools, ...rest } = spec;
    const body: BotSpec = tools === undefined ? rest : { ...rest, tools: this.resolveTools(tools) };
    return this.toBot((await this.invoke('create_bot', {}, body)) as BotInfo);
  }

  private resolveTools(tools: unknown): ToolDefinition[] {
    if (!Array.isArray(tools)) throw new TypeError(`createBot: \`spec.tools\` must be an array, not ${describe(tools)}`);
    return tools.map((tool: unknown) => {
      if (typeof tool !== 'string') return tool as ToolDefinition;
      const definition = this.toolDefinitions.get(tool);
      if (!definition) {
        throw new InvalidInputError(
          'invalid_input',
          `createBot: no tool \`${tool.slice(0, 64)}\` was given to connect with its definition (give it as { description, input_schema, run })`,
        );
      }
      return definition;
    });
  }

  /**
   * Sends input to a Chat: starts a Turn, or waits in order for a Turn of its own while one
   * runs. Gives the Turn.
   */
  async send(chatId: string, input: Input, options?: SendOptions): Promise<Turn> {
    checkString('send', 'chatId', chatId);
    const sendInput = toSendInput('send', input, options);
    return new Turn(this, (await this.invoke('send', { id: chatId }, sendInput)) as SendReceipt);
  }

  /** Sends input that joins the Chat's running Turn (the model sees it at its next step). */
  async steer(chatId: string, input: Input, options?: SendOptions): Promise<Turn> {
    checkString('steer', 'chatId', chatId);
    const sendInput = toSendInput('steer', input, options);
    return new Turn(this, (await this.invoke('steer', { id: chatId }, sendInput)) as SendReceipt);
  }

  /** An execution by ID, to observe, wait for or cancel (reads nothing yet). */
  execution(id: string): Execution {
    checkString('execution', 'id', id);
    return new Execution(this, { execution_id: id });
  }

  /**
   * The execution's events after sequence `after` (0: from the start), ending after its last
   * event. Leaving the loop early stops observing; it cancels nothing.
   */
  events(executionId: string, after?: number): AsyncIterableIterator<ObservedEvent> {
    checkString('events', 'executionId', executionId);
    return observe(this, executionId, checkCursor('events', after));
  }

  /** A Chat's plan mode (`{ enabled }`); always off in memory. */
  async planMode(chatId: string): Promise<PlanMode> {
    checkString('planMode', 'chatId', chatId);
    return (await this.invoke('get_plan_mode', { id: chatId }, undefined)) as PlanMode;
  }

  /**
   * Turns a Chat's plan mode on or off and gives the mode now in force. In plan mode the Bot
   * may only call the built-in `propose_plan` tool; approving its plan turns plan mode off.
   * Only a server has plan mode: turning it on in memory fails with `InvalidInputError`.
   */
  async setPlanMode(chatId: string, enabled: boolean): Promise<PlanMode> {
    checkString('setPlanMode', 'chatId', chatId);
    if (typeof enabled !== 'boolean') throw new TypeError(`setPlanMode: \`enabled\` must be a boolean, not ${describe(enabled)}`);
    return (await this.invoke('put_plan_mode', { id: chatId }, { enabled })) as PlanMode;
  }

  /** Closes the client: later calls fail with `ClosedError`; in memory, running Turns are cancelled. */
  async close(): Promise<void> {
    await this.native.close();
  }
}

/** Connects to OpenBot; the same as `Client.connect`. */
export function connect(uri: string, options?: ConnectOptions): Promise<Client> {
  return Client.connect(uri, options);
}

/** A Bot: instructions, a model, tools and limits. */
export class Bot {
  /** The client it was read with. */
  readonly client: Client;
  /** Its data as stored. */
  readonly info: BotInfo;

  /** @internal */
  constructor(client: Client, info: BotInfo) {
    this.client = client;
    this.info = info;
  }

  /** Its ID. */
  get id(): string {
    return this.info.id;
  }

  /** Its definition. */
  get spec(): BotSpec {
    return this.info.spec;
  }

  /** Grows by one with each update. */
  get revision(): number {
    return this.info.revision;
  }

  /** Starts a Chat with this Bot. */
  async createChat(): Promise<Chat> {
    return this.client.createChat({ bot_id: this.id });
  }

  /** Changes the Bot; gives the Bot as it is now. */
  async update(update: Parameters<Client['updateBot']>[1]): Promise<Bot> {
    return this.client.updateBot(this.id, update);
  }

  /** Deletes the Bot; it must have no Chats left. */
  async delete(): Promise<void> {
    await this.client.deleteBot(this.id);
  }
}

/** A conversation with a Bot. It runs one Turn at a time and keeps its input in order. */
export class Chat {
  /** The client it was read with. */
  readonly client: Client;
  /** Its data as stored. */
  readonly info: ChatInfo;

  /** @internal */
  constructor(client: Client, info: ChatInfo) {
    this.client = client;
    this.info = info;
  }

  /** Its ID. */
  get id(): string {
    return this.info.id;
  }

  /** The ID of the Bot that answers in it. */
  get botId(): string {
    return this.info.bot_id;
  }

  /**
   * Sends input: starts a Turn, or waits in order for a Turn of its own while one runs.
   * Gives the Turn.
   */
  async send(input: Input, options?: SendOptions): Promise<Turn> {
    return this.client.send(this.id, input, options);
  }

  /** Sends input that joins the running Turn (the model sees it at its next step). */
  async steer(input: Input, options?: SendOptions): Promise<Turn> {
    return this.client.steer(this.id, input, options);
  }

  /** Stops the running Turn; queued input then runs. */
  async stop(): Promise<void> {
    await this.client.stop(this.id);
  }

  /** Deletes the Chat: closes it to input, cancels its Turns, and returns once they ended. */
  async delete(): Promise<void> {
    await this.client.deleteChat(this.id);
  }

  /** The Chat's messages, oldest first. */
  history(): ReturnType<Client['history']> {
    return this.client.history(this.id);
  }

  /** Its plan mode (`{ enabled }`). */
  async planMode(): Promise<PlanMode> {
    return this.client.planMode(this.id);
  }

  /** Turns its plan mode on or off (a server feature). */
  async setPlanMode(enabled: boolean): Promise<PlanMode> {
    return this.client.setPlanMode(this.id, enabled);
  }
}

/**
 * Stored work with a stable ID and an ordered event log: one Turn of a Chat, or child work a
 * Turn started (a `tool_job`, a delegated Turn; see `child_started` events).
 */
export class Execution {
  /** The client it belongs to. */
  readonly client: Client;
  /** Its ID. */
  readonly id: string;
  /** The receipt of the input that made it, when it came from `send` or `steer`. */
  readonly receipt: SendReceipt | undefined;

  /** @internal */
  constructor(client: Client, receipt: SendReceipt | { execution_id: string }) {
    this.client = client;
    this.id = receipt.execution_id;
    this.receipt = 'disposition' in receipt ? receipt : undefined;
  }

  /** Its events after sequence `after` (0: from the start), ending after the last one. */
  events(after?: number): AsyncIterableIterator<ObservedEvent> {
    return observe(this.client, this.id, checkCursor('events', after));
  }

  /** Reads its state, outcome, usage and last event sequence. */
  async info(): Promise<ExecutionInfo> {
    return this.client.getExecution(this.id);
  }

  /**
   * Waits for its end (`turn_ended`, `job_ended` or `failed`) and gives its final state with
   * `text`, the answer of its last model step. Throws `CancelledError` when it was cancelled,
   * and `RequestFailedError` (with `category` and `errorId`) when it failed.
   */
  async wait(): Promise<ExecutionEnd> {
    // The events are read in the native part: none crosses into JavaScript on the way.
    const { execution: info, last_event: last, text } = (await call(() => this.client.native.waitExecution(this.id))) as {
      execution: ExecutionInfo;
      last_event: Event | null;
      text: string;
    };
    if (last?.type === 'failed' || info.state === 'failed') {
      const failed = last?.type === 'failed' ? last : undefined;
      throw new RequestFailedError('request_failed', 'the execution failed', failed?.category, failed?.error_id);
    }
    if (info.state === 'cancelled' || info.outcome === 'cancelled') {
      throw new CancelledError('cancelled', `execution ${this.id} was cancelled`);
    }
    return { ...info, text };
  }

  /** Asks it to stop; gives its state (`cancelling`, or an end state). */
  async cancel(): Promise<ExecutionInfo> {
    return this.client.cancelExecution(this.id);
  }

  /** Pauses it (a server feature): it sends nothing new until resumed. */
  async pause(): Promise<ExecutionInfo> {
    return this.client.pauseExecution(this.id);
  }

  /** Resumes it after a pause. */
  async resume(): Promise<ExecutionInfo> {
    return this.client.resumeExecution(this.id);
  }

  /** Delivers the result of a tool call it waits for (a tool no function serves). */
  async deliverToolResult(result: ToolResult): Promise<void> {
    return this.client.deliverToolResult(this.id, result);
  }
}

/** The Turn that input sent to a Chat runs in (`chat.send`, `chat.steer`): an execution. */
export class Turn extends Execution {
  /** The receipt of the input: `disposition` is `started`, `queued` or `steered`. */
  declare readonly receipt: SendReceipt;

  /** @internal */
  constructor(client: Client, receipt: SendReceipt) {
    super(client, receipt);
  }

  /** The Chat it belongs to. */
  get chatId(): string {
    return this.receipt.chat_id;
  }
}

async function* observe(client: Client, executionId: string, after: number): AsyncGenerator<ObservedEvent> {
  const stream = await call(() => client.native.observe(executionId, after));
  try {
    for (;;) {
      const batch: Event[] = await call(() => stream.nextBatch());
      if (batch.length === 0) return;
      for (const event of batch) yield client.toolErrors.attach(event);
    }
  } finally {
    stream.close();
  }
}

/** Where `enableTracing` sends spans; unset fields fall back to the standard `OTEL_*` variables. */
export interface TracingOptions {
  /** The OTLP/HTTP base URL (`/v1/traces` is added), as `OTEL_EXPORTER_OTLP_ENDPOINT`. */
  endpoint?: string;
  /** The `service.name` of the exported spans (`OTEL_SERVICE_NAME`, else `openbot`). */
  serviceName?: string;
}

/**
 * Turns on the export of this process's agent spans (`invoke_agent`, `chat`, `execute_tool`,
 * with the GenAI conventions' attributes) over OTLP/HTTP, once per process. With no endpoint
 * given, the standard `OTEL_EXPORTER_OTLP_ENDPOINT` decides. Returns whether export is on.
 * Message text is never exported unless `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`.
 */
export function enableTracing(options: TracingOptions = {}): boolean {
  return native.enableTracing(options.endpoint, options.serviceName);
}

/** Exports the spans queued so far, now: call it before a short-lived process exits. */
export function flushTracing(): void {
  native.flushTracing();
}

/** Does nothing in the native addon: the cost of one call into it (for benchmarks). */
export function noop(): void {
  native.noop();
}
