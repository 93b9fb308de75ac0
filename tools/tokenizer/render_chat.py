#!/usr/bin/env python3
"""Independent reference for statebank's chat rendering: renders a checkpoint's
own Jinja chat template with the jinja2 library, configured the way Hugging
Face transformers' apply_chat_template configures it (sandboxed environment,
trim_blocks, lstrip_blocks, loop controls, a tojson filter that calls
json.dumps(ensure_ascii=False), raise_exception).

    render_chat.py TEMPLATE_SOURCE [--arguments-as-objects] < cases.json > rendered.jsonl

TEMPLATE_SOURCE is a model directory (chat_template.jinja, else the
chat_template of tokenizer_config.json) or a .jinja file. cases.json is a list
of {"messages", "tools", "add_generation_prompt", "enable_thinking"}; one JSON
line is printed per case: {"text": ...} or {"error": ...}.
Tool-call arguments arrive as JSON text, as in OpenAI requests; with
--arguments-as-objects those that are a JSON object text are parsed into the
object first (what servers, statebank's included, do for templates that
iterate over the arguments, such as Qwen3.5's).
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "jinja"))
from render import make_env  # noqa: E402 - the environment Hugging Face uses


def load_template(src):
    if os.path.isdir(src):
        jinja = os.path.join(src, "chat_template.jinja")
        if os.path.exists(jinja):
            return open(jinja, encoding="utf-8").read()
        cfg = json.load(open(os.path.join(src, "tokenizer_config.json"), encoding="utf-8"))
        t = cfg["chat_template"]
        if isinstance(t, list):
            t = next(e["template"] for e in t if e.get("name") == "default")
        return t
    return open(src, encoding="utf-8").read()


def main():
    env = make_env()
    template = env.from_string(load_template(sys.argv[1]))
    as_objects = "--arguments-as-objects" in sys.argv[2:]
    for case in json.load(sys.stdin):
        if as_objects:
            for m in case["messages"]:
                for c in m.get("tool_calls") or []:
                    args = c["function"]["arguments"]
                    if isinstance(args, str):
                        try:
                            parsed = json.loads(args or "{}")
                        except ValueError:
                            parsed = None
                        if isinstance(parsed, dict):
                            c["function"]["arguments"] = parsed
        kwargs = {"messages": case["messages"], "add_generation_prompt": case.get("add_generation_prompt", False)}
        if case.get("tools"):  # an empty list counts as none, as in statebank
            kwargs["tools"] = case["tools"]
        if case.get("enable_thinking") is not None:
            kwargs["enable_thinking"] = case["enable_thinking"]
        try:
            print(json.dumps({"text": template.render(**kwargs)}, ensure_ascii=False))
        except Exception as e:  # the template refused the conversation
            print(json.dumps({"error": str(e)}, ensure_ascii=False))


if __name__ == "__main__":
    main()
