/** `effectgate migrate`: create or migrate a ledger ahead of the agents. */
import { resolve } from "node:path";
import { sqliteLedger } from "../stores/sqlite/index.js";
import { CliError, EXIT_FAILURE } from "./errors.js";
import { redactUrl } from "./open-ledger.js";
import { messageOf } from "../core/errors.js";

export async function migrateLedger(opts: { db: string; pg?: string | undefined; pgSchema?: string | undefined }): Promise<void> {
  if (opts.pg !== undefined && opts.pg !== "") {
    const { migratePostgres } = await import("../stores/postgres/index.js").catch((err: unknown) => {
      throw new CliError(`--pg needs the \`pg\` package: npm install pg (${messageOf(err)})`, EXIT_FAILURE);
    });
    const { schema, from, to } = await migratePostgres(opts.pg, opts.pgSchema);
    process.stdout.write(from === to
      ? `the PostgreSQL ledger ${redactUrl(opts.pg)} schema ${schema} is up to date (version ${to})\n`
      : `migrated the PostgreSQL ledger ${redactUrl(opts.pg)} schema ${schema} from version ${from} to ${to}\n`);
    return;
  }
  const file = resolve(opts.db);
  const ledger = sqliteLedger(file);
  try {
    await ledger.calls.list({ limit: 1 }); // opening applies the migrations
  } finally {
    await ledger.close();
  }
  process.stdout.write(`the SQLite ledger ${file} is created and up to date\n`);
}
