/** Removes a PostgreSQL schema the explorer made for one run (pg is loaded only when a PostgreSQL part runs). */
export async function dropSchema(connectionString: string, schema: string): Promise<void> {
  const pg = (await import("pg")).default;
  const client = new pg.Client({ connectionString });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await client.end();
  }
}
