/**
 * Which ledger a command works on, through the BUILT command: a flag beats the environment
 * (--db beats EFFECTGATE_PG_URL, --pg beats EFFECTGATE_DB), both flags together or both
 * variables without a flag are a usage error (exit 2), and a --pg that is not a postgres:// URL
 * is refused before any connection, echoing what was given with its password hidden.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { requireBuild } from "../support/processes.js";
import { usePostgres } from "../support/pg.js";
import { tempDir } from "../support/tmp.js";
import { filledLedger } from "./ledger-files.js";
import { runCli } from "./run-cli.js";

const pg = usePostgres();
const dir = tempDir("effectgate-cli-choice-");
const file = join(dir, "ledger.db");
/** A PostgreSQL URL nothing listens on: a command that used it would fail to connect. */
const NOWHERE = "postgres://effectgate:pw@127.0.0.1:9/nowhere";

beforeAll(async () => {
  requireBuild();
  await filledLedger(file, 3);
});

describe("a flag beats the environment", () => {
  it("--db is used although EFFECTGATE_PG_URL is set", async () => {
    const run = await runCli(["ledger", "ls", "--db", file, "--json"], { env: { EFFECTGATE_PG_URL: NOWHERE } });
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect((JSON.parse(run.stdout) as { key: string }[]).map((r) => r.key)).toEqual(["toolu_000000", "toolu_000001", "toolu_000002"]);
  });

  it("migrate --db creates the file although EFFECTGATE_PG_URL is set", async () => {
    const fresh = join(dir, "fresh.db");
    const run = await runCli(["migrate", "--db", fresh], { env: { EFFECTGATE_PG_URL: NOWHERE } });
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(`created the SQLite ledger ${fresh}`);
    expect(existsSync(fresh)).toBe(true);
  });

  it("--pg is used although EFFECTGATE_DB is set", async () => {
    const schema = pg.freshSchema();
    const run = await runCli(["ledger", "ls", "--pg", pg.url, "--pg-schema", schema], { env: { EFFECTGATE_DB: file } });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`there is no effectgate ledger in schema ${schema}`);
    expect(run.stdout).toBe("");
  });

  it("EFFECTGATE_PG_URL alone chooses PostgreSQL; EFFECTGATE_DB alone the file", async () => {
    const schema = pg.freshSchema();
    const viaPg = await runCli(["ledger", "ls", "--pg-schema", schema], { env: { EFFECTGATE_PG_URL: pg.url } });
    expect(viaPg.stderr).toContain(`there is no effectgate ledger in schema ${schema}`);
    const viaFile = await runCli(["ledger", "ls"], { env: { EFFECTGATE_DB: file } });
    expect(viaFile.code).toBe(0);
    expect(viaFile.stdout).toContain(`3 calls in ${file}`);
  });
});

describe("an unclear choice is a usage error", () => {
  it("--db and --pg together exit 2, naming both, and open neither", async () => {
    const run = await runCli(["ledger", "ls", "--db", file, "--pg", NOWHERE]);
    expect(run.code).toBe(2);
    expect(run.stderr).toBe("effectgate: --db and --pg were both given, and a command works on one ledger: pass --db PATH for a SQLite file or --pg URL for PostgreSQL.\n");
    expect(run.stdout).toBe("");
  });

  it("the same for a command that changes the ledger", async () => {
    const run = await runCli(["kill", "on", "--db", file, "--pg", NOWHERE]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("--db and --pg were both given");
  });

  it("EFFECTGATE_DB and EFFECTGATE_PG_URL both set, no flag: exit 2, asking for one", async () => {
    const run = await runCli(["ledger", "ls"], { env: { EFFECTGATE_DB: file, EFFECTGATE_PG_URL: NOWHERE } });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("EFFECTGATE_DB and EFFECTGATE_PG_URL are both set");
    expect(run.stderr).toContain("pass --db PATH or --pg URL");
  });

  it("--pg-schema without a PostgreSQL ledger exits 2 instead of being ignored", async () => {
    const run = await runCli(["ledger", "ls", "--db", file, "--pg-schema", "billing"]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("--pg-schema names the PostgreSQL schema of a --pg ledger");
  });
});

describe("a --pg that is not a PostgreSQL URL", () => {
  it("not-a-url is echoed as given, with no host or URL it never typed", async () => {
    const run = await runCli(["ledger", "ls", "--pg", "not-a-url"]);
    expect(run.code).toBe(2);
    expect(run.stderr).toBe('effectgate: --pg "not-a-url" is not a URL: give a PostgreSQL URL, e.g. postgres://user:password@localhost:5432/app\n');
    expect(run.stderr).not.toMatch(/ENOTFOUND|localhost:5432\/postgres/);
  });

  it("an http:// URL is refused by its scheme, its password hidden", async () => {
    const run = await runCli(["ledger", "ls", "--pg", "http://ann:hunter2@db.example/app"]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('--pg "http://ann:***@db.example/app" is not a PostgreSQL URL (its scheme is http)');
    expect(run.stderr).not.toContain("hunter2");
  });

  it("a URL that does not parse keeps its password hidden too", async () => {
    const run = await runCli(["migrate", "--pg", "postgres://ann:hunter2@db.example:port/app"]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('--pg "postgres://ann:***@db.example:port/app" is not a URL');
    expect(run.stderr).not.toContain("hunter2");
  });

  it("from EFFECTGATE_PG_URL the message names the variable", async () => {
    const run = await runCli(["queue", "ls"], { env: { EFFECTGATE_PG_URL: "mysql://db.example/app" } });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('EFFECTGATE_PG_URL "mysql://db.example/app" is not a PostgreSQL URL (its scheme is mysql)');
  });

  it("the demo's --pg is checked the same way", async () => {
    const run = await runCli(["demo", "--store", "postgres", "--pg", "http://db.example/app", "--levels", "3"]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('--pg "http://db.example/app" is not a PostgreSQL URL');
  });
});
