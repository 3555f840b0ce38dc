/**
 * A tool the user already wrote for LangChain (`tool(func, { name, schema })` from
 * `@langchain/core/tools`), made an effectgate tool by giving its effect class (and optionally a
 * probe, a dry run…). The effectgate tool goes to `createGate({ tools })`; `langchainTool` then
 * gives LangChain a tool of the same name whose first run calls the user's tool through the gate.
 */
import type { StructuredToolInterface } from "@langchain/core/tools";
import type { StandardSchemaV1 } from "../../core/standard-schema.js";
import { anyJsonObject, isStandardSchema } from "../shared.js";
import { defineTool, type Tool, type ToolSpec } from "../../core/tool.js";
import { messageOf } from "../../core/errors.js";

/** What effectgate needs to know about the tool: its effect class and the hooks it has. */
export type LangChainToolSpec = Omit<ToolSpec<StandardSchemaV1, unknown>, "name" | "description" | "input" | "execute">;

const sources = new WeakMap<object, StructuredToolInterface>();

/** The LangChain tool behind an effectgate tool made by fromLangChainTool. */
export function langchainSourceOf(tool: object): StructuredToolInterface | undefined {
  return sources.get(tool);
}

/** LangChain's JSON Schema validator (`Validator` from `@langchain/core/utils/json_schema`), handed in by the entry. */
export interface JsonSchemaKit {
  readonly Validator: new (schema: never, draft?: never, shortCircuit?: boolean) => JsonSchemaValidator;
}

interface JsonSchemaValidator {
  validate(instance: unknown): {
    readonly valid: boolean;
    readonly errors: readonly { readonly keyword: string; readonly keywordLocation: string; readonly instanceLocation: string; readonly error: string }[];
  };
}

/**
 * A LangChain tool's JSON Schema as the gate's input check, with the validator LangChain itself
 * checks a tool's input with: a call it would refuse is EG_INVALID_INPUT with the issues before
 * anything runs (LangChain's own refusal is an error carrying its stack trace). A schema the
 * validator cannot use refuses every call rather than passing anything through.
 */
function jsonSchemaInput(kit: JsonSchemaKit, source: StructuredToolInterface): StandardSchemaV1<Record<string, unknown>> {
  let validator: JsonSchemaValidator | undefined;
  let unusable: string | undefined;
  try {
    validator = new kit.Validator(source.schema as never, undefined, false);
  } catch (err) {
    unusable = `the JSON Schema of ${source.name} cannot be used (${messageOf(err)}), so no call of it runs`;
  }
  return {
    "~standard": {
      version: 1,
      vendor: "effectgate-langchain",
      validate(value: unknown) {
        const object = anyJsonObject["~standard"].validate(value) as StandardSchemaV1.Result<Record<string, unknown>>;
        if (object.issues) return object;
        if (!validator) return { issues: [{ message: unusable ?? "the tool's schema cannot be used" }] };
        const result = validator.validate(value);
        if (result.valid) return { value: value as Record<string, unknown> };
        return { issues: issuesOf(result.errors).map((message) => ({ message })) };
      },
    },
  };
}

type SchemaError = ReturnType<JsonSchemaValidator["validate"]>["errors"][number];

/**
 * The errors that say what is wrong, each with where: a parent's ("Property x does not match
 * schema", "False boolean schema" under additionalProperties) only repeats a deeper one.
 */
function issuesOf(errors: readonly SchemaError[]): string[] {
  const leaves = errors.filter((e) => e.keyword !== "false" && !errors.some((o) => o.keywordLocation.startsWith(`${e.keywordLocation}/`)));
  const where = (e: SchemaError) => (e.instanceLocation === "#" ? "" : `${e.instanceLocation.slice(2)}: `);
  return [...new Set(leaves.map((e) => `${where(e)}${e.error.replace(/\.$/, "")}`))];
}

/**
 * The effectgate tool for a LangChain tool. On a recovery in a fresh process (after a probe said
 * the effect is absent), the gate invokes the LangChain tool without the graph's config.
 */
export function fromLangChainToolWith(kit: JsonSchemaKit, source: StructuredToolInterface, spec: LangChainToolSpec): Tool {
  const tool = defineTool({
    ...spec,
    name: source.name,
    description: source.description,
    input: isStandardSchema(source.schema) ? source.schema : jsonSchemaInput(kit, source),
    execute: (value: unknown) => source.invoke(value as never),
  });
  sources.set(tool, source);
  return tool;
}
