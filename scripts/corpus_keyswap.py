# corpus_keyswap.py — swap the key words of tools per conversation of a tool-calling corpus, so a
# model trained on it cannot pick a tool by recalling which request goes with which tool and must
# match the words of the request against the offered tools' names and descriptions.
#
#   python3 scripts/corpus_keyswap.py IN.jsonl OUT.jsonl SEED FRACTION
#
# Why: a model trained on the plain corpus learns its train tools by heart (run 2 of
# models/tern-tool.gguf at step 4000: exact arguments 61 % on the val split's seen tools, 14 %
# on the test split's unseen ones). In a FRACTION of the conversations (drawn with SEED), the
# words of every tool's name after its verb ("events" in search_events) get a stand-in drawn
# from the same part of all tool names in IN, the same stand-in everywhere in the
# conversation: tool names, descriptions, enum values, the messages (requests, answers, tool
# results) and the calls' names and string arguments. The request then still names what it
# wants ("list gadgets near Marrakech", search_gadgets: "Find gadgets near a location."), but only
# reading the offered tools tells which one that is. A word is matched whole, in lower case,
# capitalized or upper case, in its singular and plural forms. Parameter names are left alone
# (corpus_rename.py changes those). Conversations whose tools share no swappable word are
# copied unchanged.
import json, random, re, sys

VERBS = {'get', 'fetch', 'list', 'find', 'search', 'create', 'add', 'schedule', 'check', 'set',
         'update', 'delete', 'remove', 'cancel', 'send', 'book', 'buy', 'make', 'start', 'stop',
         'open', 'close', 'lookup', 'look', 'show', 'read', 'write', 'run', 'track', 'convert',
         'calculate', 'compute', 'estimate', 'translate', 'detect', 'post', 'reply', 'share',
         'upload', 'download', 'order', 'pay', 'request', 'submit', 'record', 'log', 'lock',
         'unlock', 'turn', 'play', 'pause', 'resume', 'rename', 'move', 'copy', 'zip', 'archive'}


def main():
    src, dst, seed, frac = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    rng = random.Random(seed)
    lines = open(src, encoding='utf-8').read().splitlines()
    pool = set()
    for l in lines:
        for t in json.loads(l)['tools']:
            pool.update(w for w in t['function']['name'].split('_')[1:] if w.isalpha() and len(w) >= 4)
    pool = sorted(pool - VERBS)
    out = open(dst, 'w', encoding='utf-8')
    n_swapped = 0
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
        sub = substituter(forms)
        apply(d, sub)
        out.write(json.dumps(d, ensure_ascii=False, separators=(',', ':')) + '\n')
    print('swapped', n_swapped, 'of', len(lines), file=sys.stderr)


def stand_ins(d, pool, rng):
    """surface form -> stand-in, for the non-verb words of every offered tool's name (singular
    and plural forms both, so "event" and "events" become "gadget" and "gadgets")."""
    words = []
    for t in d['tools']:
        for w in t['function']['name'].split('_')[1:]:  # names are verb_object: keep the verb
            if w.isalpha() and len(w) >= 3 and w not in VERBS and w not in words:
                words.append(w)
    taken = {singular(w) for w in words}
    forms = {}
    for w in words:
        for _ in range(50):
            r = singular(rng.choice(pool))
            if r not in taken:
                break
        else:
            continue
        taken.add(r)
        if singular(w) != w:
            forms[w], forms[singular(w)] = plural(r), r
        else:
            forms[w], forms[plural(w)] = r, plural(r)
    return forms


def is_plural(w):
    return len(w) > 3 and w.endswith('s') and not w.endswith(('ss', 'us', 'is'))


def singular(w):
    if not is_plural(w):
        return w
    return w[:-3] + 'y' if w.endswith('ies') else w[:-1]


def plural(w):
    if is_plural(w):
        return w
    if w.endswith('y') and w[-2:-1] not in 'aeiou':
        return w[:-1] + 'ies'
    return w + 'es' if w.endswith(('s', 'x', 'ch', 'sh')) else w + 's'


def substituter(forms):
    keys = sorted(forms, key=len, reverse=True)
    rx = re.compile(r'(?<![A-Za-z])(' + '|'.join(re.escape(k) for k in keys) + r')(?![A-Za-z])',
                    re.IGNORECASE)

    def one(m):
        word = m.group(1)
        new = forms[word.lower()]
        if word.isupper() and len(word) > 1:
            return new.upper()
        if word[0].isupper():
            return new[0].upper() + new[1:]
        return new

    def sub(s):
        # snake_case names swap part by part: search_events -> search_gadgets
        if re.fullmatch(r'[a-z0-9_]+', s) and '_' in s:
            return '_'.join(forms.get(p, p) for p in s.split('_'))
        return rx.sub(one, s)
    return sub


def apply(d, sub):
    for t in d['tools']:
        f = t['function']
        f['name'] = sub(f['name'])
        f['description'] = sub(f.get('description', ''))
        swap_schema(f.get('parameters', {}), sub)
    for m in d['messages']:
        if isinstance(m.get('content'), str):
            m['content'] = sub(m['content'])
        for tc in m.get('tool_calls') or []:
            fn = tc['function']
            fn['name'] = sub(fn['name'])
            args = json.loads(fn['arguments'])
            fn['arguments'] = json.dumps(swap_values(args, sub), ensure_ascii=False,
                                         separators=(',', ':'))


def swap_schema(s, sub):
    if not isinstance(s, dict):
        return
    if isinstance(s.get('description'), str):
        s['description'] = sub(s['description'])
    if isinstance(s.get('enum'), list):
        s['enum'] = [sub(v) if isinstance(v, str) else v for v in s['enum']]
    for v in (s.get('properties') or {}).values():
        swap_schema(v, sub)
    if isinstance(s.get('items'), dict):
        swap_schema(s['items'], sub)


def swap_values(v, sub):
    if isinstance(v, str):
        return sub(v)
    if isinstance(v, list):
        return [swap_values(x, sub) for x in v]
    if isinstance(v, dict):
        return {k: swap_values(x, sub) for k, x in v.items()}
    return v


if __name__ == '__main__':
    main()
