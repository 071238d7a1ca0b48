# corpus_valswap.py — give the argument values of a tool-calling corpus fresh stand-ins per
# conversation, so a model trained on it must copy values from the request instead of recalling
# them from the corpus's small pools.
#
#   python3 scripts/corpus_valswap.py IN.jsonl OUT.jsonl SEED FRACTION
#
# Why: the generator draws values from pools (58 message bodies, 39 subjects, 69 cities ...),
# and run 2 of models/tern-tool.gguf learned the pools: asked to e-mail ana@example.com about
# "Lunch", it sent "Q3 numbers" to Pria@example.com. In a FRACTION of the conversations (drawn
# with SEED), every string argument of a call that occurs verbatim in the user's messages gets a
# stand-in of the same shape, the same stand-in everywhere in the conversation (requests, calls,
# tool results, answers):
#   - e-mail addresses: a new local part and domain from the corpus's words;
#   - values with digits (IDs, codes, phone numbers): each digit a random digit, each letter a
#     random letter of the same case, separators kept;
#   - text: each word a random word of the corpus's requests with the same capitalization,
#     punctuation and emoji kept.
# Integer arguments of 2+ digits written once in the requests get a random number of as many
# digits. Enum values, dates and times, and values shorter than 3 characters stay (they are
# normalized, not copied); system prompts stay (their secrets must not move into answers).
import json, random, re, sys

WORD = re.compile(r'[^\W\d_]+')
DATE_OR_TIME = re.compile(r'^\d{4}-\d{2}-\d{2}([T ].*)?$|^\d{1,2}:\d{2}(:\d{2})?$')


def main():
    src, dst, seed, frac = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    rng = random.Random(seed)
    lines = open(src, encoding='utf-8').read().splitlines()
    pool = word_pool(lines)
    out = open(dst, 'w', encoding='utf-8')
    n_swapped = n_values = 0
    for l in lines:
        if rng.random() >= frac:
            out.write(l + '\n')
            continue
        d = json.loads(l)
        forms = stand_ins(d, pool, rng)
        if not forms:
            out.write(l + '\n')
            continue
        n_swapped += 1
        n_values += len(forms)
        apply(d, forms)
        out.write(json.dumps(d, ensure_ascii=False, separators=(',', ':')) + '\n')
    print('swapped', n_values, 'values in', n_swapped, 'of', len(lines), 'conversations',
          file=sys.stderr)


def word_pool(lines):
    """words of 3+ letters from the users' requests, lower case, by how they are written"""
    pool = set()
    for l in lines:
        for m in json.loads(l)['messages']:
            if m['role'] == 'user' and isinstance(m.get('content'), str):
                pool.update(w.lower() for w in WORD.findall(m['content']) if len(w) >= 3)
    return sorted(pool)


def call_values(d):
    """(value, tool schema of its parameter) for every argument of every call, nested ones too"""
    schemas = {t['function']['name']: t['function'].get('parameters', {}) for t in d['tools']}
    for m in d['messages']:
        for tc in m.get('tool_calls') or []:
            fn = tc['function']
            try:
                args = json.loads(fn['arguments'])
            except (ValueError, TypeError):
                continue
            yield from walk(args, schemas.get(fn['name'], {}))


def walk(v, schema):
    schema = schema if isinstance(schema, dict) else {}
    if isinstance(v, dict):
        props = schema.get('properties') or {}
        for k, x in v.items():
            yield from walk(x, props.get(k, {}))
    elif isinstance(v, list):
        for x in v:
            yield from walk(x, schema.get('items', {}))
    else:
        yield v, schema


def stand_ins(d, pool, rng):
    """old text -> new text for the values this conversation copies from its requests"""
    said = '\n'.join(m['content'] for m in d['messages']
                     if m['role'] == 'user' and isinstance(m.get('content'), str))
    forms = {}
    for v, schema in call_values(d):
        if isinstance(v, bool) or v in forms or 'enum' in schema:
            continue
        if isinstance(v, str):
            if len(v) < 3 or DATE_OR_TIME.match(v) or v not in said:
                continue
            new = new_string(v, pool, rng)
        elif isinstance(v, int) and abs(v) >= 10:
            s = str(abs(v))
            if len(re.findall(r'(?<![\d.,])' + s + r'(?![\d.,])', said)) != 1:
                continue
            new = str(rng.randint(10 ** (len(s) - 1), 10 ** len(s) - 1))
            forms[s] = new
            continue
        else:
            continue
        if new != v:
            forms[v] = new
    return forms


def new_string(v, pool, rng):
    if re.fullmatch(r'[^@\s]+@[^@\s]+\.[A-Za-z]{2,}', v):
        local = rng.choice(pool) + rng.choice(['.', '_', '']) + rng.choice(pool)
        return local + '@' + rng.choice(pool) + '.' + rng.choice(['com', 'org', 'net', 'example'])
    if re.search(r'\d', v):
        return ''.join(rng.choice('0123456789') if c.isdigit() else
                       rng.choice('ABCDEFGHIJKLMNOPQRSTUVWXYZ') if 'A' <= c <= 'Z' else
                       rng.choice('abcdefghijklmnopqrstuvwxyz') if 'a' <= c <= 'z' else c
                       for c in v)
    return WORD.sub(lambda m: cased(rng.choice(pool), m.group(0)), v)


def cased(new, like):
    if like.isupper() and len(like) > 1:
        return new.upper()
    if like[0].isupper():
        return new[0].upper() + new[1:]
    return new


def apply(d, forms):
    keys = sorted(forms, key=len, reverse=True)
    # numbers swap whole (no digit or separator around them), text anywhere it occurs
    rx = re.compile('|'.join(r'(?<![\d.,])' + re.escape(k) + r'(?![\d.,])' if k.isdigit()
                             else re.escape(k) for k in keys))

    def sub(s):
        return rx.sub(lambda m: forms[m.group(0)], s)

    def values(v):
        if isinstance(v, bool):
            return v
        if isinstance(v, str):
            return sub(v)
        if isinstance(v, int) and str(abs(v)) in forms:
            return int(forms[str(abs(v))]) * (1 if v >= 0 else -1)
        if isinstance(v, list):
            return [values(x) for x in v]
        if isinstance(v, dict):
            return {k: values(x) for k, x in v.items()}
        return v

    for m in d['messages']:
        if m['role'] != 'system' and isinstance(m.get('content'), str):
            m['content'] = sub(m['content'])
        for tc in m.get('tool_calls') or []:
            fn = tc['function']
            fn['arguments'] = json.dumps(values(json.loads(fn['arguments'])), ensure_ascii=False,
                                         separators=(',', ':'))


if __name__ == '__main__':
    main()
