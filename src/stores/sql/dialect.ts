/**
 * SQL written once for SQLite and PostgreSQL. A statement is a template whose parameters are
 * `:name:type` and whose dialect-specific parts are tokens; each dialect supplies only its
 * placeholders, its clock and its table names:
 *
 *   :tenant:text   a parameter: `@tenant` in SQLite, `$1::text` in PostgreSQL (a name used
 *                  twice is one parameter)
 *   {now}          the store's clock in epoch ms: a bound parameter in SQLite (the file lives on
 *                  this machine), the database clock in PostgreSQL (workers on many machines)
 *   {from_clock}   the FROM item that defines {now} where the dialect needs one (else nothing);
 *                  in PostgreSQL it also carries the transaction's commit mode
 *   {join_clock}   the same, joined into a FROM list that names a table already
 *   {using_clock}  the same for DELETE
 *   {calls}        a table of the ledger, schema-qualified where the dialect has schemas
 */
export type SqlType = "text" | "bigint" | "integer" | "boolean" | "json";

export interface Dialect {
  readonly name: "sqlite" | "postgres";
  /** The table's name as the statement must spell it. */
  table(name: string): string;
  /** {now}, {from_clock}, {join_clock} and {using_clock}. */
  readonly now: string;
  readonly fromClock: string;
  readonly joinClock: string;
  readonly usingClock: string;
  /** The nth parameter (from 1) of `type`, named `name`. */
  param(name: string, type: SqlType, index: number): string;
}

export interface CompiledSql {
  readonly text: string;
  /** Parameter names in the order PostgreSQL numbers them, with their types. */
  readonly params: readonly { readonly name: string; readonly type: SqlType }[];
}

const TOKEN = /\{([a-z_]+)\}|:([a-z_]+):(text|bigint|integer|boolean|json)\b/g;

export function compile(dialect: Dialect, template: string): CompiledSql {
  const params: { name: string; type: SqlType }[] = [];
  const text = template.replace(TOKEN, (_whole, token: string | undefined, name: string | undefined, type: SqlType | undefined) => {
    if (token === "now") return dialect.now;
    if (token === "from_clock") return dialect.fromClock;
    if (token === "join_clock") return dialect.joinClock;
    if (token === "using_clock") return dialect.usingClock;
    if (token !== undefined) return dialect.table(token);
    const known = params.findIndex((p) => p.name === name);
    if (known >= 0) return dialect.param(name as string, type as SqlType, known + 1);
    params.push({ name: name as string, type: type as SqlType });
    return dialect.param(name as string, type as SqlType, params.length);
  });
  return { text: text.replace(/\s+/g, " ").trim(), params };
}

/** The values of `named` in the compiled statement's order (PostgreSQL), booleans as the dialect binds them. */
export function positional(sql: CompiledSql, named: Readonly<Record<string, unknown>>): unknown[] {
  return sql.params.map(({ name }) => {
    if (!(name in named)) throw new Error(`no value for :${name} in ${sql.text}`);
    return named[name];
  });
}

/** `named` for SQLite: booleans as 1/0 (better-sqlite3 binds no booleans), nothing else changed. */
export function sqliteValues(named: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(named)) out[name] = typeof value === "boolean" ? (value ? 1 : 0) : value;
  return out;
}
