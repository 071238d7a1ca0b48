# corpus_rename.py — rename tools and parameters per conversation of a tool-calling corpus, so a
# model trained on it cannot recall names and must copy them from the prompt (the tools' JSON).
#
#   python3 scripts/corpus_rename.py IN.jsonl OUT.jsonl SEED FRACTION
#
# In a FRACTION of the conversations (drawn with SEED), every tool gets a new snake_case name of
# 2-3 words drawn from the words of all tool names in IN, and each top-level parameter (with
# probability 0.6) a new name of 1-2 words from the words of all parameter names; the tools'
# schemas ("properties" keys, "required"), the assistant's calls (name, argument keys) and any
# message text naming a tool are rewritten consistently. This is the exact transform behind
# the second training stage of models/tern-tool.gguf (models/README.md).
import json, random, sys, re
src, dst, seed, frac = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
rng = random.Random(seed)
lines = open(src, encoding='utf-8').read().splitlines()
name_words, key_words = set(), set()
for l in lines:
    d = json.loads(l)
    for t in d['tools']:
        name_words.update(t['function']['name'].split('_'))
        for k in t['function']['parameters'].get('properties', {}):
            key_words.update(k.split('_'))
name_words = sorted(w for w in name_words if w.isalpha()); key_words = sorted(w for w in key_words if w.isalpha())
def new_name(pool, n_lo, n_hi, used):
    for _ in range(100):
        s = '_'.join(rng.choice(pool) for _ in range(rng.randint(n_lo, n_hi)))
        if s not in used: used.add(s); return s
    s = s + '_' + str(rng.randint(2, 99)); used.add(s); return s
out = open(dst, 'w', encoding='utf-8')
n_ren = 0
for l in lines:
    d = json.loads(l)
    if rng.random() >= frac:
        out.write(l + '\n'); continue
    n_ren += 1
    used = set(); tmap = {}; kmap = {}
    for t in d['tools']:
        f = t['function']; old = f['name']
        nn = new_name(name_words, 2, 3, used); tmap[old] = nn; f['name'] = nn
        props = f['parameters'].get('properties', {})
        km = {}; kused = set()
        for k in list(props):
            km[k] = new_name(key_words, 1, 2, kused) if rng.random() < 0.6 else k
            kused.add(km[k])
        if len(set(km.values())) != len(km): km = {k: k for k in props}
        f['parameters']['properties'] = {km[k]: v for k, v in props.items()}
        if 'required' in f['parameters']:
            f['parameters']['required'] = [km.get(k, k) for k in f['parameters']['required']]
        kmap[nn] = km
    for m in d['messages']:
        for tc in m.get('tool_calls') or []:
            fn = tc['function']; nn = tmap.get(fn['name'], fn['name']); fn['name'] = nn
            km = kmap.get(nn, {})
            if any(km.get(k, k) != k for k in km):
                a = json.loads(fn['arguments'])
                if isinstance(a, dict):
                    fn['arguments'] = json.dumps({km.get(k, k): v for k, v in a.items()}, separators=(',', ':'), ensure_ascii=False)
        c = m.get('content')
        if isinstance(c, str):
            for old, nn in tmap.items():
                c = re.sub(r'\b' + re.escape(old) + r'\b', nn, c)
            m['content'] = c
    out.write(json.dumps(d, ensure_ascii=False, separators=(',', ':')) + '\n')
print('renamed', n_ren, 'of', len(lines), file=sys.stderr)
