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
  // zod reads no `anyOf` beside `properties`; alternatives of required fields are checked here.
  const { anyOf, ...rest } = schema as { anyOf?: Array<{ required?: string[] }> };
  const parsed = z.fromJSONSchema((anyOf ? rest : schema) as Parameters<typeof z.fromJSONSchema>[0]);
  if (!anyOf) return parsed;
  return parsed.refine((value) =>
    anyOf.some((alternative) => (alternative.required ?? []).every((key) => Object.hasOwn(value as object, key))),
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
