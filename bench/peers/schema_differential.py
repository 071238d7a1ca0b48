#!/usr/bin/env python3
"""schema_differential.py — differential test of tern's JSON-Schema grammars against the
`jsonschema` validator, on instances `hypothesis-jsonschema` generates.

For each schema (the realistic tool-parameter schemas below, plus every `schema` of
tests/data/grammar/schemas/*.json), valid instances are generated, checked with jsonschema,
serialized the ways a model writes JSON, and walked token by token through `tern grammar check`
(the same path generation takes: mask, accept, completion at the end). Every valid instance tern
refuses is a bug in tern (or a documented restriction: see docs/constrained-decoding-limits.md).

Shapes tern's grammar admits (README "Constrained decoding"): properties in schema order
(instances are reordered so), extra keys after the declared ones; whitespace per --ws: minified
(no spaces), compact (", " and ": ", what json.dumps prints), one-line (either). Each instance is
checked as minified under --ws minified and one-line, and as json.dumps prints it under compact,
both with ensure_ascii on and off.

The reverse check (cheap mutations of valid instances that jsonschema rejects must be refused by
tern) runs with --reverse.

A dev tool, not part of `make test`: every bug it found is a C regression test in tests/.

    python3 -m venv /work/wt-gram-venv
    /work/wt-gram-venv/bin/pip install jsonschema "hypothesis<6.131" hypothesis-jsonschema
    (hypothesis-jsonschema 0.23 calls an internal newer hypothesis removed: many.more)
    /work/wt-gram-venv/bin/python bench/peers/schema_differential.py --tern build/bin/tern \\
        --vocab ../shared/fixtures/tokenizer/ggml-vocab-qwen2-tiktoken.gguf [--n 60] [--reverse]
"""
import argparse
import copy
import glob
import json
import math
import os
import random
import re
import subprocess
from decimal import Decimal
import sys
import tempfile
import warnings

import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import NonInteractiveExampleWarning
from hypothesis_jsonschema import from_schema

warnings.simplefilter("ignore", NonInteractiveExampleWarning)

S = "string"
I = "integer"
N = "number"

# Tool parameter schemas in the shapes real tools publish (MCP servers, OpenAI function specs).
TOOLS = {
    "inventory_adjust": {
        "type": "object",
        "properties": {
            "sku": {"type": S, "pattern": "^[A-Z]{3}-[0-9]{4}$"},
            "quantity": {"type": I, "minimum": 0, "maximum": 100000},
            "reason": {"type": S, "enum": ["restock", "sale", "damage", "audit"]},
            "unit_price": {"type": N, "minimum": 0, "multipleOf": 0.01},
        },
        "required": ["sku", "quantity"],
        "additionalProperties": False,
    },
    "cart_add": {
        "type": "object",
        "properties": {
            "product_id": {"type": I, "minimum": 1},
            "quantity": {"type": I, "minimum": 0},
            "gift": {"type": "boolean"},
        },
        "required": ["product_id", "quantity"],
    },
    "solve_linear": {
        "type": "object",
        "properties": {
            "matrix": {"type": "array", "minItems": 1, "maxItems": 1,
                       "items": {"type": "array", "minItems": 1, "maxItems": 1, "items": {"type": N}}},
            "rhs": {"type": "array", "minItems": 1, "maxItems": 1, "items": {"type": N}},
            "tolerance": {"type": N, "exclusiveMinimum": 0},
            "max_iter": {"type": I, "minimum": 1, "maximum": 100000},
        },
        "required": ["matrix", "rhs"],
        "additionalProperties": False,
    },
    "optimize": {
        "type": "object",
        "properties": {
            "learning_rate": {"type": N, "exclusiveMinimum": 0, "maximum": 1},
            "epsilon": {"type": N, "minimum": 0, "maximum": 0.1},
            "weight_decay": {"type": N, "minimum": 0},
            "momentum": {"type": N, "minimum": 0, "exclusiveMaximum": 1},
            "temperature": {"type": N, "minimum": -273.15},
            "scale": {"type": N, "minimum": 1e-9, "maximum": 1e9},
        },
        "required": ["learning_rate"],
    },
    "dns_create_record": {
        "type": "object",
        "properties": {
            "zone": {"type": S, "format": "hostname"},
            "record": {
                "oneOf": [
                    {"type": "object", "properties": {
                        "type": {"const": "A"}, "name": {"type": S, "format": "hostname"},
                        "address": {"type": S, "format": "ipv4"}, "ttl": {"type": I, "minimum": 0}},
                     "required": ["type", "name", "address"], "additionalProperties": False},
                    {"type": "object", "properties": {
                        "type": {"const": "MX"}, "name": {"type": S, "format": "hostname"},
                        "exchange": {"type": S, "pattern": "^([a-z0-9-]+\\.)+[a-z]{2,}\\.?$"},
                        "priority": {"type": I, "minimum": 0, "maximum": 65535},
                        "ttl": {"type": I, "minimum": 0}},
                     "required": ["type", "name", "exchange", "priority"], "additionalProperties": False},
                    {"type": "object", "properties": {
                        "type": {"const": "TXT"}, "name": {"type": S}, "value": {"type": S, "maxLength": 255}},
                     "required": ["type", "name", "value"], "additionalProperties": False},
                ]
            },
        },
        "required": ["zone", "record"],
    },
    "dns_lookup": {
        "type": "object",
        "properties": {
            "domain": {"type": S, "format": "hostname"},
            "record_type": {"type": S, "enum": ["A", "AAAA", "MX", "TXT", "CNAME", "NS", "SOA", "SRV"]},
            "resolver": {"type": S, "format": "ipv4"},
        },
        "required": ["domain"],
    },
    "mx_record": {
        "type": "object",
        "properties": {
            "host": {"type": S, "pattern": "^[a-zA-Z0-9.-]+$"},
            "priority": {"type": I, "minimum": 0},
            "target": {"type": S, "pattern": "\\."},
        },
        "required": ["host", "priority", "target"],
    },
    "write_file": {
        "type": "object",
        "properties": {
            "path": {"type": S, "minLength": 1, "maxLength": 4096},
            "content": {"type": S, "maxLength": 40000},
            "mode": {"type": S, "enum": ["overwrite", "append"]},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    },
    "batch_ids": {
        "type": "object",
        "properties": {
            "ids": {"type": "array", "items": {"type": I, "minimum": 0}, "maxItems": 100000},
            "labels": {"type": "array", "items": {"type": S, "maxLength": 64}, "minItems": 0, "maxItems": 5000},
        },
        "required": ["ids"],
    },
    "long_note": {
        "type": "object",
        "properties": {"note": {"type": S, "minLength": 3, "maxLength": 20000}},
        "required": ["note"],
    },
    "phone_search": {
        "type": "object",
        "properties": {
            "phone": {"type": S, "pattern": "[0-9]{3}-[0-9]{4}"},
            "zip": {"type": S, "pattern": "^[0-9]{5}(-[0-9]{4})?$"},
            "code": {"type": S, "pattern": "[A-Z]{2,4}"},
            "slug": {"type": S, "pattern": "^[a-z0-9]+(?:-[a-z0-9]+)*$"},
        },
        "required": ["phone"],
    },
    "schedule": {
        "type": "object",
        "properties": {
            "title": {"type": S, "minLength": 1, "maxLength": 200},
            "start": {"type": S, "format": "date-time"},
            "day": {"type": S, "format": "date"},
            "at": {"type": S, "format": "time"},
            "attendees": {"type": "array", "items": {"type": S, "format": "email"}, "uniqueItems": False},
            "id": {"type": S, "format": "uuid"},
            "duration_minutes": {"type": I, "minimum": 0, "maximum": 1440, "multipleOf": 15},
        },
        "required": ["title", "start"],
    },
    "http_call": {
        "type": "object",
        "properties": {
            "url": {"type": S, "format": "uri"},
            "method": {"type": S, "enum": ["GET", "POST", "PUT", "DELETE", "PATCH"]},
            "headers": {"type": "object", "additionalProperties": {"type": S}},
            "timeout": {"type": N, "exclusiveMinimum": 0, "maximum": 300},
            "retries": {"type": I, "minimum": 0, "maximum": 10},
            "body": {"anyOf": [{"type": S}, {"type": "object"}, {"type": "null"}]},
        },
        "required": ["url"],
    },
    "search": {
        "type": "object",
        "properties": {
            "query": {"type": S, "minLength": 1},
            "limit": {"type": I, "minimum": 1, "maximum": 100},
            "offset": {"type": I, "minimum": 0},
            "filters": {"type": "object", "properties": {
                "lang": {"type": S, "pattern": "^[a-z]{2}$"},
                "after": {"type": S, "format": "date"},
                "min_score": {"type": N, "minimum": 0, "maximum": 1}},
                "additionalProperties": False},
            "sort": {"type": ["string", "null"], "enum": ["relevance", "date", None]},
        },
        "required": ["query"],
    },
    "geo": {
        "type": "object",
        "properties": {
            "lat": {"type": N, "minimum": -90, "maximum": 90},
            "lon": {"type": N, "minimum": -180, "maximum": 180},
            "radius_km": {"type": N, "exclusiveMinimum": 0, "maximum": 20000},
            "precision": {"type": N, "multipleOf": 0.5},
        },
        "required": ["lat", "lon"],
    },
    "payment": {
        "type": "object",
        "properties": {
            "amount": {"type": N, "exclusiveMinimum": 0, "multipleOf": 0.01},
            "currency": {"type": S, "pattern": "^[A-Z]{3}$"},
            "method": {"oneOf": [
                {"type": "object", "properties": {"kind": {"const": "card"}, "last4": {"type": S, "pattern": "^[0-9]{4}$"}},
                 "required": ["kind", "last4"], "additionalProperties": False},
                {"type": "object", "properties": {"kind": {"const": "bank"}, "iban": {"type": S, "minLength": 15, "maxLength": 34}},
                 "required": ["kind", "iban"], "additionalProperties": False}]},
        },
        "required": ["amount", "currency", "method"],
    },
    "tags": {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": S, "enum": ["a", "b", "c", "d"]}, "uniqueItems": True, "maxItems": 4},
            "meta": {"type": "object", "minProperties": 1, "maxProperties": 3, "additionalProperties": {"type": I}},
        },
    },
    "nested_grid": {
        "type": "object",
        "properties": {
            "grid": {"type": "array", "minItems": 1, "maxItems": 3, "items": {
                "type": "array", "minItems": 1, "maxItems": 3, "items": {"type": I, "minimum": -5, "maximum": 5}}},
            "weights": {"type": "array", "items": {"type": N, "minimum": 0, "maximum": 1}},
        },
        "required": ["grid"],
    },
    "small_numbers": {
        "type": "object",
        "properties": {
            "a": {"type": N, "minimum": 0.001, "maximum": 0.01},
            "b": {"type": N, "exclusiveMaximum": 0},
            "c": {"type": N, "minimum": -1, "maximum": 1},
            "d": {"type": N, "minimum": 100, "exclusiveMaximum": 1e6},
            "e": {"type": I, "exclusiveMinimum": -1, "maximum": 0},
            "f": {"type": N, "maximum": 0},
        },
    },
    "run_code": {
        "type": "object",
        "properties": {
            "language": {"type": S, "enum": ["python", "javascript", "bash"]},
            "code": {"type": S, "minLength": 1, "maxLength": 100000},
            "args": {"type": "array", "items": {"type": S}, "maxItems": 1000},
            "timeout_s": {"type": N, "exclusiveMinimum": 0},
        },
        "required": ["language", "code"],
    },
    "ticket": {
        "type": "object",
        "properties": {
            "key": {"type": S, "pattern": "[A-Z][A-Z0-9]+-[0-9]+"},
            "summary": {"type": S, "minLength": 1, "maxLength": 255},
            "priority": {"type": I, "minimum": 0, "maximum": 4},
            "labels": {"type": "array", "items": {"type": S, "pattern": "^[a-z][a-z0-9_-]{0,31}$"}, "maxItems": 10},
            "estimate": {"type": ["number", "null"], "minimum": 0},
        },
        "required": ["summary"],
    },
}


def schema_order(value, schema, root):
    """Reorder object keys to the schema's property order (extras after), recursively."""
    if isinstance(schema, dict) and "$ref" in schema and schema["$ref"].startswith("#"):
        node = root
        for part in schema["$ref"][2:].split("/") if schema["$ref"] != "#" else []:
            node = node[part.replace("~1", "/").replace("~0", "~")]
        schema = node
    if not isinstance(schema, dict):
        return value
    for key in ("anyOf", "oneOf"):
        if key in schema:
            for sub in schema[key]:
                try:
                    jsonschema.validate(value, {**sub, **{k: v for k, v in root.items() if k in ("$defs", "definitions")}})
                except jsonschema.ValidationError:
                    continue
                except Exception:
                    continue
                return schema_order(value, {**{k: v for k, v in schema.items() if k != key}, **sub}, root)
    if "allOf" in schema:
        merged = {k: v for k, v in schema.items() if k != "allOf"}
        for sub in schema["allOf"]:
            for k, v in sub.items():
                if k == "properties":
                    merged.setdefault("properties", {}).update(v)
                else:
                    merged.setdefault(k, v)
        schema = merged
    if isinstance(value, dict):
        props = schema.get("properties", {})
        out = {}
        for k in props:
            if k in value:
                out[k] = schema_order(value[k], props[k], root)
        addl = schema.get("additionalProperties", {})
        for k in value:
            if k not in props:
                out[k] = schema_order(value[k], addl if isinstance(addl, dict) else {}, root)
        return out
    if isinstance(value, list):
        pre = schema.get("prefixItems") or (schema["items"] if isinstance(schema.get("items"), list) else [])
        rest = schema.get("items") if isinstance(schema.get("items"), dict) else schema.get("additionalItems", {})
        return [schema_order(v, pre[i] if i < len(pre) else (rest or {}), root) for i, v in enumerate(value)]
    return value


def ecma_validator(schema):
    """jsonschema with JSON Schema's own semantics where Python's differ: `pattern` is an ECMA-262
    regex (\\d is [0-9], \\w is [A-Za-z0-9_], not Unicode's), `multipleOf` is exact decimal
    arithmetic (124.85000000000001 is no multiple of 0.01, though its float quotient rounds to
    12485.0)."""
    base = jsonschema.validators.validator_for(schema)

    def pattern(validator, patrn, instance, schema):
        if validator.is_type(instance, "string") and not re.search(patrn, instance, re.ASCII):
            yield jsonschema.ValidationError(f"{instance!r} does not match {patrn!r}")

    def multiple_of(validator, db, instance, schema):
        if not validator.is_type(instance, "number") or isinstance(instance, bool):
            return
        q = Decimal(repr(instance)) / Decimal(repr(db))
        if q != q.to_integral_value():
            yield jsonschema.ValidationError(f"{instance!r} is not a multiple of {db}")

    cls = jsonschema.validators.extend(base, {"pattern": pattern, "multipleOf": multiple_of})
    return cls(schema, format_checker=jsonschema.FormatChecker())


def gen(schema, n, seed):
    got = []

    @settings(max_examples=n, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(from_schema(schema))
    def collect(v):
        got.append(v)

    collect()
    random.Random(seed).shuffle(got)
    return got


def finite(v):
    if isinstance(v, float):
        return math.isfinite(v)
    if isinstance(v, dict):
        return all(finite(x) for x in v.values())
    if isinstance(v, list):
        return all(finite(x) for x in v)
    return True


def within_caps(v):
    """tern bounds a number's digits (docs/constrained-decoding-limits.md): 21 before the point, 24
    after, 3 in an exponent; hypothesis writes 40-digit integers no model or serializer would."""
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return True
    if isinstance(v, (int, float)):
        t = json.dumps(v).lstrip("-")
        mant, _, exp = t.replace("E", "e").partition("e")
        ip, _, fp = mant.partition(".")
        return len(ip) <= 21 and len(fp) <= 24 and len(exp.lstrip("+-")) <= 3
    if isinstance(v, dict):
        return all(within_caps(x) for x in v.values())
    return all(within_caps(x) for x in v)


STYLES = [  # (--ws, separators, ensure_ascii)
    ("minified", (",", ":"), False),
    ("one-line", (",", ":"), False),
    ("one-line", (", ", ": "), False),
    ("compact", (", ", ": "), False),
]
# json.dumps' default \uXXXX for every non-ASCII character (--ascii): tern admits escapes in any
# string whose content is free; inside `pattern`/`format` strings a character that needs no
# escape is written raw (docs/constrained-decoding-limits.md)
ASCII_STYLES = [
    ("minified", (",", ":"), True),
    ("compact", (", ", ": "), True),
]


def positional(v, seps):
    """v serialized as json.dumps would, but every float without an exponent (1e+16 ->
    10000000000000000.0): a document tern refuses only in its exponent form meets a documented
    restriction (scientific notation under multipleOf), not a bug."""
    if isinstance(v, float):
        t = format(Decimal(repr(v)), "f")
        return t if "." in t else t + ".0"
    if isinstance(v, dict):
        return "{" + seps[0].join(json.dumps(k, ensure_ascii=False) + seps[1] + positional(x, seps) for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + seps[0].join(positional(x, seps) for x in v) + "]"
    return json.dumps(v, ensure_ascii=False)


def tern_check(args, schema, ws, docs):
    """[(accept, reason)] per doc, or raises with the compile error."""
    with tempfile.TemporaryDirectory() as d:
        sp = os.path.join(d, "s.json")
        dp = os.path.join(d, "docs.jsonl")
        with open(sp, "w") as f:
            json.dump(schema, f)
        with open(dp, "w") as f:
            for doc in docs:
                f.write(json.dumps(doc) + "\n")
        r = subprocess.run([args.tern, "grammar", "check", "-m", args.vocab, "--json-schema", sp, "--ws", ws,
                            "--json-lines", dp], capture_output=True, text=True)
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
        if len(lines) != len(docs):
            raise RuntimeError((r.stderr or r.stdout).strip())
        return [(json.loads(ln)["accept"], json.loads(ln).get("reason", "")) for ln in lines]


def mutate(v, rnd):
    """A nearby document (may or may not stay valid: jsonschema decides)."""
    v = copy.deepcopy(v)
    paths = []

    def walk(x, p):
        paths.append(p)
        if isinstance(x, dict):
            for k in x:
                walk(x[k], p + [k])
        elif isinstance(x, list):
            for i, y in enumerate(x):
                walk(y, p + [i])

    walk(v, [])
    p = rnd.choice(paths)
    parent = None
    x = v
    for k in p:
        parent, x = x, x[k]
    choice = rnd.randrange(8)
    if isinstance(x, bool) or x is None:
        new = rnd.choice([0, "x", True, None])
    elif isinstance(x, int):
        new = rnd.choice([x - 1, x + 1, -x - 1, x * 10 + 7, 0, -1, x + 0.5])
    elif isinstance(x, float):
        new = rnd.choice([x * 2, -x, x + 1e-3, 0.0, -1e-12, x * 1e6])
    elif isinstance(x, str):
        new = rnd.choice([x + "x", x[:-1], "", x + "." , "A" + x, x * 3, x.upper()])
    elif isinstance(x, list):
        new = x + x[:1] if choice % 2 and x else x[:-1]
    else:
        if x and choice % 2:
            k = rnd.choice(list(x))
            new = {kk: vv for kk, vv in x.items() if kk != k}
        else:
            new = dict(x)
            new["zz_extra"] = 1
    if not p:
        return new
    parent[p[-1]] = new
    return v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tern", default="build/bin/tern")
    ap.add_argument("--vocab", default=os.path.join(os.path.dirname(__file__), "../../../shared/fixtures/tokenizer/ggml-vocab-qwen2-tiktoken.gguf"))
    ap.add_argument("--n", type=int, default=60, help="instances per schema")
    ap.add_argument("--only", help="comma-separated schema names")
    ap.add_argument("--no-repo", action="store_true", help="skip tests/data/grammar/schemas")
    ap.add_argument("--reverse", action="store_true", help="also check mutated invalid documents")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ascii", action="store_true", help="also serialize with ensure_ascii (\\uXXXX escapes)")
    args = ap.parse_args()

    schemas = dict(TOOLS)
    if not args.no_repo:
        here = os.path.dirname(os.path.abspath(__file__))
        for p in sorted(glob.glob(os.path.join(here, "../../tests/data/grammar/schemas/*.json"))):
            with open(p) as f:
                schemas[os.path.basename(p)[:-5]] = json.load(f)["schema"]
    if args.only:
        keep = set(args.only.split(","))
        schemas = {k: v for k, v in schemas.items() if k in keep}

    rnd = random.Random(args.seed)
    n_docs = n_bad = n_rev = n_rev_bad = n_caps = n_expo = 0
    refused_schemas = []
    for name, schema in schemas.items():
        try:
            inst = [v for v in gen(schema, args.n, args.seed) if finite(v)]
        except Exception as e:  # hypothesis-jsonschema cannot generate for some keywords
            print(f"# {name}: no instances ({type(e).__name__}: {str(e)[:100]})")
            continue
        v = ecma_validator(schema)
        inst = [schema_order(x, schema, schema) for x in inst if v.is_valid(x)]
        n_caps += sum(1 for x in inst if not within_caps(x))
        inst = [x for x in inst if within_caps(x)]
        for ws, seps, ascii_ in STYLES + (ASCII_STYLES if args.ascii else []):
            docs = [json.dumps(x, separators=seps, ensure_ascii=ascii_) for x in inst]
            try:
                res = tern_check(args, schema, ws, docs)
            except RuntimeError as e:
                refused_schemas.append((name, str(e)))
                print(f"REFUSED {name}: {e}")
                break
            bad = [(x, doc, why) for x, doc, (ok, why) in zip(inst, docs, res) if not ok]
            n_docs += len(docs)
            if bad and not ascii_:
                pos = [positional(x, seps) for x, _, _ in bad]
                again = tern_check(args, schema, ws, pos)
                # accepted positionally, or too long for the digit caps positionally (3.98e+35)
                known = [ok or re.search(r"\d{22}", p) is not None for p, (ok, _) in zip(pos, again)]
                n_expo += sum(known)
                bad = [b for b, k in zip(bad, known) if not k]
            for x, doc, why in bad:
                n_bad += 1
                print(f"REJECTED-VALID {name} --ws {ws}: {doc}\n    {why}")
        if args.reverse and inst:
            bad = []
            for x in inst:
                for _ in range(3):
                    m = mutate(x, rnd)
                    if not v.is_valid(m) and finite(m):
                        bad.append(json.dumps(m, separators=(",", ":")))
            try:
                res = tern_check(args, schema, "minified", bad) if bad else []
            except RuntimeError:
                res = []
            for doc, (ok, _) in zip(bad, res):
                n_rev += 1
                if ok:
                    n_rev_bad += 1
                    print(f"ACCEPTED-INVALID {name}: {doc}")
        print(f"# {name}: {len(inst)} instances", flush=True)
    print(f"\n{n_docs} valid documents checked, {n_bad} rejected ({n_caps} instances beyond the digit caps skipped, "
          f"{n_expo} refused only in exponent form under multipleOf); "
          f"{len(refused_schemas)} schemas refused; {n_rev} invalid documents checked, {n_rev_bad} accepted")
    return 1 if n_bad or refused_schemas or n_rev_bad else 0


if __name__ == "__main__":
    sys.exit(main())
