// Independent check of constrained outputs: each {schema, output} of the
// JSON file given as argv[2] is parsed with JSON.parse and validated with
// ajv (a JSON Schema validator nobody here wrote). Prints one JSON line per
// case: {"valid": true} or {"valid": false, "why": ...}.
import { readFileSync } from 'node:fs';
import Ajv from '../npm/node_modules/ajv/dist/ajv.js';

const ajv = new Ajv.default({ strict: false, allErrors: false });
for (const { schema, output } of JSON.parse(readFileSync(process.argv[2], 'utf8'))) {
  let value;
  try {
    value = JSON.parse(output);
  } catch (e) {
    console.log(JSON.stringify({ valid: false, why: 'JSON.parse: ' + e.message }));
    continue;
  }
  const validate = ajv.compile(schema);
  const valid = validate(value);
  console.log(JSON.stringify(valid ? { valid: true } : { valid: false, why: ajv.errorsText(validate.errors) }));
}
