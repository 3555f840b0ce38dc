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
