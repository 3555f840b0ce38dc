/**
 * A connection checked out of the pool for several statements (a group-commit batch, a
 * transaction, the migrations), guarded for as long as it is held.
 *
 * node-postgres's pool takes its own 'error' listener off a client while the client is checked
 * out, and a client whose socket ends emits 'error'. Without a listener of ours, a connection that
 * broke under a batch (a database restart, a failover, a cut network) was an unhandled 'error'
 * event: the process ended with the batch's effects applied and nobody told. Here the error is
 * only noted: node-postgres itself rejects every statement in flight on that connection with it
 * (so the batch fails as a lost reply does: outcome unknown), any later statement is refused as
 * "not queryable", and on release the client is discarded instead of going back to the pool. A
 * lone statement sent with `pool.query` is guarded by node-postgres's own listener.
 */
import type { Pool, PoolClient } from "pg";
import { isConnectionError } from "./errors.js";

export interface Checkout {
  readonly client: PoolClient;
  /** Gives the client back: with the error that broke it (noted here, or `err` when it is a connection error) it is discarded. */
  readonly release: (err?: unknown) => void;
}

export async function checkOut(pool: Pool): Promise<Checkout> {
  const client = await pool.connect();
  let lost: Error | undefined;
  const noted = (err: Error) => void (lost ??= err);
  client.on("error", noted);
  let released = false;
  return {
    client,
    release: (err) => {
      if (released) return;
      released = true;
      const broken = lost ?? (err instanceof Error && isConnectionError(err) ? err : undefined);
      // The pool puts its own listener back as it takes the client: ours comes off only after that.
      client.release(broken);
      client.off("error", noted);
    },
  };
}
