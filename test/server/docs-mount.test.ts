/**
 * The middleware mounted exactly as docs/server.md shows (`createServer((req, res) => void
 * idempotency(req, res, () => handle(req, res)))`), in a process of its own running the built
 * package: a request it cannot read must not end that process. A rejection of the middleware's
 * promise there is an unhandled rejection, which Node answers by exiting.
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { requireBuild, startWorker } from "../support/processes.js";
import { tempDir } from "../support/tmp.js";
import { codeOf, once, rawRequest } from "./raw-http.js";

const FIXTURE = fileURLToPath(new URL("./fixtures/docs-mount.mjs", import.meta.url));

const post = (target: string, key: string, extra: readonly string[] = []) =>
  rawRequest("POST", target, ["Host: 127.0.0.1", "Content-Type: application/json", "Content-Length: 2", `Idempotency-Key: ${key}`, ...extra], "{}");

describe("the middleware mounted as docs/server.md shows", () => {
  beforeAll(() => requireBuild());

  it("survives requests it cannot read (//[, http://[, a key sent twice) and keeps serving", async () => {
    const worker = startWorker(FIXTURE, [join(tempDir(), "idempotency.db")]);
    try {
      const url = `http://127.0.0.1:${(await worker.line((l) => l.startsWith("listening "))).slice("listening ".length)}`;
      const answers = [];
      const exitedEarly = async (err: unknown): Promise<never> => {
        const exit = await worker.exited;
        throw new Error(`the service died (code ${exit.code}) instead of answering: ${String(err)}\n${exit.stderr}`);
      };
      for (const request of [post("//[", "k-1"), post("http://[", "k-2"), post("/charges", "k-3", ["Idempotency-Key: k-4"]), post("/charges", "k-5, k-6")]) {
        const answer = await once(url, request).catch(exitedEarly);
        answers.push(answer === "closed" ? "closed" : `${answer.status} ${codeOf(answer) ?? ""}`.trim());
      }
      // `//[` is the path //[ (as Hono reads it too); the others name no path or no single key.
      expect(answers).toEqual(["201", "400 request_target_invalid", "400 idempotency_key_invalid", "400 idempotency_key_invalid"]);
      const charged = await once(url, post("/charges", "k-7")).catch(exitedEarly);
      expect(charged !== "closed" && [charged.status, charged.body]).toEqual([201, '{"charge":2}']);
      expect(worker.child.exitCode).toBeNull();
    } finally {
      worker.child.kill("SIGTERM");
    }
    const exit = await worker.exited;
    expect(exit.signal, exit.stderr).toBe("SIGTERM");
    expect(exit.stderr).toBe("");
  });
});
