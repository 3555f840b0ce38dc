/** Who an operator command records as having acted. */
import { userInfo } from "node:os";

/** The default for --by: the operating-system user running the command. */
export function defaultOperator(): string {
  try {
    return userInfo().username || "operator";
  } catch {
    return "operator";
  }
}
