// What an express app really serves, read from its router stack, beside what its OpenAPI
// document says; and a document's request schema, as a validator a test can run samples through.
import type { Express } from 'express';
import { z } from 'zod';
import { openApiPath, type OpenApiDocument } from '../../platform/openapi.js';

interface Layer {
  route?: { path: unknown; methods: Record<string, boolean> };
  handle?: { stack?: Layer[] };
}

/** Every `METHOD /path` the app's routes answer, in OpenAPI's path form, sub-routers included. */
export function servedRoutes(app: Express): string[] {
  const found = new Set<string>();
  const walk = (stack: readonly Layer[]) => {
    for (const layer of stack) {
      if (layer.route && typeof layer.route.path === 'string') {
        for (const [method, on] of Object.entries(layer.route.methods)) {
          if (on && method !== '_all') found.add(`${method.toUpperCase()} ${openApiPath(layer.route.path)}`);
        }
      } else if (layer.handle?.stack) {
        walk(layer.handle.stack);
      }
    }
  };
  walk((app as unknown as { router: { stack: Layer[] } }).router.stack);
  return [...found].sort();
}

export function documentedRoutes(document: OpenApiDocument): string[] {
  return Object.entries(document.paths)
    .flatMap(([path, item]) => Object.keys(item).map((method) => `${method.toUpperCase()} ${path}`))
    .sort();
}

/** The document's JSON body schema of one operation, as a zod schema to parse samples with. */
export function documentedBody(document: OpenApiDocument, method: string, path: string): z.ZodType {
  const operation = document.paths[path]?.[method] as
    { requestBody?: { content: { 'application/json': { schema: object } } } } | undefined;
  const schema = operation?.requestBody?.content['application/json'].schema;
  if (!schema) throw new Error(`the document has no JSON body for ${method.toUpperCase()} ${path}`);
  // zod reads no `anyOf` beside `properties`; alternatives of required fields, at any depth, are checked here.
  const parsed = z.fromJSONSchema(withoutAlternatives(schema) as Parameters<typeof z.fromJSONSchema>[0]);
  return parsed.refine((value) => meetsAlternatives(schema as JsonSchemaNode, value));
}

type JsonSchemaNode = {
  anyOf?: Array<{ required?: string[] }>;
  properties?: Record<string, JsonSchemaNode>;
  items?: JsonSchemaNode;
};

/** `schema` without the `anyOf`s of required-field alternatives, wherever they are. */
function withoutAlternatives(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(withoutAlternatives);
  if (typeof schema !== 'object' || schema === null) return schema;
  return Object.fromEntries(
    Object.entries(schema)
      .filter(([key, value]) => !(key === 'anyOf' && isAlternatives(value)))
      .map(([key, value]) => [key, withoutAlternatives(value)]),
  );
}

function isAlternatives(value: unknown): boolean {
  return (
    Array.isArray(value) &&
    value.every((one) => typeof one === 'object' && one !== null && 'required' in one && Object.keys(one).length === 1)
  );
}

/** Whether `value` has one of the required alternatives of every object schema it meets. */
function meetsAlternatives(schema: JsonSchemaNode, value: unknown): boolean {
  if (Array.isArray(value)) return schema.items ? value.every((one) => meetsAlternatives(schema.items!, one)) : true;
  if (typeof value !== 'object' || value === null) return true;
  if (schema.anyOf && isAlternatives(schema.anyOf)) {
    const met = schema.anyOf.some((alternative) =>
      (alternative.required ?? []).every((key) => Object.hasOwn(value, key)),
    );
    if (!met) return false;
  }
  return Object.entries(schema.properties ?? {}).every(([key, sub]) =>
    Object.hasOwn(value, key) ? meetsAlternatives(sub, (value as Record<string, unknown>)[key]) : true,
  );
}

/** The document's schema of one parameter (`in` path, query or header). */
export function documentedParameter(document: OpenApiDocument, method: string, path: string, name: string): z.ZodType {
  const operation = document.paths[path]?.[method] as
    { parameters?: Array<{ name: string; schema: object }> } | undefined;
  const parameter = operation?.parameters?.find((p) => p.name === name);
  if (!parameter) throw new Error(`the document has no parameter ${name} for ${method.toUpperCase()} ${path}`);
  return z.fromJSONSchema(parameter.schema as Parameters<typeof z.fromJSONSchema>[0]);
}
