/**
 * The API types in tokens.ts are the server's openapi.yaml: every property the spec has is in
 * the type and vice versa, required where the spec requires it, nullable where it may be null,
 * of the same kind (string, number, boolean, array, object), with the same enum values.
 * The types are read from the source with the TypeScript compiler API.
 */
import * as fs from 'fs';
import * as yaml from 'js-yaml';
import * as path from 'path';
import * as ts from 'typescript';

import { PRIORITIES, SUBMIT_FIELDS } from '../tokens';

const SPEC_PATH = path.resolve(
  __dirname,
  '../../../jupyter_gpusched/server/openapi.yaml'
);
const TOKENS_PATH = path.resolve(__dirname, '../tokens.ts');

type Schema = { [key: string]: any };

const spec = yaml.load(fs.readFileSync(SPEC_PATH, 'utf8')) as Schema;
const source = ts.createSourceFile(
  TOKENS_PATH,
  fs.readFileSync(TOKENS_PATH, 'utf8'),
  ts.ScriptTarget.Latest,
  true
);

const interfaces = new Map<string, ts.InterfaceDeclaration>();
const aliases = new Map<string, ts.TypeAliasDeclaration>();
source.forEachChild(node => {
  if (ts.isInterfaceDeclaration(node)) {
    interfaces.set(node.name.text, node);
  } else if (ts.isTypeAliasDeclaration(node)) {
    aliases.set(node.name.text, node);
  }
});

/** A schema with `$ref`s followed and `allOf` merged (nullable kept from the outer schema). */
function resolve(schema: Schema): Schema {
  if (schema.$ref) {
    const parts = (schema.$ref as string).replace(/^#\//, '').split('/');
    const target = parts.reduce((node: Schema, key) => node[key], spec);
    return { ...resolve(target), ...omit(schema, '$ref') };
  }
  if (schema.allOf) {
    const merged: Schema = { properties: {}, required: [] };
    for (const part of (schema.allOf as Schema[]).map(resolve)) {
      Object.assign(merged, omit(part, 'properties', 'required'));
      Object.assign(merged.properties, part.properties ?? {});
      merged.required.push(...(part.required ?? []));
    }
    if (Object.keys(merged.properties).length === 0) {
      delete merged.properties;
    }
    return { ...merged, ...omit(schema, 'allOf') };
  }
  return schema;
}

function omit(schema: Schema, ...keys: string[]): Schema {
  const out = { ...schema };
  for (const key of keys) {
    delete out[key];
  }
  return out;
}

/** The members of an interface, its `extends` included. */
function members(name: string): Map<string, ts.PropertySignature> {
  const decl = interfaces.get(name);
  if (!decl) {
    throw new Error(`no interface ${name} in tokens.ts`);
  }
  const out = new Map<string, ts.PropertySignature>();
  for (const clause of decl.heritageClauses ?? []) {
    for (const base of clause.types) {
      members(base.expression.getText(source)).forEach((v, k) => out.set(k, v));
    }
  }
  for (const member of decl.members) {
    if (ts.isPropertySignature(member)) {
      out.set(member.name.getText(source), member);
    }
  }
  return out;
}

/** The type without `| null`, and whether `null` was in it. */
function stripNull(type: ts.TypeNode): [ts.TypeNode[], boolean] {
  const parts = ts.isUnionTypeNode(type) ? [...type.types] : [type];
  const rest = parts.filter(
    t =>
      !(ts.isLiteralTypeNode(t) && t.literal.kind === ts.SyntaxKind.NullKeyword)
  );
  return [rest, rest.length !== parts.length];
}

/** String literal values of a union (following type aliases), or null if it is not one. */
function literals(parts: ts.TypeNode[]): string[] | null {
  const values: string[] = [];
  for (const part of parts) {
    if (ts.isLiteralTypeNode(part) && ts.isStringLiteral(part.literal)) {
      values.push(part.literal.text);
    } else if (
      ts.isTypeReferenceNode(part) &&
      aliases.has(part.typeName.getText(source))
    ) {
      const alias = aliases.get(part.typeName.getText(source))!;
      const inner = literals(stripNull(alias.type)[0]);
      if (inner === null) {
        return null;
      }
      values.push(...inner);
    } else {
      return null;
    }
  }
  return values;
}

/** Compare one TypeScript type with one schema; push every difference to `problems`. */
function compareType(
  where: string,
  type: ts.TypeNode,
  raw: Schema,
  problems: string[]
): void {
  const schema = resolve(raw);
  if (ts.isParenthesizedTypeNode(type)) {
    type = type.type; // (string | INotifyTarget)[]
  }
  const [parts, nullable] = stripNull(type);
  if (nullable !== Boolean(schema.nullable)) {
    problems.push(
      `${where}: the spec says ${schema.nullable ? '' : 'not '}nullable, the type ${nullable ? 'has' : 'has no'} | null`
    );
  }
  const text = parts.map(p => p.getText(source)).join(' | ');
  if (schema.enum) {
    const values = literals(parts);
    const want = [...(schema.enum as string[])].sort();
    if (values === null || [...values].sort().join() !== want.join()) {
      problems.push(
        `${where}: the spec's values are ${want.join(', ')}, the type is ${text}`
      );
    }
    return;
  }
  if (schema.oneOf) {
    // one member of the union per alternative, in the spec's order
    const alternatives = schema.oneOf as Schema[];
    if (parts.length !== alternatives.length) {
      problems.push(
        `${where}: the spec has ${alternatives.length} alternatives, the type is ${text}`
      );
      return;
    }
    parts.forEach((p, i) =>
      compareType(`${where}|${i}`, p, alternatives[i], problems)
    );
    return;
  }
  if (parts.length !== 1) {
    problems.push(`${where}: a union (${text}) for a ${schema.type}`);
    return;
  }
  const node = parts[0];
  switch (schema.type) {
    case 'string':
    case 'boolean':
      if (node.kind !== keyword(schema.type)) {
        problems.push(
          `${where}: the spec says ${schema.type}, the type is ${text}`
        );
      }
      return;
    case 'integer':
    case 'number':
      if (node.kind !== ts.SyntaxKind.NumberKeyword) {
        problems.push(
          `${where}: the spec says ${schema.type}, the type is ${text}`
        );
      }
      return;
    case 'array':
      if (ts.isArrayTypeNode(node)) {
        compareType(`${where}[]`, node.elementType, schema.items, problems);
      } else if (ts.isTupleTypeNode(node)) {
        if (
          node.elements.length !== schema.minItems ||
          node.elements.length !== schema.maxItems
        ) {
          problems.push(
            `${where}: a tuple of ${node.elements.length}, the spec says ${schema.minItems} to ${schema.maxItems} items`
          );
        }
        node.elements.forEach((e, i) =>
          compareType(`${where}[${i}]`, e, schema.items, problems)
        );
      } else {
        problems.push(`${where}: the spec says array, the type is ${text}`);
      }
      return;
    case 'object':
      compareObject(where, node, schema, problems);
      return;
    default:
      problems.push(`${where}: no check for spec type ${schema.type}`);
  }
}

function keyword(type: 'string' | 'boolean'): ts.SyntaxKind {
  return type === 'string'
    ? ts.SyntaxKind.StringKeyword
    : ts.SyntaxKind.BooleanKeyword;
}

function compareObject(
  where: string,
  node: ts.TypeNode,
  schema: Schema,
  problems: string[]
): void {
  const name = ts.isTypeReferenceNode(node)
    ? node.typeName.getText(source)
    : null;
  if (name === 'Record') {
    const [, value] = (node as ts.TypeReferenceNode).typeArguments ?? [];
    if (schema.properties) {
      problems.push(`${where}: a Record for an object with named properties`);
    } else if (
      schema.additionalProperties &&
      value.kind !== ts.SyntaxKind.UnknownKeyword
    ) {
      compareType(`${where}{}`, value, schema.additionalProperties, problems);
    }
    return;
  }
  let props: Map<string, ts.PropertySignature>;
  if (name !== null && interfaces.has(name)) {
    props = members(name);
  } else if (ts.isTypeLiteralNode(node)) {
    props = new Map(
      node.members
        .filter(ts.isPropertySignature)
        .map(m => [m.name.getText(source), m])
    );
  } else {
    problems.push(
      `${where}: the spec says object, the type is ${node.getText(source)}`
    );
    return;
  }
  compareProperties(where, props, schema, problems);
}

function compareProperties(
  where: string,
  props: Map<string, ts.PropertySignature>,
  schema: Schema,
  problems: string[]
): void {
  const specProps = (schema.properties ?? {}) as Record<string, Schema>;
  const required = new Set<string>(schema.required ?? []);
  for (const key of Object.keys(specProps)) {
    const prop = props.get(key);
    if (!prop) {
      problems.push(`${where}.${key}: in the spec, not in the type`);
      continue;
    }
    if (required.has(key) === Boolean(prop.questionToken)) {
      problems.push(
        `${where}.${key}: the spec says ${required.has(key) ? 'required' : 'optional'}`
      );
    }
    compareType(`${where}.${key}`, prop.type!, specProps[key], problems);
  }
  for (const key of props.keys()) {
    if (!(key in specProps)) {
      problems.push(`${where}.${key}: in the type, not in the spec`);
    }
  }
}

function check(typeName: string, schema: Schema): string[] {
  const problems: string[] = [];
  compareProperties(typeName, members(typeName), resolve(schema), problems);
  return problems;
}

const paths = spec.paths as Schema;
const ok = (p: string, method = 'get', status = '200'): Schema =>
  paths[p][method].responses[status].content['application/json'].schema;
const schemas = spec.components.schemas as Schema;

describe('tokens.ts against openapi.yaml', () => {
  it.each([
    ['IJob', schemas.Job],
    ['IJobDetail', schemas.JobDetail],
    ['IJobSubmit', schemas.JobSubmit],
    ['IApiErrorBody', schemas.Error],
    ['IJobList', ok('/gpusched/api/jobs')],
    [
      'IJobEvent',
      ok('/gpusched/api/jobs/{job_id}/events').properties.events.items
    ],
    ['IQueues', ok('/gpusched/api/queues')],
    ['ICluster', ok('/gpusched/api/cluster')],
    ['IMe', ok('/gpusched/api/me')]
  ])('%s has every property of the spec and no other', (name, schema) => {
    expect(check(name, schema)).toEqual([]);
  });

  it('IJobFilter is the job list query', () => {
    const params = paths['/gpusched/api/jobs'].get.parameters as Schema[];
    const schema = {
      type: 'object',
      properties: Object.fromEntries(params.map(p => [p.name, p.schema])),
      required: []
    };
    expect(check('IJobFilter', schema)).toEqual([]);
  });

  it('the priorities and the submit fields are the spec’s, in its order', () => {
    expect(PRIORITIES).toEqual(schemas.JobSubmit.properties.priority.enum);
    expect(SUBMIT_FIELDS).toEqual(Object.keys(schemas.JobSubmit.properties));
    const settings = JSON.parse(
      fs.readFileSync(
        path.resolve(__dirname, '../../schema/plugin.json'),
        'utf8'
      )
    );
    expect(settings.properties.defaultPriority.enum).toEqual(PRIORITIES);
    expect(settings.properties.defaultPriority.default).toEqual(
      schemas.JobSubmit.properties.priority.default
    );
  });

  it('finds a difference where there is one', () => {
    const schema = {
      type: 'object',
      required: ['name', 'admin', 'extra'],
      properties: {
        name: { type: 'string', nullable: true },
        admin: { type: 'integer' },
        extra: { type: 'string' },
        tenants: { type: 'array', items: { type: 'string' } }
      }
    };
    expect(check('IMe', schema)).toEqual([
      'IMe.name: the spec says nullable, the type has no | null',
      'IMe.admin: the spec says integer, the type is boolean',
      'IMe.extra: in the spec, not in the type',
      'IMe.tenants: the spec says optional',
      'IMe.default_tenant: in the type, not in the spec'
    ]);
  });
});
