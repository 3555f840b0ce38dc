/**
 * The MCP listener's sessions, bounded. A host's SDK client closes without a DELETE, so a session
 * is never told it ended: one left without an open request for `idleMs` is closed, and when
 * `max` are open a new one replaces the one idle longest (none idle: the new one is refused).
 * A host's open event stream (its GET) is an open request: a connected host is never idle,
 * however quiet; a host that went away closed its streams with its connection.
 */
import type { ServerResponse } from "node:http";
import type { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";


interface Session {
  readonly transport: StreamableHTTPServerTransport;
  /** Requests of this session still being answered (its event stream included). */
  open: number;
  /** When its last request ended (or it started): the oldest idle is the one evicted first. */
  idleSince: number;
  timer: NodeJS.Timeout | undefined;
}

export interface SessionTable {
  get(id: string): StreamableHTTPServerTransport | undefined;
  /** Room for one more session: true when there is (evicting the one idle longest if it must), false when every session is in use. */
  makeRoom(): Promise<boolean>;
  add(id: string, transport: StreamableHTTPServerTransport): void;
  /** Counts `res` as an open request of session `id` until it closes. */
  track(id: string, res: ServerResponse): void;
  delete(id: string): void;
  readonly size: number;
  /** Each open session and how many of its requests are being answered (0: idle). */
  list(): { readonly id: string; readonly open: number }[];
  closeAll(): Promise<void>;
}

/** The least time between two lines about closed sessions. */
const LOG_EVERY_MS = 60_000;

export function sessionTable(options: { idleMs: number; max: number; log: (line: string) => void }): SessionTable {
  const sessions = new Map<string, Session>();
  // Hosts decide how often sessions end (a flood of initializes evicts one per request): at most a line a minute.
  let quietUntil = 0;
  let unsaid = 0;
  const say = (id: string, why: string) => {
    const now = Date.now();
    if (now < quietUntil) {
      unsaid++;
      return;
    }
    options.log(`effectgate mcp http: session ${id} closed (${why})${unsaid > 0 ? `; ${unsaid} more closed since the last such line` : ""}`);
    unsaid = 0;
    quietUntil = now + LOG_EVERY_MS;
  };

  async function end(id: string, why: string): Promise<void> {
    const session = sessions.get(id);
    if (!session) return;
    sessions.delete(id);
    clearTimeout(session.timer);
    say(id, why);
    await session.transport.close().catch(() => undefined);
  }

  function idle(id: string, session: Session): void {
    session.idleSince = Date.now();
    clearTimeout(session.timer);
    session.timer = setTimeout(() => void end(id, `idle for ${options.idleMs} ms`), options.idleMs);
    session.timer.unref();
  }

  return {
    get: (id) => sessions.get(id)?.transport,
    async makeRoom() {
      if (sessions.size < options.max) return true;
      let oldest: [string, Session] | undefined;
      for (const entry of sessions) if (entry[1].open === 0 && (!oldest || entry[1].idleSince < oldest[1].idleSince)) oldest = entry;
      if (!oldest) return false;
      await end(oldest[0], `the listener's ${options.max} sessions were open and this one was idle longest`);
      return true;
    },
    add(id, transport) {
      const session: Session = { transport, open: 0, idleSince: Date.now(), timer: undefined };
      sessions.set(id, session);
      idle(id, session);
    },
    track(id, res) {
      const session = sessions.get(id);
      if (!session) return;
      session.open++;
      clearTimeout(session.timer);
      res.once("close", () => {
        session.open--;
        if (session.open === 0 && sessions.get(id) === session) idle(id, session);
      });
    },
    delete(id) {
      const session = sessions.get(id);
      if (session) clearTimeout(session.timer);
      sessions.delete(id);
    },
    get size() {
      return sessions.size;
    },
    list: () => [...sessions].map(([id, session]) => ({ id, open: session.open })),
    async closeAll() {
      for (const [id, session] of [...sessions]) {
        clearTimeout(session.timer);
        sessions.delete(id);
        await session.transport.close().catch(() => undefined);
      }
    },
  };
}
