// @openbot/sdk: OpenBot for Node.js.
//
// `connect("memory://")` runs Bots, Chats and Turns in this process; `connect("http://host:port",
// { token })` talks to an OpenBot server. Both give the same classes, so code written against one
// runs unchanged against the other. The work is done by the Rust core through the native addon
// (native.d.ts); this layer checks argument types, maps errors to `OpenBotError` subclasses and
// turns event streams into async iterators. Data objects keep the wire format of the schema
// (snake_case fields, as in the HTTP API).

import * as native from '../native';
import type { components } from './schema';
import { CancelledError, RequestFailedError, fromNative } from './errors';

export * from './errors';

type Schemas = components['schemas'];
/** What a Bot is made of, to create one. */
export type BotSpec = Schemas['BotSpec'];
/** A change to a Bot; absent fields stay as they are. */
export type BotUpdate = Schemas['BotUpdate'];
/** A Bot as stored: its ID, spec, revision and creation time. */
export type BotInfo = Schemas['Bot'];
/** A Chat as stored. */
export type ChatInfo = Schemas['Chat'];
/** One entry of a Chat's history. */
export type ChatEntry = Schemas['ChatEntry'];
/** One message of a conversation. */
export type Message = Schemas['Message'];
/** One piece of message content. */
export type ContentPart = Schemas['ContentPart'];
/** Input for a Chat. */
export type SendInput = Schemas['SendInput'];
/** The answer to a sent input. */
export type SendReceipt = Schemas['SendReceipt'];
/** An execution as stored: its state, outcome, usage and last event sequence. */
export type ExecutionInfo = Schemas['Execution'];
/** The state of an execution. */
export type ExecutionState = Schemas['ExecutionState'];
/** Why a Turn ended. */
export type TurnOutcome = Schemas['TurnOutcome'];
/** Limits on one Turn. */
export type Limits = Schemas['Limits'];
/** A tool a model may call. */
export type ToolDefinition = Schemas['ToolDefinition'];
/** One tool call asked for by the model. */
export type ToolCall = Schemas['ToolCall'];
/** The result of one tool call. */
export type ToolResult = Schemas['ToolResult'];
/** Tokens used and what they cost. */
export type Usage = Schemas['Usage'];
/** One event of an execution, tagged by `type`. */
export type Event = Schemas['Event'];
/** An event of one `type`, e.g. `EventOf<'text_delta'>`. */
export type EventOf<T extends Event['type']> = Extract<Event, { type: T }>;
/**
 * A `tool_result` event as `events()` gives it: when a tool of this client threw, `error` is
 * the value it threw, unchanged.
 */
export type ToolResultEvent = EventOf<'tool_result'> & { error?: unknown };
/** An event as `events()` gives it: a `tool_result` carries what your tool threw. */
export type ObservedEvent = Exclude<Event, { type: 'tool_result' }> | ToolResultEvent;
/** What kind of work an execution is: a Turn, or a `tool_job` (one tool call run on its own). */
export type ExecutionKind = Schemas['ExecutionKind'];
/**
 * A `child_started` event: a tool call of this execution started child work (`child_id`, of
 * `kind` `tool_job` or `turn`) with events of its own; its result reaches the Chat as a notice.
 */
export type ChildStartedEvent = EventOf<'child_started'>;
/** An `approval_requested` event: the call waits for the decision on request `request_id`. */
export type ApprovalRequestedEvent = EventOf<'approval_requested'>;
/** A `job_ended` event: the last event of a tool job, with its end `state`. */
export type JobEndedEvent = EventOf<'job_ended'>;
/** A tool call that waits for (or got) a person's decision. */
export type ApprovalRequest = Schemas['ApprovalRequest'];
/** Where an approval request is: `pending`, `approved`, `denied`, `expired`, `revoked`, `cancelled`. */
export type ApprovalState = Schemas['ApprovalState'];
/** A person's decision: `approve` or `deny`. */
export type Decision = Schemas['Decision'];
/** A decision on a pending request, with an optional reason (for the audit log and the model). */
export type DecideApproval = Schemas['DecideApproval'];

/** A Chat's plan mode: when `enabled`, its Bot may only propose a plan (`propose_plan`). */
export type PlanMode = Schemas['PlanMode'];

/**
 * A call whose outcome is unknown (a write without a safe retry rule lost its answer) and the
 * execution that waits for a decision on it: `call` (its key, e.g. `1/tool:0/1`), `tool_call`
 * (`{ id, name, arguments }`: what was sent), `idempotency_key`, `waiting_since`.
 */
export type UnknownOutcome = Schemas['UnknownOutcome'];
/** A page of unknown outcomes, oldest first; `next_cursor` is absent on the last page. */
export type UnknownOutcomePage = Schemas['UnknownOutcomePage'];
/** What a person found out: `applied`, `not_applied` or `give_up`. */
export type OutcomeDecision = Schemas['OutcomeDecision'];
/** A decision on the call an execution waits for: `{ call, decision, result?, reason? }`. */
export type DecideOutcome = Schemas['DecideOutcome'];
/** A recorded decision, its audit entry: who decided (member, token), what, when. */
export type OutcomeDecisionRecord = Schemas['OutcomeDecisionRecord'];

/** Options of `listUnknownOutcomes`. */
export interface ListUnknownOutcomesOptions {
  /** How many a page holds: 1-200, the server's default 50. */
  limit?: number;
  /** Start after this cursor: the `next_cursor` of the page before. */
  cursor?: string;
}

/** Options of `listApprovals`. */
export interface ListApprovalsOptions {
  /** Only the requests in this state (e.g. `pending`); all when absent. */
  state?: ApprovalState;
}

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

/** Options of `connect`. */
export interface ConnectOptions {
  /** An API token, for a server. */
  token?: string;
  /** Tool functions by name; a Bot's tool of the same name runs it, in both modes. */
  tools?: Record<string, ToolFunction>;
}

/** Input for `send` and `steer`: text, or content parts. */
export type Input = string | ContentPart[];

/** Options of `send` and `steer`. */
export interface SendOptions {
  /** Your name for this request, 1-200 characters: a retry with it gets the same receipt. */
  commandKey?: string;
}

// ---------------------------------------------------------------------------------------------
// Argument checks: wrong types throw TypeError with a clear message before anything is sent.

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return 'an object';
  const shown = String(value);
  return `${typeof value} ${shown.length > 40 ? `${shown.slice(0, 40)}...` : shown}`.trim();
}

function checkString(where: string, name: string, value: unknown): string {
  if (typeof value !== 'string') {
    throw new TypeError(`${where}: \`${name}\` must be a string, not ${describe(value)}`);
  }
  return value;
}

function checkObject(where: string, name: string, value: unknown): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new TypeError(`${where}: \`${name}\` must be an object, not ${describe(value)}`);
  }
  return value as Record<string, unknown>;
}

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

/** A connection to OpenBot: in this process (`memory://`) or to a server (`http://host:port`). */
export class Client {
  /** @internal */
  readonly native: native.NativeClient;
  /** @internal */
  readonly toolErrors: ToolErrors;

  private constructor(nativeClient: native.NativeClient, toolErrors: ToolErrors) {
    this.native = nativeClient;
    this.toolErrors = toolErrors;
  }

  /**
   * Connects. `memory://` runs everything in this process (nothing survives it);
   * `http://host:port` or `https://...` names a server, with `options.token`.
   */
  static async connect(uri: string, options: ConnectOptions = {}): Promise<Client> {
    checkString('connect', 'uri', uri);
    checkObject('connect', 'options', options);
    const token = options.token === undefined ? undefined : checkString('connect', 'options.token', options.token);
    const toolErrors = new ToolErrors();
    const running = new Map<string, RunningCall>();
    const handlers: native.ToolHandler[] = [];
    if (options.tools !== undefined) {
      for (const [name, fn] of Object.entries(checkObject('connect', 'options.tools', options.tools))) {
        if (typeof fn !== 'function') {
          throw new TypeError(`connect: \`options.tools.${name}\` must be a function, not ${describe(fn)}`);
        }
        handlers.push(wrapTool(name, fn as ToolFunction, toolErrors, running));
      }
    }
    const nativeClient = await call(() => native.connect(uri, token, handlers));
    return new Client(nativeClient, toolErrors);
  }

  /** Creates a Bot. */
  async createBot(spec: BotSpec): Promise<Bot> {
    checkObject('createBot', 'spec', spec);
    return new Bot(this, await call(() => this.native.createBot(spec)));
  }

  /** Reads a Bot. */
  async getBot(id: string): Promise<Bot> {
    checkString('getBot', 'id', id);
    return new Bot(this, await call(() => this.native.getBot(id)));
  }

  /** Lists the Bots, oldest first. */
  async listBots(): Promise<Bot[]> {
    const bots: BotInfo[] = await call(() => this.native.listBots());
    return bots.map((info) => new Bot(this, info));
  }

  /** Reads a Chat. */
  async getChat(id: string): Promise<Chat> {
    checkString('getChat', 'id', id);
    return new Chat(this, await call(() => this.native.getChat(id)));
  }

  /** Reads an execution's state, outcome, usage and last event sequence. */
  async getExecution(id: string): Promise<ExecutionInfo> {
    checkString('getExecution', 'id', id);
    return call(() => this.native.getExecution(id));
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

  /** Asks an execution to stop; gives its state (`cancelling`, or an end state). */
  async cancelExecution(id: string): Promise<ExecutionInfo> {
    checkString('cancelExecution', 'id', id);
    return call(() => this.native.cancelExecution(id));
  }

  /**
   * Pauses an execution: it sends nothing new until resumed (its state is `waiting`). Only a
   * server pauses: in memory this fails with `InvalidInputError`.
   */
  async pauseExecution(id: string): Promise<ExecutionInfo> {
    checkString('pauseExecution', 'id', id);
    return call(() => this.native.pauseExecution(id));
  }

  /** Resumes a paused execution; in memory this fails with `InvalidInputError`. */
  async resumeExecution(id: string): Promise<ExecutionInfo> {
    checkString('resumeExecution', 'id', id);
    return call(() => this.native.resumeExecution(id));
  }

  /** A Chat's plan mode (`{ enabled }`); always off in memory. */
  async planMode(chatId: string): Promise<PlanMode> {
    checkString('planMode', 'chatId', chatId);
    return call(() => this.native.planMode(chatId));
  }

  /**
   * Turns a Chat's plan mode on or off and gives the mode now in force. In plan mode the Bot
   * may only call the built-in `propose_plan` tool; approving its plan turns plan mode off.
   * Only a server has plan mode: turning it on in memory fails with `InvalidInputError`.
   */
  async setPlanMode(chatId: string, enabled: boolean): Promise<PlanMode> {
    checkString('setPlanMode', 'chatId', chatId);
    if (typeof enabled !== 'boolean') throw new TypeError(`setPlanMode: \`enabled\` must be a boolean, not ${describe(enabled)}`);
    return call(() => this.native.setPlanMode(chatId, enabled));
  }

  /** Delivers the result of a tool call the execution waits for (a tool no function serves). */
  async deliverToolResult(executionId: string, result: ToolResult): Promise<void> {
    checkString('deliverToolResult', 'executionId', executionId);
    checkObject('deliverToolResult', 'result', result);
    await call(() => this.native.deliverToolResult(executionId, result));
  }

  /**
   * The approval requests you may decide, newest first; with `options.state` only those in that
   * state. Only a server has approval rules: in memory nothing asks, so the list is empty.
   */
  async listApprovals(options: ListApprovalsOptions = {}): Promise<ApprovalRequest[]> {
    const { state } = checkObject('listApprovals', 'options', options);
    const wanted = state === undefined ? undefined : checkString('listApprovals', 'options.state', state);
    return call(() => this.native.listApprovals(wanted));
  }

  /**
   * Decides a pending approval request and gives it as decided. `approve` runs the call once,
   * in a child execution of its own whose result reaches the Chat as a notice; `deny` never
   * runs it, and the model is told (with `reason`). A request that is no longer pending fails
   * with `ConflictError`, an unknown one (always, in memory) with `NotFoundError`.
   */
  async decideApproval(id: string, decision: DecideApproval): Promise<ApprovalRequest> {
    checkString('decideApproval', 'id', id);
    const body = checkObject('decideApproval', 'decision', decision);
    checkString('decideApproval', 'decision.decision', body.decision);
    if (body.reason !== undefined && body.reason !== null) checkString('decideApproval', 'decision.reason', body.reason);
    return call(() => this.native.decideApproval(id, decision));
  }

  /**
   * Your executions that wait in `outcome_unknown` for a decision, oldest first, a page of up to
   * `options.limit` after `options.cursor`; each with its call's key, tool and the arguments it
   * was sent with, to check in the outside system. Only a server loses a call's answer: in
   * memory the page is empty.
   */
  async listUnknownOutcomes(options: ListUnknownOutcomesOptions = {}): Promise<UnknownOutcomePage> {
    const { limit, cursor } = checkObject('listUnknownOutcomes', 'options', options);
    if (limit !== undefined && (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit < 1)) {
      throw new TypeError(`listUnknownOutcomes: \`options.limit\` must be a whole number from 1, not ${describe(limit)}`);
    }
    const after = cursor === undefined ? undefined : checkString('listUnknownOutcomes', 'options.cursor', cursor);
    return call(() => this.native.listUnknownOutcomes(limit as number | undefined, after));
  }

  /**
   * Decides the call execution `executionId` waits for in `outcome_unknown`, naming it
   * (`decision.call`), and gives the decision's audit entry. `applied` (with `result`): the
   * result becomes the call's and the work goes on with it, the call is not sent again;
   * `not_applied`: the call is sent again, as a new attempt; `give_up`: the execution ends
   * `failed`, sending nothing. A decision for another call, or a second one, fails with
   * `ConflictError`; in memory it fails with `InvalidInputError` (only a server has them).
   */
  async decideOutcome(executionId: string, decision: DecideOutcome): Promise<OutcomeDecisionRecord> {
    checkString('decideOutcome', 'executionId', executionId);
    const body = checkObject('decideOutcome', 'decision', decision);
    checkString('decideOutcome', 'decision.call', body.call);
    checkString('decideOutcome', 'decision.decision', body.decision);
    for (const field of ['result', 'reason'] as const) {
      if (body[field] !== undefined && body[field] !== null) checkString('decideOutcome', `decision.${field}`, body[field]);
    }
    return call(() => this.native.decideOutcome(executionId, decision));
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
    return new Chat(this.client, await call(() => this.client.native.createChat(this.id)));
  }

  /** Changes the Bot; gives the Bot as it is now. */
  async update(update: BotUpdate): Promise<Bot> {
    checkObject('update', 'update', update);
    return new Bot(this.client, await call(() => this.client.native.updateBot(this.id, update)));
  }

  /** Deletes the Bot; it must have no Chats left. */
  async delete(): Promise<void> {
    await call(() => this.client.native.deleteBot(this.id));
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
   * Gives the Turn's execution.
   */
  async send(input: Input, options?: SendOptions): Promise<Execution> {
    const sendInput = toSendInput('send', input, options);
    return new Execution(this.client, await call(() => this.client.native.send(this.id, sendInput)));
  }

  /** Sends input that joins the running Turn (the model sees it at its next step). */
  async steer(input: Input, options?: SendOptions): Promise<Execution> {
    const sendInput = toSendInput('steer', input, options);
    return new Execution(this.client, await call(() => this.client.native.steer(this.id, sendInput)));
  }

  /** Stops the running Turn; queued input then runs. */
  async stop(): Promise<void> {
    await call(() => this.client.native.stop(this.id));
  }

  /** Deletes the Chat: closes it to input, cancels its Turns, and returns once they ended. */
  async delete(): Promise<void> {
    await call(() => this.client.native.deleteChat(this.id));
  }

  /** The Chat's messages, oldest first. */
  async history(): Promise<ChatEntry[]> {
    return call(() => this.client.native.history(this.id));
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
   * Waits for its end (`turn_ended`, `job_ended` or `failed`) and gives its final state.
   * Throws `CancelledError` when it was cancelled, and `RequestFailedError` (with `category`
   * and `errorId`) when it failed.
   */
  async wait(): Promise<ExecutionInfo> {
    // The events are read in the native part: none crosses into JavaScript on the way.
    const { execution: info, last_event: last } = (await call(() => this.client.native.waitExecution(this.id))) as {
      execution: ExecutionInfo;
      last_event: Event | null;
    };
    if (last?.type === 'failed' || info.state === 'failed') {
      const failed = last?.type === 'failed' ? last : undefined;
      throw new RequestFailedError('request_failed', 'the execution failed', failed?.category, failed?.error_id);
    }
    if (info.state === 'cancelled' || info.outcome === 'cancelled') {
      throw new CancelledError('cancelled', `execution ${this.id} was cancelled`);
    }
    return info;
  }

  /** Asks it to stop; gives its state (`cancelling`, or an end state). */
  async cancel(): Promise<ExecutionInfo> {
    return this.client.cancelExecution(this.id);
  }

  /** Delivers the result of a tool call it waits for (a tool no function serves). */
  async deliverToolResult(result: ToolResult): Promise<void> {
    return this.client.deliverToolResult(this.id, result);
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

/** Does nothing in the native addon: the cost of one call into it (for benchmarks). */
export function noop(): void {
  native.noop();
}
