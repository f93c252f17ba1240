// A small JSON Schema validator for the common keywords (what structured output uses): type, enum, const,
// properties/required/additionalProperties, items/minItems/maxItems, string lengths and pattern, number bounds,
// anyOf/oneOf/allOf and local $ref (#/$defs/… or #/definitions/…). Unknown keywords are ignored, as the
// spec says. Each error names the JSON path where the answer broke the schema.

const MAX_DEPTH = 64;

function typeOf(value) {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return typeof value;
}

function typeMatches(value, type) {
  const actual = typeOf(value);
  return actual === type || (type === "number" && actual === "integer");
}

function equal(a, b) {
  return JSON.stringify(a) === JSON.stringify(b);
}

function resolve(root, ref) {
  if (typeof ref !== "string" || !ref.startsWith("#")) return null;
  let node = root;
  for (const raw of ref.slice(1).split("/").filter(Boolean)) {
    const key = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    if (!node || typeof node !== "object" || !(key in node)) return null;
    node = node[key];
  }
  return node;
}

/** Validate `value` against `schema`; returns a list of {path, message} (empty when valid). */
export function validate(value, schema) {
  const errors = [];
  check(value, schema, "$", schema, errors, 0);
  return errors;
}

function check(value, schema, path, root, errors, depth) {
  if (schema === true || schema === undefined) return;
  if (schema === false) {
    errors.push({ path, message: "no value is allowed here" });
    return;
  }
  if (!schema || typeof schema !== "object") return;
  if (depth > MAX_DEPTH) {
    errors.push({ path, message: `schema nesting deeper than ${MAX_DEPTH} (a $ref loop?)` });
    return;
  }
  if (schema.$ref !== undefined) {
    const target = resolve(root, schema.$ref);
    if (target === null) errors.push({ path, message: `cannot resolve $ref ${schema.$ref}` });
    else check(value, target, path, root, errors, depth + 1);
  }
  const t = schema.type;
  if (t !== undefined) {
    const types = Array.isArray(t) ? t : [t];
    if (!types.some((one) => typeMatches(value, one))) {
      errors.push({ path, message: `expected ${types.join(" or ")}, got ${typeOf(value)}` });
      return;
    }
  }
  if (Array.isArray(schema.enum) && !schema.enum.some((e) => equal(e, value))) {
    errors.push({ path, message: `must be one of ${schema.enum.map((e) => JSON.stringify(e)).join(", ")}` });
  }
  if ("const" in schema && !equal(schema.const, value)) {
    errors.push({ path, message: `must equal ${JSON.stringify(schema.const)}` });
  }
  const kind = typeOf(value);
  if (kind === "string") strings(value, schema, path, errors);
  if (kind === "number" || kind === "integer") numbers(value, schema, path, errors);
  if (kind === "array") arrays(value, schema, path, root, errors, depth);
  if (kind === "object") objects(value, schema, path, root, errors, depth);
  combinators(value, schema, path, root, errors, depth);
}

function strings(value, schema, path, errors) {
  const length = [...value].length;
  if (Number.isInteger(schema.minLength) && length < schema.minLength) {
    errors.push({ path, message: `shorter than ${schema.minLength} characters` });
  }
  if (Number.isInteger(schema.maxLength) && length > schema.maxLength) {
    errors.push({ path, message: `longer than ${schema.maxLength} characters` });
  }
  if (typeof schema.pattern === "string") {
    let re = null;
    try {
      re = new RegExp(schema.pattern, "u");
    } catch {
      errors.push({ path, message: `the schema's pattern ${schema.pattern} is not a valid regular expression` });
    }
    if (re && !re.test(value)) errors.push({ path, message: `does not match pattern ${schema.pattern}` });
  }
}

function numbers(value, schema, path, errors) {
  if (typeof schema.minimum === "number" && value < schema.minimum) {
    errors.push({ path, message: `less than the minimum ${schema.minimum}` });
  }
  if (typeof schema.maximum === "number" && value > schema.maximum) {
    errors.push({ path, message: `greater than the maximum ${schema.maximum}` });
  }
  if (typeof schema.exclusiveMinimum === "number" && value <= schema.exclusiveMinimum) {
    errors.push({ path, message: `must be greater than ${schema.exclusiveMinimum}` });
  }
  if (typeof schema.exclusiveMaximum === "number" && value >= schema.exclusiveMaximum) {
    errors.push({ path, message: `must be less than ${schema.exclusiveMaximum}` });
  }
  if (typeof schema.multipleOf === "number" && schema.multipleOf > 0) {
    const q = value / schema.multipleOf;
    if (Math.abs(q - Math.round(q)) > 1e-9) errors.push({ path, message: `not a multiple of ${schema.multipleOf}` });
  }
}

function arrays(value, schema, path, root, errors, depth) {
  if (Number.isInteger(schema.minItems) && value.length < schema.minItems) {
    errors.push({ path, message: `fewer than ${schema.minItems} items` });
  }
  if (Number.isInteger(schema.maxItems) && value.length > schema.maxItems) {
    errors.push({ path, message: `more than ${schema.maxItems} items` });
  }
  const prefix = Array.isArray(schema.prefixItems) ? schema.prefixItems : [];
  value.forEach((item, i) => {
    const sub = i < prefix.length ? prefix[i] : schema.items;
    if (sub !== undefined) check(item, sub, `${path}[${i}]`, root, errors, depth + 1);
  });
  if (schema.uniqueItems === true) {
    const seen = new Set(value.map((item) => JSON.stringify(item)));
    if (seen.size !== value.length) errors.push({ path, message: "items are not unique" });
  }
}

function objects(value, schema, path, root, errors, depth) {
  const props = schema.properties && typeof schema.properties === "object" ? schema.properties : {};
  for (const name of Array.isArray(schema.required) ? schema.required : []) {
    if (!(name in value)) errors.push({ path, message: `missing required property "${name}"` });
  }
  for (const [name, item] of Object.entries(value)) {
    const where = /^[A-Za-z_$][\w$]*$/.test(name) ? `${path}.${name}` : `${path}[${JSON.stringify(name)}]`;
    if (name in props) check(item, props[name], where, root, errors, depth + 1);
    else if (schema.additionalProperties === false) {
      errors.push({ path: where, message: "property not allowed by the schema (additionalProperties: false)" });
    } else if (schema.additionalProperties && typeof schema.additionalProperties === "object") {
      check(item, schema.additionalProperties, where, root, errors, depth + 1);
    }
  }
  const count = Object.keys(value).length;
  if (Number.isInteger(schema.minProperties) && count < schema.minProperties) {
    errors.push({ path, message: `fewer than ${schema.minProperties} properties` });
  }
  if (Number.isInteger(schema.maxProperties) && count > schema.maxProperties) {
    errors.push({ path, message: `more than ${schema.maxProperties} properties` });
  }
}

function combinators(value, schema, path, root, errors, depth) {
  const passes = (sub) => {
    const found = [];
    check(value, sub, path, root, found, depth + 1);
    return found;
  };
  if (Array.isArray(schema.allOf)) for (const sub of schema.allOf) errors.push(...passes(sub));
  if (Array.isArray(schema.anyOf) && !schema.anyOf.some((sub) => passes(sub).length === 0)) {
    errors.push({ path, message: "matches none of anyOf" });
  }
  if (Array.isArray(schema.oneOf)) {
    const matching = schema.oneOf.filter((sub) => passes(sub).length === 0).length;
    if (matching !== 1) errors.push({ path, message: `matches ${matching} of oneOf (exactly one required)` });
  }
  if (schema.not !== undefined && passes(schema.not).length === 0) {
    errors.push({ path, message: "matches the schema under not" });
  }
}

/** Parse the pasted schema text: {schema} or {error} saying where it is not JSON / not an object. */
export function parseSchema(text) {
  const trimmed = text.trim();
  if (!trimmed) return { schema: null };
  let schema;
  try {
    schema = JSON.parse(trimmed);
  } catch (err) {
    return { error: `the schema is not valid JSON: ${err.message}` };
  }
  if (!schema || typeof schema !== "object" || Array.isArray(schema)) {
    return { error: "the schema must be a JSON object" };
  }
  return { schema };
}

/** Parse and validate a structured answer: {value, errors} or {parseError}. */
export function checkAnswer(text, schema) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { parseError: `the answer is not valid JSON: ${err.message}` };
  }
  return { value, errors: validate(value, schema) };
}
