// Errors: every failure of an OpenBot call is an `OpenBotError` subclass with the stable `code`
// of the schema, and for faults the safe `category` and the `errorId` of the sealed record.
// Branch on the class or on `code`, never on the message.

import type { components } from './schema';

/** The stable error codes (schema `ErrorCode`). */
export type ErrorCode = components['schemas']['ErrorCode'];
/** The safe categories of faults (schema `ErrorCategory`). */
export type ErrorCategory = components['schemas']['ErrorCategory'];

/** The public body of an error, as the server and the native addon give it. */
interface ErrorBody {
  code: ErrorCode;
  message: string;
  category?: ErrorCategory | null;
  error_id?: string | null;
}

/** Any failure of an OpenBot call. */
export class OpenBotError extends Error {
  /** The stable code, e.g. `not_found`. */
  readonly code: ErrorCode;
  /** For faults: the safe category. */
  readonly category: ErrorCategory | undefined;
  /** For faults: the ID of the sealed record that holds the full cause. */
  readonly errorId: string | undefined;

  constructor(code: ErrorCode, message: string, category?: ErrorCategory, errorId?: string) {
    super(message);
    this.name = new.target.name;
    this.code = code;
    this.category = category;
    this.errorId = errorId;
  }
}

/** `invalid_input`: the input is malformed or breaks a rule; the message says which. */
export class InvalidInputError extends OpenBotError {}
/** `unauthorized`: no valid credentials. */
export class UnauthorizedError extends OpenBotError {}
/** `forbidden`: valid credentials without the right to do this. */
export class ForbiddenError extends OpenBotError {}
/** `not_found`: the resource does not exist or is not visible to the caller. */
export class NotFoundError extends OpenBotError {}
/** `conflict`: the request conflicts with the current state. */
export class ConflictError extends OpenBotError {}
/** `payload_too_large`: the body is larger than the documented limit. */
export class PayloadTooLargeError extends OpenBotError {}
/** `unsupported_media_type`: the body's content type is not accepted. */
export class UnsupportedMediaTypeError extends OpenBotError {}
/** `rate_limited`: too many requests; try again later. */
export class RateLimitedError extends OpenBotError {}
/** `cancelled`: the work was cancelled. */
export class CancelledError extends OpenBotError {}
/** `closed`: the client was closed. */
export class ClosedError extends OpenBotError {}
/** `unavailable`: the service could not be reached. */
export class UnavailableError extends OpenBotError {}
/** `request_failed`: a fault on the serving side; `category` and `errorId` name it. */
export class RequestFailedError extends OpenBotError {}

const classes: Record<ErrorCode, typeof OpenBotError> = {
  invalid_input: InvalidInputError,
  unauthorized: UnauthorizedError,
  forbidden: ForbiddenError,
  not_found: NotFoundError,
  conflict: ConflictError,
  payload_too_large: PayloadTooLargeError,
  unsupported_media_type: UnsupportedMediaTypeError,
  rate_limited: RateLimitedError,
  cancelled: CancelledError,
  closed: ClosedError,
  unavailable: UnavailableError,
  request_failed: RequestFailedError,
};

/** The error for a public error body. */
export function errorFromBody(body: ErrorBody): OpenBotError {
  const Class = classes[body.code] ?? OpenBotError;
  return new Class(body.code, body.message, body.category ?? undefined, body.error_id ?? undefined);
}

/** The start of the message of every error the native addon throws. */
const MARKER = 'openbot-error:';

/**
 * The error to throw for what the native addon threw: its `OpenBotError`, or the value itself
 * when it is not one of ours (a JavaScript error from a caller's own code).
 */
export function fromNative(thrown: unknown): unknown {
  if (thrown instanceof Error && thrown.message.startsWith(MARKER)) {
    try {
      return errorFromBody(JSON.parse(thrown.message.slice(MARKER.length)) as ErrorBody);
    } catch {
      return new OpenBotError('request_failed', thrown.message.slice(MARKER.length));
    }
  }
  return thrown;
}
