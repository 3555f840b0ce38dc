/**
 * The console's bearer token: made on first start (32 random bytes), kept in a file only its
 * owner may read (mode 0600), and read back on later starts. A token file others can read is
 * refused rather than used: anyone who can read it can approve destructive calls.
 */
import { randomBytes } from "node:crypto";
import { chmodSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { EffectgateError, messageOf } from "../../core/errors.js";

export interface ConsoleToken {
  readonly token: string;
  /** True when this start made it (then, and only then, it is printed). */
  readonly created: boolean;
  readonly file: string;
}

const MIN_LENGTH = 32;

export function loadOrCreateToken(file: string): ConsoleToken {
  let mode: number | undefined;
  try {
    mode = statSync(file).mode;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw new EffectgateError("EG_BAD_OPTION", `cannot read the console token file ${file}: ${messageOf(err)}`);
  }
  if (mode === undefined) {
    const token = randomBytes(32).toString("base64url");
    mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
    try {
      // "wx": never overwrite a token another start wrote meanwhile.
      writeFileSync(file, `${token}\n`, { flag: "wx", mode: 0o600 });
      chmodSync(file, 0o600); // whatever the umask
      return { token, created: true, file };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw new EffectgateError("EG_BAD_OPTION", `cannot write the console token file ${file}: ${messageOf(err)}`);
      return loadOrCreateToken(file);
    }
  }
  if ((mode & 0o077) !== 0) {
    throw new EffectgateError("EG_BAD_OPTION",
      `the console token file ${file} can be read by other users (mode ${(mode & 0o777).toString(8)}); anyone who reads it can approve calls. ` +
        `Make it private with: chmod 600 ${file}`);
  }
  const token = readFileSync(file, "utf8").trim();
  if (token.length < MIN_LENGTH) {
    throw new EffectgateError("EG_BAD_OPTION", `the console token in ${file} is shorter than ${MIN_LENGTH} characters; delete the file and a new token is made on the next start`);
  }
  return { token, created: false, file };
}
