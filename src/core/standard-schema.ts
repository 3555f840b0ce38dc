/**
 * The Standard Schema interface (standardschema.dev), copied as its authors intend so any
 * conforming validator (zod 4, valibot, arktype…) can describe a tool's input.
 */
import { messageOf } from "./errors.js";

export interface StandardSchemaV1<Input = unknown, Output = Input> {
  readonly "~standard": StandardSchemaV1.Props<Input, Output>;
}

// eslint-disable-next-line @typescript-eslint/no-namespace
export declare namespace StandardSchemaV1 {
  export interface Props<Input = unknown, Output = Input> {
    readonly version: 1;
    readonly vendor: string;
    readonly validate: (value: unknown) => Result<Output> | Promise<Result<Output>>;
    readonly types?: Types<Input, Output> | undefined;
  }
  export type Result<Output> = SuccessResult<Output> | FailureResult;
  export interface SuccessResult<Output> {
    readonly value: Output;
    readonly issues?: undefined;
  }
  export interface FailureResult {
    readonly issues: ReadonlyArray<Issue>;
  }
  export interface Issue {
    readonly message: string;
    readonly path?: ReadonlyArray<PropertyKey | PathSegment> | undefined;
  }
  export interface PathSegment {
    readonly key: PropertyKey;
  }
  export interface Types<Input = unknown, Output = Input> {
    readonly input: Input;
    readonly output: Output;
  }
  export type InferInput<Schema extends StandardSchemaV1> = NonNullable<Schema["~standard"]["types"]>["input"];
  export type InferOutput<Schema extends StandardSchemaV1> = NonNullable<Schema["~standard"]["types"]>["output"];
}

/**
 * Validates `value`; returns the parsed value or a list of "path: message" lines. Never throws: a
 * schema is the caller's code, and one that throws or rejects is an invalid input (`threw` names
 * what it threw), so every caller answers the call instead of letting the throw escape.
 */
export async function validate<T>(
  schema: StandardSchemaV1<unknown, T>,
  value: unknown,
): Promise<{ ok: true; value: T } | { ok: false; issues: string[]; threw?: string }> {
  let result: StandardSchemaV1.Result<T>;
  try {
    const maybe = schema["~standard"].validate(value);
    result = maybe instanceof Promise ? await maybe : maybe;
  } catch (err) {
    const threw = messageOf(err);
    return { ok: false, issues: [`the schema threw while validating (${threw})`], threw };
  }
  if (result.issues) {
    return {
      ok: false,
      issues: result.issues.map((issue) => {
        const path = (issue.path ?? [])
          .map((seg) => String(typeof seg === "object" && seg !== null ? seg.key : seg))
          .join(".");
        return path ? `${path}: ${issue.message}` : issue.message;
      }),
    };
  }
  return { ok: true, value: result.value };
}
