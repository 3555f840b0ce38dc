/**
 * The hostile-request generator: each request starts as a surface's good request (right method,
 * path, token, key, body) and gets one to three mutations drawn from families — the request line
 * (odd methods, `//[`, `http://[`, encoded and dot-segment paths, very long targets, odd versions),
 * the headers (token missing, wrong, repeated, case variants; the key header twice; Host, Origin,
 * Content-Type, Content-Length and Transfer-Encoding variants; huge or invalid header bytes), the
 * body (not JSON, invalid UTF-8, deeply nested, duplicated keys, oversized) and the framing (a
 * Content-Length that lies, a chunked body cut short). Seeded: the same seed, the same bytes.
 */
import type { Rng } from "./rng.js";

export type Framing = "length" | "chunked" | "none" | "length-short" | "length-long" | "chunked-bad" | "chunked-cut" | "both";

/** A request before it is written: header values are latin1 strings, so any byte can be sent. */
export interface Draft {
  method: string;
  target: string;
  version: string;
  headers: [string, string][];
  body: Buffer;
  framing: Framing;
  /** Line ending of the head (a lone LF is tolerated by nobody in strict mode). */
  eol: string;
  /** Replaces the whole head with raw bytes (a malformed request line); the body is still written after it. */
  rawHead?: Buffer;
}

/** What a surface tells the generator. */
export interface SurfaceShape {
  /** Paths the surface answers (route templates filled in), for path variants. */
  readonly paths: readonly string[];
  /** The bearer token, when the surface has one. */
  readonly token?: string;
  /** The body limit of the surface, for the oversized family. */
  readonly bodyLimit: number;
  /** The idempotency-key header, when the surface reads one. */
  readonly keyHeader?: string;
  /** The surface's own extra header families (the MCP session id, the receipt signature). */
  readonly extraHeaders?: readonly string[];
  /** The Host header a good request carries. */
  readonly host: string;
}

export interface Mutation {
  readonly family: string;
  readonly apply: (d: Draft, rng: Rng, shape: SurfaceShape) => void;
}

const setHeader = (d: Draft, name: string, value: string | undefined) => {
  d.headers = d.headers.filter(([n]) => n.toLowerCase() !== name.toLowerCase());
  if (value !== undefined) d.headers.push([name, value]);
};
const headerOf = (d: Draft, name: string) => d.headers.find(([n]) => n.toLowerCase() === name.toLowerCase())?.[1];
const latin1 = (b: Buffer) => b.toString("latin1");

function deep(depth: number, open: string, close: string, leaf = "1"): string {
  return open.repeat(depth) + leaf + close.repeat(depth);
}

/** Variants of one path: encoded, dot segments, doubled slashes, case, trailing bits. */
function pathVariant(path: string, rng: Rng): string {
  const segs = path.split("/");
  const last = segs[segs.length - 1] ?? "";
  return rng.pick<() => string>([
    () => path.toUpperCase(),
    () => `${path}/`,
    () => `/${path}`,
    () => `//${path.slice(1)}`,
    () => path.replace(/\//g, "//"),
    () => `${path}/.`,
    () => `${path}/..`,
    () => `/./${path.slice(1)}`,
    () => `/x/..${path}`,
    () => `/%2e%2e${path}`,
    () => `/x/%2e%2e${path}`,
    () => `/x/%2E%2E/${path.slice(1)}`,
    () => path.replace(/\//g, "%2F"),
    () => path.replace(/\//g, "%2f").replace(/^%2f/, "/"),
    () => path.replace(/[a-z]/, (c) => `%${c.charCodeAt(0).toString(16)}`),
    () => path.replace(/\//g, "\\"),
    () => `${path}%00`,
    () => `${path}%`,
    () => `${path}?${rng.word()}=%zz`,
    () => `${path}#${rng.word()}`,
    () => `${path};${rng.word()}`,
    () => `${segs.slice(0, -1).join("/")}/${encodeURIComponent(last + "/..")}`,
    () => `http://127.0.0.1${path}`,
    () => `http://evil.example${path}`,
    () => `HTTP://127.0.0.1${path}`,
    () => `https://[::1]${path}`,
    () => `${path}/${"a".repeat(rng.int(100, 5000))}`,
    () => `${path}?${"q=1&".repeat(rng.int(100, 3000))}`,
  ])();
}

const ODD_TARGETS = [
  "//[", "http://[", "http://[::1", "https://[", "//[::1]/x", "*", "//", "///", "/\\", "\\", "?", "#", "%", "/%", "/%zz", "/%00", "/%ff%fe",
  "//evil.example/", "http://", "http:", "mailto:x", "javascript:alert(1)", "/..", "/../../../etc/passwd", "/.%2e/", "/%2e%2e/%2e%2e/",
  "http://127.0.0.1:1/", "http://user:pass@127.0.0.1/", "/\u00fc", "/\u0000", "/\u00ff\u00fe", " /", "/ /", "/a b",
];

const ODD_METHODS = [
  "get", "Post", "GETT", "PRI", "CONNECT", "TRACE", "OPTIONS", "DELETE", "PUT", "PATCH", "HEAD", "GET", "POST", "M-SEARCH", "PROPFIND",
  "MKCOL", "LINK", "PURGE", "QUERY", "SEARCH", "X".repeat(300), "P\u0000ST", "POST\t", "", "1", "POST/", "PO ST", "\u00e9",
];

const VERSIONS = ["HTTP/1.0", "HTTP/2.0", "HTTP/1.1x", "HTTP/0.9", "", "http/1.1", "HTTP/1.2", "HTTP/9.9", "HTTP/1.1 extra", "HTTP/"];

/** Key header values: empty, long, listed, quoted, cut-off quotes, bytes outside ASCII. */
function oddKey(rng: Rng): string {
  return rng.pick<() => string>([
    () => "",
    () => " ",
    () => "a".repeat(255),
    () => "a".repeat(256),
    () => "k".repeat(rng.int(1000, 12000)),
    () => `${rng.word()}, ${rng.word()}`,
    () => `${rng.word()},`,
    () => `,${rng.word()}`,
    () => `"${rng.word()}"`,
    () => `"${rng.word()}, ${rng.word()}"`,
    () => `"${rng.word()}`,
    () => `"${rng.word()}" ${rng.word()}`,
    () => `"a\\"b"`,
    () => `"\\`,
    () => latin1(Buffer.from([0xc3, 0x28, 0xff, 0xfe])),
    () => "k\u0001\u007f",
    () => "\u00e9t\u00e9",
    () => `${rng.word()}\t${rng.word()}`,
  ])();
}

/** Authorization variants: missing, wrong, repeated, case and spacing variants, other schemes. */
function tokenMutation(d: Draft, rng: Rng, shape: SurfaceShape): void {
  const t = shape.token ?? "secret-token-0123456789";
  const wrong = `${t.slice(0, -1)}${t.endsWith("x") ? "y" : "x"}`;
  const set = (v: string | undefined) => setHeader(d, "Authorization", v);
  rng.pick<() => void>([
    () => set(undefined),
    () => set(""),
    () => set("Bearer"),
    () => set("Bearer "),
    () => set(`Bearer ${wrong}`),
    () => set(`Bearer ${t.slice(0, -1)}`),
    () => set(`Bearer ${t}x`),
    () => set(`bearer ${t}`),
    () => set(`BEARER ${t}`),
    () => set(`Bearer  ${t}`),
    () => set(`Bearer ${t} `),
    () => set(`Bearer\t${t}`),
    () => set(`Basic ${Buffer.from(`x:${t}`).toString("base64")}`),
    () => set(t),
    () => set(`Bearer ${t.toUpperCase()}`),
    () => set(`Bearer ${t}\u0000`),
    () => set(`Bearer ${"A".repeat(rng.int(100, 8000))}`),
    () => set(`Bearer ${wrong}, Bearer ${t}`),
    () => {
      set(`Bearer ${wrong}`);
      d.headers.push(["Authorization", `Bearer ${t}`]);
    },
    () => {
      set(`Bearer ${t}`);
      d.headers.push(["Authorization", `Bearer ${wrong}`]);
    },
    () => {
      set(`Bearer ${wrong}`);
      d.headers.push(["authorization", `Bearer ${wrong}`]);
    },
    () => {
      set(undefined);
      d.headers.push(["AUTHORIZATION", `Bearer ${wrong}`]);
    },
    () => {
      set(undefined);
      d.headers.push(["Proxy-Authorization", `Bearer ${t}`]);
    },
    () => {
      set(undefined);
      d.headers.push(["Cookie", `token=${t}`]);
    },
    () => {
      set(undefined);
      d.target += `${d.target.includes("?") ? "&" : "?"}token=${t}`;
    },
  ])();
}

function bodyMutation(d: Draft, rng: Rng, shape: SurfaceShape): void {
  const json = (text: string) => {
    d.body = Buffer.from(text, "utf8");
  };
  rng.weighted<() => void>([
    [3, () => json("")],
    [3, () => json("{")],
    [3, () => json("not json")],
    [2, () => json("{\"a\":1}garbage")],
    [2, () => json("null")],
    [2, () => json("[]")],
    [2, () => json("\"text\"")],
    [2, () => json("12345678901234567890123456789")],
    [2, () => json("1e999")],
    [2, () => json("{\"a\":1,\"a\":2,\"a\":{\"b\":3}}")],
    [2, () => json("{\"__proto__\":{\"polluted\":true},\"constructor\":{\"prototype\":{\"x\":1}}}")],
    [2, () => json("{\"s\":\"\\ud800\\udc00\\ud800\"}")],
    [2, () => json(`\ufeff{"a":1}`)],
    [3, () => {
      d.body = Buffer.concat([Buffer.from("{\"a\":\""), Buffer.from([0xc3, 0x28, 0xa0, 0xa1, 0xe2, 0x28, 0xa1, 0xf0, 0x90, 0x28, 0xbc, 0xff, 0xfe]), Buffer.from("\"}")]);
    }],
    [2, () => {
      d.body = Buffer.concat([Buffer.from("{\"a\":\""), Buffer.from([0xc0, 0xaf, 0xe0, 0x80, 0xaf]), Buffer.from("\"}")]);
    }],
    [2, () => {
      d.body = rng.bytes(rng.int(1, 2000));
    }],
    [1, () => {
      d.body = Buffer.from("{\"a\":\"\u0000\"}\u0000");
    }],
    [4, () => json(deep(rng.pick([999, 1000, 1001, 1500]), "[", "]"))],
    [4, () => json(deep(rng.pick([999, 1000, 1001, 3000]), "{\"a\":", "}"))],
    [3, () => json(deep(rng.int(5000, Math.max(5001, Math.floor(shape.bodyLimit / 2) - 10)), "[", "]"))],
    [2, () => json(`{"completedWith":${deep(rng.int(1000, 20000), "[", "]")},"note":"x","failed":${deep(rng.int(1000, 5000), "{\"a\":", "}")}}`)],
    [2, () => json(`{${Array.from({ length: rng.int(1000, 5000) }, (_, i) => `"k${i % 50}":${i}`).join(",")}}`)],
    [2, () => json(`{"a":"${"x".repeat(rng.int(1000, Math.max(1001, shape.bodyLimit - 100)))}"}`)],
    // Over the limit: occasionally, and by a little or by a lot.
    [1, () => {
      d.body = Buffer.alloc(shape.bodyLimit + rng.pick([1, 1024, shape.bodyLimit]), 0x20);
    }],
  ])();
}

function headerMutation(d: Draft, rng: Rng, shape: SurfaceShape): void {
  rng.weighted<() => void>([
    [3, () => setHeader(d, "Host", undefined)],
    [2, () => setHeader(d, "Host", "evil.example")],
    [1, () => setHeader(d, "Host", "localhost.evil.example")],
    [1, () => setHeader(d, "Host", "127.0.0.1.nip.io")],
    [1, () => setHeader(d, "Host", "")],
    [1, () => setHeader(d, "Host", "[::1")],
    [1, () => d.headers.push(["Host", "evil.example"])],
    [2, () => setHeader(d, "Origin", rng.pick(["http://evil.example", "null", `http://${shape.host}`, "https://evil.example:443", "file://"]))],
    [1, () => setHeader(d, "Sec-Fetch-Site", rng.pick(["cross-site", "same-site", "none", "same-origin"]))],
    [3, () => setHeader(d, "Content-Type", rng.pick([undefined, "", "text/plain", "application/JSON", "application/json; charset=latin1", "application/json;;", "multipart/form-data; boundary=x", "application/x-www-form-urlencoded", "application/problem+json", "*/*", "application/json\u00ff"]))],
    [1, () => d.headers.push(["Content-Type", "text/plain"])],
    [2, () => setHeader(d, "Accept", rng.pick([undefined, "text/html", "*/*", "application/json", "text/event-stream", "\u00ff"]))],
    [1, () => setHeader(d, "Expect", rng.pick(["100-continue", "bogus"]))],
    [1, () => setHeader(d, "Connection", rng.pick(["close", "keep-alive", "Upgrade", "bogus"]))],
    [1, () => {
      setHeader(d, "Upgrade", rng.pick(["websocket", "h2c"]));
      setHeader(d, "Connection", "Upgrade");
    }],
    [2, () => {
      for (let i = rng.int(50, 300); i > 0; i--) d.headers.push([`X-${rng.word(3, 8)}`, rng.word(1, 40)]);
    }],
    [1, () => d.headers.push(["X-Big", "b".repeat(rng.pick([8000, 17000, 70000]))])],
    [2, () => d.headers.push([rng.pick(["X Bad", "X\u0000", "", "X:", "\u00e9", "X-Bad "]), "1"])],
    [2, () => d.headers.push(["X-Bytes", latin1(Buffer.from([0x01, 0x7f, 0x80, 0xff, 0x0b]))])],
    [1, () => d.headers.push(["X-Fold", "a\r\n b"])],
    [1, () => d.headers.push(["X-LF", "a\nInjected: 1"])],
    [2, () => {
      if (shape.keyHeader) setHeader(d, shape.keyHeader, oddKey(rng));
    }],
    [3, () => {
      // The key header twice: the same key, or two keys.
      if (!shape.keyHeader) return;
      const first = headerOf(d, shape.keyHeader) ?? rng.word();
      d.headers.push([rng.pick([shape.keyHeader, shape.keyHeader.toLowerCase(), shape.keyHeader.toUpperCase()]), rng.chance(0.5) ? first : rng.word()]);
    }],
    [1, () => {
      if (shape.keyHeader) setHeader(d, shape.keyHeader, undefined);
    }],
    [1, () => {
      if (shape.keyHeader) d.headers.push(["Effectgate-Fence", rng.pick(["0", "-1", "1.5", "x", "1, 2", "99999999999999999999", ""])]);
    }],
    [2, () => {
      for (const name of shape.extraHeaders ?? []) {
        if (rng.chance(0.5)) setHeader(d, name, rng.pick(["", "x", "t=1,v1=00", `${rng.word()}-${rng.word()}`, "0".repeat(rng.int(10, 9000)), latin1(Buffer.from([0xff, 0x00]))]));
        else d.headers.push([name, rng.word()]);
      }
    }],
  ])();
}

function framingMutation(d: Draft, rng: Rng): void {
  d.framing = rng.pick<Framing>(["chunked", "none", "length-short", "length-long", "chunked-bad", "chunked-cut", "both"]);
  if (rng.chance(0.3)) {
    rng.pick<() => void>([
      () => d.headers.push(["Content-Length", String(d.body.length + 1)]),
      () => d.headers.push(["Content-Length", rng.pick(["-1", "abc", "99999999999999999999", "+5", "0x10", "1 2", ""])]),
      () => d.headers.push(["Transfer-Encoding", rng.pick(["gzip", "chunked, chunked", "xchunked", "identity", "chunked\u0000"])]),
    ])();
  }
}

function requestLineMutation(d: Draft, rng: Rng): void {
  rng.weighted<() => void>([
    [5, () => {
      d.method = rng.pick(ODD_METHODS);
    }],
    [3, () => {
      d.version = rng.pick(VERSIONS);
    }],
    [1, () => {
      d.eol = "\n";
    }],
    [2, () => {
      d.rawHead = Buffer.from(rng.pick([
        "GET\r\n\r\n", "GET /\r\n\r\n", "\r\n\r\nGET / HTTP/1.1\r\n\r\n", "GET  / HTTP/1.1\r\n\r\n", " GET / HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1\r\nHost\r\n\r\n", "GET / HTTP/1.1\r\n: x\r\n\r\n", "\u0016\u0003\u0001\u0000\u00a5\u0001\u0000\u0000", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\n", "GET / HTTP/1.1\r", "\u0000\u0000\u0000\u0000", "POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n",
      ]), "latin1");
      d.body = Buffer.alloc(0);
    }],
    [1, () => {
      d.rawHead = rng.bytes(rng.int(1, 600));
      d.body = Buffer.alloc(0);
    }],
  ])();
}

function targetMutation(d: Draft, rng: Rng, shape: SurfaceShape): void {
  rng.weighted<() => void>([
    [4, () => {
      d.target = rng.pick(ODD_TARGETS);
    }],
    [8, () => {
      d.target = pathVariant(rng.pick(shape.paths), rng);
    }],
    [2, () => {
      d.target = `/${"a/".repeat(rng.int(1000, 30000))}`;
    }],
    [1, () => {
      d.target = `/${"%".repeat(rng.int(10, 5000))}`;
    }],
    [1, () => {
      d.target = rng.pick(shape.paths) + "?" + latin1(rng.bytes(rng.int(1, 200))).replace(/[\r\n ]/g, "x");
    }],
  ])();
}

export const MUTATIONS: readonly (readonly [number, Mutation])[] = [
  [4, { family: "request-line", apply: requestLineMutation }],
  [6, { family: "target", apply: targetMutation }],
  [6, { family: "token", apply: tokenMutation }],
  [6, { family: "headers", apply: headerMutation }],
  [6, { family: "body", apply: bodyMutation }],
  [3, { family: "framing", apply: (d, rng) => framingMutation(d, rng) }],
];

/** The bytes of a draft, and whether a server has all of it (a complete request it owes an answer to). */
export function serialize(d: Draft, rng: Rng): { bytes: Buffer; complete: boolean; wellFramed: boolean } {
  const lines: string[] = [];
  let body = d.body;
  let complete = true;
  const headers = d.headers.filter(([n]) => !/^(content-length|transfer-encoding)$/i.test(n) || d.framing === "none");
  const extraFraming = d.headers.filter(([n]) => /^(content-length|transfer-encoding)$/i.test(n) && d.framing !== "none");
  switch (d.framing) {
    case "length":
      headers.push(["Content-Length", String(body.length)]);
      break;
    case "none":
      // The body follows a head that declares no framing (or what a mutation declared, which may lie): the server may wait for more.
      complete = body.length === 0 && !d.headers.some(([n]) => /^(content-length|transfer-encoding)$/i.test(n));
      break;
    case "length-short":
      headers.push(["Content-Length", String(Math.max(0, body.length - rng.int(1, 10)))]);
      break;
    case "length-long":
      headers.push(["Content-Length", String(body.length + rng.int(1, 1000))]);
      complete = false;
      break;
    case "both":
      headers.push(["Content-Length", String(body.length)], ["Transfer-Encoding", "chunked"]);
      body = chunked(body, rng, true);
      break;
    case "chunked":
      headers.push(["Transfer-Encoding", "chunked"]);
      body = chunked(body, rng, true);
      break;
    case "chunked-cut":
      headers.push(["Transfer-Encoding", "chunked"]);
      body = chunked(body, rng, false);
      complete = false;
      break;
    case "chunked-bad":
      headers.push(["Transfer-Encoding", "chunked"]);
    {
      // The first three are refused by any parser at once; after the others, whether the request has ended depends on what follows.
      const bad = rng.pick(["zz\r\n", "-1\r\n", "1;\u0000\r\nx\r\n0\r\n\r\n", "ffffffffffffffffff\r\n", "5\r\nab\r\n0\r\n\r\n", "0\r\n"]);
      complete = ["zz\r\n", "-1\r\n", "1;\u0000\r\nx\r\n0\r\n\r\n"].includes(bad);
      body = Buffer.concat([Buffer.from(bad, "latin1"), body]);
      break;
    }
  }
  headers.push(...extraFraming);
  // An upgrade request: Node's parser hands the bytes after the head to an 'upgrade' listener, and
  // with none it may wait for a body that never ends (a malformed chunked one): not the surface's to answer.
  if (headers.some(([n, v]) => n.toLowerCase() === "upgrade" || (n.toLowerCase() === "connection" && /upgrade/i.test(v)))) complete = false;
  // A second, contradicting Content-Length or Transfer-Encoding: whether the server waits for more is its parser's call.
  if (extraFraming.length > 0) complete = false;
  // A raw head is complete when its header section ends; random bytes usually never do (the server may refuse them at once, or wait).
  if (d.rawHead) return { bytes: Buffer.concat([d.rawHead, body]), complete: d.rawHead.includes("\r\n\r\n"), wellFramed: false };
  lines.push(`${d.method} ${d.target}${d.version === "" ? "" : ` ${d.version}`}`);
  for (const [name, value] of headers) lines.push(`${name}: ${value}`);
  const head = Buffer.from(lines.join(d.eol) + d.eol + d.eol, "latin1");
  const wellFramed = extraFraming.length === 0 && (d.framing === "length" || d.framing === "chunked") && d.eol === "\r\n";
  return { bytes: Buffer.concat([head, body]), complete, wellFramed };
}

function chunked(body: Buffer, rng: Rng, terminate: boolean): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  while (at < body.length) {
    const size = Math.min(body.length - at, rng.int(1, 65536));
    parts.push(Buffer.from(`${size.toString(16)}\r\n`), body.subarray(at, at + size), Buffer.from("\r\n"));
    at += size;
  }
  if (terminate) parts.push(Buffer.from("0\r\n\r\n"));
  else if (parts.length > 1) parts.pop();
  return Buffer.concat(parts);
}

/** A good request as a draft. */
export function draft(method: string, target: string, headers: [string, string][], body: string | Buffer = ""): Draft {
  return { method, target, version: "HTTP/1.1", headers, body: Buffer.isBuffer(body) ? body : Buffer.from(body, "utf8"), framing: "length", eol: "\r\n" };
}

/** Applies one to three mutations; returns the families applied. */
export function mutate(d: Draft, rng: Rng, shape: SurfaceShape): string[] {
  const applied: string[] = [];
  for (let n = rng.weighted([[6, 1], [3, 2], [1, 3]] as const); n > 0; n--) {
    const mutation = rng.weighted(MUTATIONS);
    mutation.apply(d, rng, shape);
    applied.push(mutation.family);
  }
  return applied;
}

/** Whether any Authorization line carries the token: if none does, the request is unauthenticated. */
export function carriesToken(d: Draft, token: string): boolean {
  if (d.rawHead) return d.rawHead.includes(token);
  return d.headers.some(([n, v]) => n.trim().toLowerCase() === "authorization" && v.includes(token));
}
