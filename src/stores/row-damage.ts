/**
 * A stored row that does not read back as what a store wrote (unknown state, unreadable JSON).
 * Decoders throw it; each dialect's access maps it to EG_LEDGER_CORRUPT naming the row, so
 * damage is never read as absence and the other rows stay readable.
 */
export class RowDamage extends Error {
  /** `subject` names the row ("record acme/k1"), `problem` says what is wrong with it; `inspect` is a query to look at it. */
  constructor(readonly subject: string, readonly problem: string, readonly inspect?: string) {
    super(`${subject} ${problem}`);
    this.name = "RowDamage";
  }
}
