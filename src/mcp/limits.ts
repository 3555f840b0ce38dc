/**
 * The MCP gateway's transport limits (docs/mcp.md, "Limits"), in a module that imports nothing:
 * the CLI reads its defaults when it declares its options, without loading the SDK.
 */

/** A session without an open request for this long is closed (ListenOptions.sessionIdleMs). */
export const DEFAULT_SESSION_IDLE_MS = 30 * 60_000;
/** Sessions open at once (ListenOptions.maxSessions). */
export const DEFAULT_MAX_SESSIONS = 256;
/** The largest first request (initialize) the HTTP listener reads; inside a session the SDK keeps the same bound. */
export const MAX_HTTP_BODY_BYTES = 4 * 1024 * 1024;
/** The SDK's own bound for one stdio message (STDIO_DEFAULT_MAX_BUFFER_SIZE). */
export const MAX_STDIO_MESSAGE_BYTES = 10 * 1024 * 1024;
/**
 * The largest message the gateway writes to a stdio upstream: the SDK's read cap (10 MiB, which an
 * SDK server counts over its partial line plus the chunk just read) less 64 KiB, one pipe read.
 * A larger one would make an SDK server close its transport silently and stop reading its stdin.
 */
export const DEFAULT_UPSTREAM_MAX_MESSAGE_BYTES = MAX_STDIO_MESSAGE_BYTES - 64 * 1024;
/** The most bytes waiting to be written to a stdio upstream's stdin; a call past it is refused, not sent (upstreamLimits.maxQueuedBytes). */
export const DEFAULT_UPSTREAM_MAX_QUEUED_BYTES = 16 * 1024 * 1024;
/** A stdio upstream whose stdin took nothing for this long while a write waited is stalled: closed, and started again (upstreamLimits.stallMs). */
export const DEFAULT_UPSTREAM_STALL_MS = 30_000;
