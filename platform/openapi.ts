// OpenAPI 3.1 documents built from the zod schemas the routes parse with, so a document cannot
// drift from what its service accepts. A service lists its operations (path, schemas, success
// answers, error codes); this turns them into paths, parameters, bodies and responses, with
// the one error body every service renders.
import type { RequestHandler } from 'express';
import { z } from 'zod';

export interface OperationDoc {
  method: 'get' | 'post' | 'put' | 'delete';
  /** In express' form: `/jobs/:id/finish`. */
  path: string;
  summary: string;
  description?: string;
  /** Path parameters by name. */
  params?: Readonly<Record<string, z.ZodType>>;
  /** The query string's schema: an object whose every key is one parameter. */
  query?: z.ZodObject;
  /** Request headers by name. */
  headers?: Readonly<Record<string, { schema: z.ZodType; required: boolean; description: string }>>;
  /** The JSON body's schema. */
  body?: z.ZodType;
  /** Success answers by status; no schema means no body. */
  responses: Readonly<Record<number, ResponseDoc>>;
  /** The error codes this operation may answer, beyond those every operation may. */
  errors?: readonly string[];
  /** Open even when the service requires an API key (`/healthz`). */
  open?: boolean;
}

export interface ResponseDoc {
  description: string;
  schema?: z.ZodType;
  /** A body that is not JSON: its media type (`text/plain`, `text/html`). */
  mediaType?: string;
  headers?: Readonly<Record<string, string>>;
}

export interface ServiceDoc {
  title: string;
  version: string;
  description: string;
  /** The service's table from error code to status. */
  errorStatus: Readonly<Record<string, number>>;
  operations: readonly OperationDoc[];
  /** Schemas shown once under components and referred to by name wherever they appear. */
  components?: Readonly<Record<string, z.ZodType>>;
  /** Every operation but the open ones needs `Authorization: Bearer <key>`. */
  bearer?: boolean;
}

type Json = Record<string, unknown>;

export interface OpenApiDocument {
  openapi: '3.1.0';
  info: { title: string; version: string; description: string };
  paths: Record<string, Record<string, Json>>;
  components: { schemas: Record<string, Json>; securitySchemes?: Record<string, Json> };
  security?: Array<Record<string, string[]>>;
}

/** What any operation may answer: its input refused, or the service failing. */
const ALWAYS = ['internal'];
/** What an operation with a body may answer before its schema runs. */
const WITH_BODY = ['invalid_request', 'payload_too_large', 'unsupported_media_type'];

export function openApiDocument(service: ServiceDoc): OpenApiDocument {
  const schemas = new SchemaSet(service.components ?? {});
  const paths: OpenApiDocument['paths'] = {};
  for (const op of service.operations) {
    const path = openApiPath(op.path);
    const item = (paths[path] ??= {});
    if (item[op.method]) throw new Error(`${op.method.toUpperCase()} ${op.path} is documented twice`);
    item[op.method] = operation(op, service, schemas);
  }
  const errorCodes = Object.keys(service.errorStatus);
  const document: OpenApiDocument = {
    openapi: '3.1.0',
    info: { title: service.title, version: service.version, description: service.description },
    paths,
    components: {
      schemas: {
        ...schemas.named(),
        Error: {
          type: 'object',
          description:
            'Every error answer: `code` is stable and machine-readable, `message` a sentence saying what to do; details sit beside them.',
          properties: {
            error: {
              type: 'object',
              properties: { code: { type: 'string', enum: errorCodes }, message: { type: 'string' } },
              required: ['code', 'message'],
              additionalProperties: true,
            },
          },
          required: ['error'],
          additionalProperties: false,
        },
      },
    },
  };
  if (service.bearer) {
    document.components.securitySchemes = { bearer: { type: 'http', scheme: 'bearer' } };
    document.security = [{ bearer: [] }];
  }
  return document;
}

/** The routes every service has beside its own: liveness, metrics and this document. */
export function serviceRoutes(errors: readonly string[] = []): OperationDoc[] {
  return [
    {
      method: 'get',
      path: '/healthz',
      summary: 'Liveness: 200 once the service is ready.',
      responses: { 200: { description: 'ready', schema: z.object({ ok: z.literal(true) }) } },
      open: true,
    },
    {
      method: 'get',
      path: '/metrics',
      summary: 'Prometheus metrics, in the text exposition format.',
      responses: { 200: { description: 'the metrics', mediaType: 'text/plain' } },
      errors,
    },
    {
      method: 'get',
      path: '/openapi.json',
      summary: 'This document.',
      responses: { 200: { description: 'an OpenAPI 3.1 document', schema: z.looseObject({}) } },
    },
  ];
}

/**
 * `GET /openapi.json`: the document, built once, on the first request. Building it turns every
 * schema into JSON Schema, most of the time an app takes to make, which a service started for a
 * test should not pay before it is asked.
 */
export function openApiRoute(build: () => OpenApiDocument): RequestHandler {
  let document: OpenApiDocument | undefined;
  return (_req, res) => {
    document ??= build();
    res.json(document);
  };
}

/** `/jobs/:id/finish` → `/jobs/{id}/finish`. */
export function openApiPath(expressPath: string): string {
  return expressPath.replace(/:(\w+)/g, '{$1}');
}

function operation(op: OperationDoc, service: ServiceDoc, schemas: SchemaSet): Json {
  const parameters: Json[] = [];
  for (const [name, schema] of Object.entries(op.params ?? {})) {
    parameters.push({ name, in: 'path', required: true, schema: schemas.of(schema, 'input') });
  }
  for (const [name, schema] of Object.entries(op.query?.shape ?? {})) {
    const field = schema as z.ZodType;
    // A query value arrives as text and is coerced: the output side says what it must come to.
    parameters.push({
      name,
      in: 'query',
      required: !field.safeParse(undefined).success,
      schema: schemas.of(field, 'output'),
    });
  }
  for (const [name, header] of Object.entries(op.headers ?? {})) {
    parameters.push({
      name,
      in: 'header',
      required: header.required,
      description: header.description,
      schema: schemas.of(header.schema, 'input'),
    });
  }
  const codes = new Set([...ALWAYS, ...(op.errors ?? [])]);
  if (op.body || op.params || op.query) codes.add('invalid_request');
  if (op.body) for (const code of WITH_BODY) codes.add(code);
  if (service.bearer && !op.open) codes.add('unauthorized');

  const responses: Json = {};
  for (const [status, answer] of Object.entries(op.responses)) responses[status] = response(answer, schemas);
  for (const [status, list] of errorsByStatus([...codes], service.errorStatus)) {
    responses[String(status)] = {
      description: list.join(', '),
      content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
    };
  }
  return {
    summary: op.summary,
    ...(op.description ? { description: op.description } : {}),
    operationId: operationId(op),
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(op.body
      ? { requestBody: { required: true, content: { 'application/json': { schema: schemas.of(op.body, 'input') } } } }
      : {}),
    responses,
    ...(service.bearer && op.open ? { security: [] } : {}),
  };
}

function response(answer: ResponseDoc, schemas: SchemaSet): Json {
  const headers = Object.fromEntries(
    Object.entries(answer.headers ?? {}).map(([name, description]) => [
      name,
      { description, schema: { type: 'string' } },
    ]),
  );
  const content = answer.schema
    ? { [answer.mediaType ?? 'application/json']: { schema: schemas.of(answer.schema, 'output') } }
    : answer.mediaType
      ? { [answer.mediaType]: { schema: { type: 'string' } } }
      : undefined;
  return {
    description: answer.description,
    ...(Object.keys(headers).length > 0 ? { headers } : {}),
    ...(content ? { content } : {}),
  };
}

/** The codes grouped by their status, in status order; a code missing from the table is a mistake. */
function errorsByStatus(codes: string[], table: Readonly<Record<string, number>>): Array<[number, string[]]> {
  const byStatus = new Map<number, string[]>();
  for (const code of codes) {
    const status = table[code];
    if (status === undefined) throw new Error(`error code "${code}" is not in the service's table`);
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  return [...byStatus].sort(([a], [b]) => a - b);
}

/** `POST /jobs/:id/finish` → `postJobsIdFinish`. */
function operationId(op: OperationDoc): string {
  const words = op.path.split(/[^A-Za-z0-9]+/).filter(Boolean);
  return op.method + words.map((w) => w[0]!.toUpperCase() + w.slice(1)).join('');
}

/** Field alternatives an object's refinement requires, which zod cannot carry into JSON Schema itself. */
const REQUIRED_ALTERNATIVES = new WeakMap<object, ReadonlyArray<readonly string[]>>();

/**
 * Documents that `schema` (an object refined to need one of several fields) requires one of
 * `alternatives`: its JSON Schema gets `anyOf: [{required: [...]}, ...]`. Returns `schema`.
 */
export function requiresOneOf<T extends z.ZodType>(schema: T, alternatives: ReadonlyArray<readonly string[]>): T {
  REQUIRED_ALTERNATIVES.set(schema, alternatives);
  return schema;
}

/** The JSON Schema of `z.json()` with its self-reference written `#`: any JSON value. */
const JSON_VALUE = canonical(z.toJSONSchema(z.json()), '#');

/**
 * Converts zod schemas to JSON Schema for the document. The named components are referred to
 * as `#/components/schemas/<name>`; a JSON value (`payload`, `result`) is `{}`, which is every
 * value a JSON body can hold, instead of a recursive definition.
 */
class SchemaSet {
  private readonly registry = z.registry<{ id: string }>();
  private readonly names: ReadonlySet<string>;
  private readonly components = new Map<string, Json>();

  constructor(components: Readonly<Record<string, z.ZodType>>) {
    for (const [id, schema] of Object.entries(components)) this.registry.add(schema, { id });
    this.names = new Set(Object.keys(components));
  }

  of(schema: z.ZodType, io: 'input' | 'output'): Json {
    const converted = z.toJSONSchema(schema, {
      io,
      metadata: this.registry,
      unrepresentable: 'any',
      override: (ctx) => {
        const alternatives = REQUIRED_ALTERNATIVES.get(ctx.zodSchema);
        if (alternatives) ctx.jsonSchema.anyOf = alternatives.map((required) => ({ required: [...required] }));
      },
    }) as Json;
    const { $schema: _dialect, $defs, ...root } = converted;
    const defs = ($defs ?? {}) as Record<string, Json>;
    const isJsonValue = (name: string) => {
      const def = defs[name];
      return def !== undefined && canonical(def, `#/$defs/${name}`) === JSON_VALUE;
    };
    const rewrite = (node: unknown): unknown => {
      if (Array.isArray(node)) return node.map(rewrite);
      if (node === null || typeof node !== 'object') return node;
      const ref = (node as Json).$ref;
      if (typeof ref === 'string' && ref.startsWith('#/$defs/')) {
        const name = ref.slice('#/$defs/'.length);
        if (isJsonValue(name)) return { description: 'any JSON value' };
        if (!this.names.has(name)) {
          throw new Error(`a schema refers to "${name}", which is neither a named component nor a JSON value`);
        }
        return { $ref: `#/components/schemas/${name}` };
      }
      return Object.fromEntries(Object.entries(node).map(([key, value]) => [key, rewrite(value)]));
    };
    for (const [name, def] of Object.entries(defs)) {
      if (!isJsonValue(name)) this.components.set(name, rewrite(def) as Json);
    }
    return rewrite(root) as Json;
  }

  named(): Record<string, Json> {
    return Object.fromEntries([...this.components].sort(([a], [b]) => a.localeCompare(b)));
  }
}

/** `schema` as text with its self-reference (`selfRef`) written `#`, for comparing definitions. */
function canonical(schema: unknown, selfRef: string): string {
  const { $schema: _dialect, ...rest } = schema as Json;
  return JSON.stringify(rest).split(JSON.stringify(selfRef)).join('"#"');
}
