/**
 * The ledger's schema versions, the same in every SQL dialect: version n of a SQLite file and of a
 * PostgreSQL schema hold the same tables. Each dialect's migrations.ts has one entry per name, in
 * this order (a test holds them to it). Append only: never renumber or edit a shipped one.
 */
export const MIGRATION_NAMES = [
  "calls and checkpoints",
  "reconciliation",
  "sagas",
  "governance",
  "list order",
  "fences and send times",
  "call search and intent windows",
  "approval requests by key",
  "call intents",
] as const;
