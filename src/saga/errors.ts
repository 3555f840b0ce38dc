/** The error a saga's driver gets when the saga ended or takes no more steps: it carries the saga as it stands. */
import { EffectgateError } from "../core/errors.js";
import type { SagaStatus } from "./types.js";

export class SagaError extends EffectgateError {
  /** The saga after the failure: `compensated`, `compensation_failed`, still `compensating`, or whatever closed it. */
  readonly status: SagaStatus;

  constructor(code: "EG_SAGA_FAILED" | "EG_SAGA_CLOSED", message: string, status: SagaStatus) {
    super(code, message);
    this.name = "SagaError";
    this.status = status;
  }
}
