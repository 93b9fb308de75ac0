#!/usr/bin/env python3
"""Independent reference for statebank's Jinja interpreter (jinja/): renders
templates with Python's jinja2, in the environment Hugging Face transformers
uses for chat templates (ImmutableSandboxedEnvironment, trim_blocks,
lstrip_blocks, loop controls, tojson = json.dumps(ensure_ascii=False),
raise_exception).

    render.py < cases.json > rendered.jsonl

cases.json is a list of {"template": SOURCE, "context": {...}}; one JSON line
is printed per case: {"text": ...}, or {"error": ...} when jinja2 refuses to
parse or render it.
"""
import json
import sys

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def main():
    env = make_env()
    for case in json.load(sys.stdin):
        try:
            text = env.from_string(case["template"]).render(**case.get("context", {}))
            print(json.dumps({"text": text}, ensure_ascii=False))
        except Exception as e:  # noqa: BLE001 - any refusal is an answer
            print(json.dumps({"error": "%s: %s" % (type(e).__name__, e)}, ensure_ascii=False))


if __name__ == "__main__":
    main()
