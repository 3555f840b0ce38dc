/** `effectgate migrate`: create or migrate a ledger ahead of the agents, and say which of the two it did. */
import { messageOf } from "../core/errors.js";
import { migrateSqlite } from "../stores/sqlite/index.js";
import { CliError, EXIT_FAILURE } from "./errors.js";
import { chosenTarget, redactUrl } from "./open-ledger.js";

export async function migrateLedger(opts: { db: string }): Promise<void> {
  const target = chosenTarget(opts.db);
  if (target.kind === "postgres") {
    const { migratePostgres } = await import("../stores/postgres/index.js").catch((err: unknown) => {
      throw new CliError(`--pg needs the \`pg\` package: npm install pg (${messageOf(err)})`, EXIT_FAILURE);
    });
    const { schema, from, to } = await migratePostgres(target.url, target.schema);
    process.stdout.write(from === to
      ? `the PostgreSQL ledger ${redactUrl(target.url)} schema ${schema} is up to date (schema version ${to}); nothing was changed\n`
      : `migrated the PostgreSQL ledger ${redactUrl(target.url)} schema ${schema} from version ${from} to ${to}\n`);
    return;
  }
  // Checked whole first (PRAGMA quick_check): a damaged, empty or foreign file is refused untouched.
  const { file, created, from, to } = await migrateSqlite(target.path);
  process.stdout.write(created
    ? `created the SQLite ledger ${file} (schema version ${to})\n`
    : from === to
      ? `the SQLite ledger ${file} is up to date (schema version ${to}); nothing was changed\n`
      : `migrated the SQLite ledger ${file} from schema version ${from} to ${to}\n`);
}
