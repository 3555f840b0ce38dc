// The downstream handler's own effect count, per client and key, reported to the fuzzer over IPC.
// A key the middleware accepted is one bare token or one quoted string (docs/server.md "One key per request").
export function keyOf(value) {
  const text = String(value ?? "").trim();
  if (text.startsWith("\"") && text.endsWith("\"") && text.length >= 2) return text.slice(1, -1).replace(/\\(.)/g, "$1");
  return text;
}

export function effectCounter() {
  const effects = new Map();
  let handled = 0;
  return {
    /** Counts one effect for (client, key) and returns how many that key has had. */
    apply(authorization, key) {
      handled++;
      const id = `${authorization ?? ""}\u0000${keyOf(key)}`;
      const n = (effects.get(id) ?? 0) + 1;
      effects.set(id, n);
      return n;
    },
    report() {
      let max = 0;
      const repeated = [];
      for (const [id, n] of effects) {
        if (n > max) max = n;
        if (n > 1 && repeated.length < 20) repeated.push({ key: id.split("\u0000")[1], effects: n });
      }
      return { handled, keys: effects.size, max, repeated };
    },
  };
}

/** Answers the fuzzer's IPC questions; SIGTERM closes the server and the ledger, then exits 0. */
export function serveIpc(counter, close) {
  process.on("message", (m) => {
    if (m?.op === "effects") process.send({ op: "effects", ...counter.report() });
  });
  process.once("SIGTERM", () => {
    void close().then(() => process.exit(0), (err) => {
      process.stderr.write(`close failed: ${err?.stack ?? err}\n`);
      process.exit(1);
    });
  });
}
