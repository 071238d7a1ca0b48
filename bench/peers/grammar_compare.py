#!/usr/bin/env python3
"""grammar_compare.py — tern's grammar-constrained decoding beside XGrammar and LLGuidance: the
same JSON schemas, the same vocabularies, the same documents; compile and mask times, which
schemas each engine supports, and whether the engines allow the same tokens at every step.

For each vocabulary (a GGUF; the peers get a Hugging Face tokenizer built from it by
gguf_hf.load_tokenizer) and each schema file ({"schema", "valid", ...}, tern's corpus
tests/data/grammar/schemas by default):

1. compile: tern from `tern grammar bench --json --cpu-clock` (median of --reps compiles, thread
   CPU time); the peers in this process, median of --reps fresh compiles in process CPU time
   (XGrammar with max_threads=1 and its cache off; LLGuidance's LLMatcher construction). A
   compile error means unsupported; the message is recorded.
2. walk: every "valid" document, minified (separators "," and ":", raw UTF-8), tokenized by tern
   (`tern tokenize`, checked against the peer's HF tokenizer), is walked token by token; at each
   step every engine computes its allowed-token mask, timed alone in thread CPU time (tern:
   `tern grammar check --masks --cpu-clock`; peers: around fill_next_token_bitmask /
   unsafe_compute_mask_ptr, so a Python call's overhead is in theirs: it is measured and
   reported). One thread throughout (RAYON_NUM_THREADS=1 for LLGuidance).
3. agreement: at every step where two engines support the schema and both are still walking,
   the allowed sets must be equal. tern's sets come as count + hash (`--masks`, docs/tools.md
   "Comparing masks"); the peers' are hashed the same way from their bitmasks. End of
   generation: both peers are given tern's end-of-generation ids as their stop tokens, and EOS
   tokens are compared apart (the count of allowed EOS ids) from the rest. A differing step is
   diagnosed from the concrete tokens (tern's through --mask-ids) and classified: "forced"
   (LLGuidance allows only the longest token of forced text), "special" (tokens one side
   counts as control), or "other", printed with the tokens' text.

Engines are configured to align where they can: whitespace none and separators "," ":" (tern
--ws minified, XGrammar any_whitespace=False separators=(",", ":"), LLGuidance
whitespace_flexible=False, item/key separators); additionalProperties absent means allowed, as
the spec says (tern's default, XGrammar strict_mode=False, LLGuidance's default); the model's
control tokens are special for XGrammar (its from_huggingface reads them as text).

Output: one JSON line per (vocabulary, engine) on stdout (bench/peers/run.sh makes tables of
those); per-schema details and disagreements on stderr; --table FILE writes the Markdown table;
--table-from FILE prints the table of earlier JSON lines.

usage: grammar_compare.py --tern build/bin/tern [--schemas GLOB] [--reps 5] [--table FILE]
                          MODEL.gguf ...
(run it with the peers' virtualenv: xgrammar, llguidance, transformers, tokenizers, gguf, torch.)
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_hf import load_tokenizer  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_SCHEMAS = os.path.join(HERE, "..", "..", "tests", "data", "grammar", "schemas", "*.json")
PEERS = ("xgrammar", "llguidance")
DIAGNOSE_PER_SCHEMA = 32  # tern's full id lists fetched per schema (one tern run); the rest: "undiagnosed"


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def pct(v, p):
    """Nearest-rank percentile, as tern's bench."""
    if not v:
        return None
    v = sorted(v)
    k = max(1, min(len(v), int(p * len(v) + 0.999999)))
    return v[k - 1]


def median(v):
    return pct(v, 0.5)


# ---- hashing: the definition of `tern grammar check --masks` ----

def id_hashes(n):
    """splitmix64's finalizer of every id 0..n-1; a set's hash is the sum modulo 2^64."""
    with np.errstate(over="ignore"):
        z = np.arange(n, dtype=np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


class Vocab:
    def __init__(self, tern, path):
        self.path = path
        self.name = os.path.basename(path)
        t0 = time.perf_counter()
        self.hf, self.pre = load_tokenizer(path)
        self.hf_load_s = time.perf_counter() - t0
        # tern's view: vocabulary size and end-of-generation ids (the --masks header)
        with tempfile.TemporaryDirectory() as d:
            s, doc, m = (os.path.join(d, x) for x in ("s.json", "d.txt", "m.jsonl"))
            open(s, "w").write('{"type": "integer"}')
            open(doc, "w").write("1\n")
            subprocess.run([tern, "grammar", "check", "-m", path, "--json-schema", s, "--masks", m, doc],
                           check=True, capture_output=True)
            head = json.loads(open(m).readline())
        self.n_vocab = head["n_vocab"]
        self.eog = head["eog"]
        self.H = id_hashes(self.n_vocab)
        self.is_eog = np.zeros(self.n_vocab, dtype=bool)
        self.is_eog[self.eog] = True
        # tokens the HF tokenizer counts as special (added tokens marked special)
        self.special = sorted(i for i, t in self.hf.added_tokens_decoder.items() if t.special and i < self.n_vocab)
        self.special_set = set(self.special)
        self.llg_tok = None

    def piece(self, i):
        if self.llg_tok is not None:
            b = self.llg_tok.decode_bytes([int(i)])
            if b[:1] == b"\xff":  # LLGuidance's marker of a special token
                return "<special " + b[1:].decode("utf-8", "replace") + ">"
            return b.decode("utf-8", "backslashreplace")
        return self.hf.convert_ids_to_tokens(int(i))

    def token_bytes(self, i):
        return self.llg_tok.decode_bytes([int(i)]) if self.llg_tok is not None else b""


def summarize(bits, vocab):
    """(count of non-EOS ids, hash of them, count of EOS ids) from a bool array over the vocabulary."""
    eos = bits & vocab.is_eog
    rest = bits & ~vocab.is_eog
    with np.errstate(over="ignore"):
        h = int(vocab.H[rest].sum(dtype=np.uint64))
    return int(rest.sum()), h, int(eos.sum())


def unpack(words, n):
    return np.unpackbits(np.ascontiguousarray(words).view(np.uint8), bitorder="little")[:n].astype(bool)


# ---- engines ----

class Tern:
    name = "tern"

    def __init__(self, binary, reps):
        self.bin = binary
        self.reps = reps
        out = subprocess.run([binary, "version"], capture_output=True, text=True).stdout.split("\n")[0]
        self.version = out.replace("tern ", "").strip()
        git = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        if git.returncode == 0:
            self.version += " (" + git.stdout.strip() + ")"

    def compile(self, vocab, schema_path, docs_path):
        """compile ms (median of reps) or raises RuntimeError(message)."""
        r = subprocess.run([self.bin, "grammar", "bench", "-m", vocab.path, "--json-schema", schema_path,
                            "--ws", "minified", "--docs", docs_path, "--reps", str(self.reps), "--cpu-clock",
                            "--json"], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(r.stderr.strip().split("\n")[-1])
        return json.loads(r.stdout)["compile_ms"]

    def walk(self, vocab, schema_path, docs_path, work):
        """Per document: {"tokens", "steps": [(n, hash, eos)], "us": [...], "accept"}."""
        mpath = os.path.join(work, "tern.masks")
        r = subprocess.run([self.bin, "grammar", "check", "-m", vocab.path, "--json-schema", schema_path,
                            "--ws", "minified", "--cpu-clock", "--masks", mpath, docs_path],
                           capture_output=True, text=True)
        if r.returncode not in (0,):
            raise RuntimeError(r.stderr.strip().split("\n")[-1])
        lines = open(mpath).read().splitlines()[1:]
        docs = []
        for line in lines:
            j = json.loads(line)
            docs.append({"tokens": j["tokens"], "accept": j["accept"], "us": j["us"],
                         "steps": [(n, int(h, 16), e) for n, h, e in zip(j["n"], j["hash"], j["eog"])]})
        return docs

    def ids_at(self, vocab, schema_path, docs_path, steps, work):
        """{(doc, step): bool array} of the allowed ids at those steps (0-based), in one run."""
        if not steps:
            return {}
        m = os.path.join(work, "ids.masks")
        subprocess.run([self.bin, "grammar", "check", "-m", vocab.path, "--json-schema", schema_path, "--ws",
                        "minified", "--masks", m, "--mask-ids", ",".join("%d:%d" % (d + 1, i) for d, i in steps),
                        docs_path], capture_output=True, check=True)
        out = {}
        for line in open(m).read().splitlines()[1:]:
            j = json.loads(line)
            for step, ids in j.get("ids", {}).items():
                bits = np.zeros(vocab.n_vocab, dtype=bool)
                bits[ids] = True
                out[(j["doc"] - 1, int(step))] = bits
        return out


class XGrammar:
    name = "xgrammar"

    def __init__(self, vocab, reps):
        import xgrammar as xgr
        from importlib.metadata import version
        self.xgr = xgr
        self.version = version("xgrammar")
        self.reps = reps
        t0 = time.perf_counter()
        base = xgr.TokenizerInfo.from_huggingface(vocab.hf, vocab_size=vocab.n_vocab, stop_token_ids=vocab.eog)
        # from_huggingface reads the GGUF-built tokenizer's added control tokens (<|endoftext|>,
        # <repo_name>, ...) as their text, so it would allow them inside strings: an empty entry
        # is XGrammar's way to say "special", as tern and LLGuidance treat them.
        enc = [""] * vocab.n_vocab
        for tok, i in vocab.hf.get_vocab().items():
            if i < vocab.n_vocab:
                enc[i] = tok
        for i in vocab.special:
            enc[i] = ""
        self.info = xgr.TokenizerInfo(enc, base.vocab_type, vocab_size=vocab.n_vocab, stop_token_ids=vocab.eog,
                                      add_prefix_space=base.add_prefix_space)
        self.vocab_s = time.perf_counter() - t0
        self.compiler = xgr.GrammarCompiler(self.info, max_threads=1, cache_enabled=False)
        self.bitmask = xgr.allocate_token_bitmask(1, vocab.n_vocab)

    def compile(self, schema_text):
        times, g = [], None
        for _ in range(self.reps):
            t0 = time.process_time()
            g = self.compiler.compile_json_schema(schema_text, any_whitespace=False, separators=(",", ":"),
                                                  strict_mode=False)
            times.append((time.process_time() - t0) * 1e3)
        return median(times), g

    def matcher(self, g):
        return self.xgr.GrammarMatcher(g)

    def reset(self, m, g):
        m.reset()
        return m

    def mask(self, m):
        t0 = time.thread_time_ns()
        m.fill_next_token_bitmask(self.bitmask)
        t1 = time.thread_time_ns()
        return (t1 - t0) / 1e3, self.bitmask[0].numpy()

    def accept(self, m, tok):
        return m.accept_token(tok)

    def forced(self, m):
        return b""

    def overhead_us(self, m):
        ts = []
        for _ in range(200):
            t0 = time.thread_time_ns()
            m.is_terminated()
            ts.append((time.thread_time_ns() - t0) / 1e3)
        return median(ts)


class LLGuidance:
    name = "llguidance"

    def __init__(self, vocab, reps):
        import llguidance
        import llguidance.hf
        from importlib.metadata import version
        self.llg = llguidance
        self.version = version("llguidance")
        self.reps = reps
        t0 = time.perf_counter()
        self.tok = llguidance.hf.from_tokenizer(vocab.hf, n_vocab=vocab.n_vocab, eos_token=vocab.eog)
        self.vocab_s = time.perf_counter() - t0
        vocab.llg_tok = self.tok
        self.words = (vocab.n_vocab + 31) // 32
        self.bitmask = np.zeros(self.words, dtype=np.int32)
        # \uXXXX for any character, as tern and XGrammar (by default only for controls)
        self.opts = {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":",
                     "json_allow_general_unicode_escapes": True}

    def compile(self, schema_text):
        times, m, g = [], None, None
        for _ in range(self.reps):
            t0 = time.process_time()
            g = self.llg.LLMatcher.grammar_from_json_schema(schema_text, defaults=self.opts)
            m = self.llg.LLMatcher(self.tok, g, log_level=0)
            times.append((time.process_time() - t0) * 1e3)
            if m.is_error():
                raise RuntimeError(m.get_error())
        return median(times), g

    def matcher(self, g):
        return self.llg.LLMatcher(self.tok, g, log_level=0)

    def reset(self, m, g):
        if m.is_error():  # a refused token leaves it in an error state for good
            return self.matcher(g)
        m.reset()
        return m

    def mask(self, m):
        ptr = self.bitmask.ctypes.data
        t0 = time.thread_time_ns()
        m.unsafe_compute_mask_ptr(ptr, self.words * 4)
        t1 = time.thread_time_ns()
        return (t1 - t0) / 1e3, self.bitmask

    def accept(self, m, tok):
        return m.consume_token(tok)

    def forced(self, m):
        return m.compute_ff_bytes()

    def overhead_us(self, m):
        ts = []
        for _ in range(200):
            t0 = time.thread_time_ns()
            m.is_accepting()
            ts.append((time.thread_time_ns() - t0) / 1e3)
        return median(ts)


def peer_walk(eng, g, vocab, docs_tokens):
    """Per document: steps (n, hash, eos), us, accept, bits (bool arrays), forced bytes."""
    out = []
    m = eng.matcher(g)
    for toks in docs_tokens:
        m = eng.reset(m, g)
        rec = {"steps": [], "us": [], "bits": [], "forced": [], "accept": True, "refused_at": None}
        for i in range(len(toks) + 1):
            us, words = eng.mask(m)
            bits = unpack(words, vocab.n_vocab)
            rec["us"].append(us)
            rec["bits"].append(bits)
            rec["steps"].append(summarize(bits, vocab))
            rec["forced"].append(eng.forced(m) if i < len(toks) else b"")
            if i == len(toks):
                break
            if not bits[toks[i]] or not eng.accept(m, toks[i]):
                rec["accept"] = False
                rec["refused_at"] = i
                break
        out.append(rec)
    return out


# ---- comparing ----

def in_escape(prefix):
    """Whether text ending in prefix (bytes) is inside a string escape (after '\\', or \\u + <4 hex)."""
    n = len(prefix) - len(prefix.rstrip(b"\\"))
    if n % 2 == 1:
        return True
    i = prefix.rfind(b"\\u")
    if i >= 0 and len(prefix) - i - 2 < 4:
        j = i
        while j > 0 and prefix[j - 1:j] == b"\\":
            j -= 1
        return (i - j) % 2 == 0
    return False


def token_category(i, b, prefix, vocab, forced_llg, llg_missing):
    """What kind of token one engine allows and the other does not (from its bytes and place)."""
    if i in vocab.special_set:
        return "special"
    if in_escape(prefix) and prefix.endswith(b"\\"):
        if b.startswith(b"/"):
            return "escape-slash"  # \/
        if b[:3].lower() in (b"udc", b"udd", b"ude", b"udf"):
            return "escape-lone-low-surrogate"
    if in_escape(prefix) or b"\\" in b:
        return "escape"
    if b"\x7f" in b:
        return "DEL"
    if any(c < 0x20 for c in b):
        return "raw-control"
    if llg_missing and forced_llg and len(b) < len(forced_llg) and forced_llg.startswith(b):
        return "forced-prefix"
    return "other"


def difference_key(a, a_only, b, b_only, prefix, forced_llg, vocab):
    """"A+{categories} B+{categories}": which engine allows more, of which kinds of token."""
    parts = []
    for name, only, other in ((a, a_only, b), (b, b_only, a)):
        if len(only):
            cats = sorted({token_category(int(i), vocab.token_bytes(i), prefix, vocab, forced_llg,
                                          other == "llguidance") for i in only})
            parts.append("%s+%s" % (name, "/".join(cats)))
    return " ".join(parts) or "eos"


def describe(ids, vocab, k=10):
    ids = sorted(int(i) for i in ids)
    s = ", ".join("%d %r" % (i, vocab.piece(i)) for i in ids[:k])
    return s + (" ... (%d)" % len(ids) if len(ids) > k else "")


def compare_pair(a, b, walks, ctx, findings):
    """Compare engines a and b step by step over the documents: counts; each kind of difference
    goes into findings[(a, b, key)] with a step count and the first example."""
    vocab, schema_name = ctx["vocab"], ctx["schema"]
    res = {"steps": 0, "agree": 0, "eos_steps": 0, "eos_agree": 0, "classes": {}}
    wa, wb = walks[a], walks[b]
    for d, (ra, rb) in enumerate(zip(wa, wb)):
        n = min(len(ra["steps"]), len(rb["steps"]))
        for i in range(n):
            (na, ha, ea), (nb, hb, eb) = ra["steps"][i], rb["steps"][i]
            res["steps"] += 1
            res["eos_steps"] += 1
            res["eos_agree"] += (ea > 0) == (eb > 0)
            if (na, ha, ea) == (nb, hb, eb):
                res["agree"] += 1
                continue
            bits = {}
            for e, r in ((a, ra), (b, rb)):
                if "bits" in r:
                    bits[e] = r["bits"][i]
            if "tern" in (a, b):
                # tern's set equals a peer's when count and hash do; else fetch it (bounded)
                t = ra if a == "tern" else rb
                for peer in PEERS:
                    w = ctx["walks"].get(peer)
                    if w and d < len(w) and i < len(w[d]["steps"]) and w[d]["steps"][i] == t["steps"][i]:
                        bits["tern"] = w[d]["bits"][i]
                        break
                if "tern" not in bits:
                    if (d, i) not in ctx["tern_bits"]:
                        res["classes"]["undiagnosed"] = res["classes"].get("undiagnosed", 0) + 1
                        continue
                    bits["tern"] = ctx["tern_bits"][(d, i)]
            sa, sb = bits[a] & ~vocab.is_eog, bits[b] & ~vocab.is_eog
            a_only, b_only = np.nonzero(sa & ~sb)[0], np.nonzero(sb & ~sa)[0]
            forced_llg = ctx["walks"]["llguidance"][d]["forced"][i] if "llguidance" in (a, b) else b""
            prefix = b"".join(vocab.token_bytes(t) for t in ctx["tokens"][d][:i])
            key = difference_key(a, a_only, b, b_only, prefix, forced_llg, vocab)
            res["classes"][key] = res["classes"].get(key, 0) + 1
            f = findings.setdefault((a, b, key), {"steps": 0, "schemas": set(), "examples": []})
            f["steps"] += 1
            f["schemas"].add(schema_name)
            # one example per schema for differences not yet explained by a rule ("other"), else one
            if schema_name not in [x["schema"] for x in f["examples"]] and ("other" in key or not f["examples"]):
                ex = {"schema": schema_name, "doc": d + 1, "step": i,
                      "after": prefix.decode("utf-8", "replace")[-50:],
                      a + "_only": describe(a_only, vocab), b + "_only": describe(b_only, vocab),
                      "eos": [ea, eb]}
                f["examples"].append(ex)
                log("  DIFF %s vs %s [%s] %s doc %d step %d after %r: %s only: %s; %s only: %s; eos %d/%d"
                    % (a, b, key, schema_name, d + 1, i, ex["after"], a, ex[a + "_only"], b, ex[b + "_only"],
                       ea, eb))
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tern", help="the tern binary (build/bin/tern)")
    ap.add_argument("--schemas", default=DEFAULT_SCHEMAS, help="glob of schema files {schema, valid}")
    ap.add_argument("--reps", type=int, default=5, help="compiles per schema and engine (median)")
    ap.add_argument("--limit", type=int, default=0, help="only the first N schemas")
    ap.add_argument("--table", help="also write the Markdown table to this file")
    ap.add_argument("--table-from", help="print the Markdown table of these JSON lines and exit")
    ap.add_argument("models", nargs="*")
    a = ap.parse_args()
    if a.table_from:
        print(markdown([json.loads(l) for l in open(a.table_from) if l.strip()]))
        return
    if not a.tern or not a.models:
        ap.error("--tern and at least one MODEL.gguf are needed")
    files = sorted(glob.glob(a.schemas))
    if a.limit:
        files = files[:a.limit]
    if not files:
        ap.error("no schema files match %s" % a.schemas)
    tern = Tern(a.tern, a.reps)
    summaries = []
    for model in a.models:
        summaries += run_vocab(tern, model, files, a.reps)
    for row in table_rows(summaries):
        print("ROW " + json.dumps(row), flush=True)
    table = markdown(summaries)
    log(table)
    if a.table:
        with open(a.table, "w") as f:
            f.write(table + "\n")


def run_vocab(tern, model, files, reps):
    load0 = os.getloadavg()
    vocab = Vocab(tern.bin, model)
    peers = {"xgrammar": XGrammar(vocab, reps), "llguidance": LLGuidance(vocab, reps)}
    log("# %s: %d tokens (pre %s), EOS ids %s; %d HF special tokens; peers' vocabulary set-up: xgrammar %.2f s, "
        "llguidance %.2f s" % (vocab.name, vocab.n_vocab, vocab.pre, vocab.eog, len(vocab.special),
                               peers["xgrammar"].vocab_s, peers["llguidance"].vocab_s))
    engines = ["tern"] + list(PEERS)
    per = {e: {"compile": {}, "unsupported": {}, "mask_us": {}, "first_us": {}, "refused": []} for e in engines}
    pairs = [("tern", "xgrammar"), ("tern", "llguidance"), ("xgrammar", "llguidance")]
    agree = {p: {"steps": 0, "agree": 0, "eos_steps": 0, "eos_agree": 0, "classes": {}} for p in pairs}
    findings = {}
    tok_mismatch = 0
    n_docs = 0
    overhead = {}
    with tempfile.TemporaryDirectory() as work:
        # every document, tokenized by tern once (the ids every engine walks)
        corpus = []
        for path in files:
            d = json.load(open(path, encoding="utf-8"))
            docs = [json.dumps(v, separators=(",", ":"), ensure_ascii=False) for v in d.get("valid", [])]
            corpus.append((path, d["schema"], docs))
        all_docs = [t for _, _, docs in corpus for t in docs]
        jl = os.path.join(work, "all.jsonl")
        with open(jl, "w", encoding="utf-8") as f:
            for t in all_docs:
                f.write(json.dumps(t, ensure_ascii=False) + "\n")
        out = subprocess.run([tern.bin, "tokenize", "-m", model, "-f", jl, "--jsonl", "--no-bos"], check=True,
                             capture_output=True, text=True).stdout
        all_ids = [json.loads(x) for x in out.splitlines() if x.strip()]
        assert len(all_ids) == len(all_docs)
        for t, ids in zip(all_docs, all_ids):
            if vocab.hf.encode(t, add_special_tokens=False) != ids:
                tok_mismatch += 1
                log("  tokenization differs from HF for %r" % t[:60])
        k = 0
        for si, (path, schema, docs) in enumerate(corpus):
            name = os.path.basename(path)[:-5]
            toks = all_ids[k:k + len(docs)]
            k += len(docs)
            n_docs += len(docs)
            spath = os.path.join(work, "schema.json")
            dpath = os.path.join(work, "docs.txt")
            stext = json.dumps(schema)
            open(spath, "w", encoding="utf-8").write(stext)
            with open(dpath, "w", encoding="utf-8") as f:
                for t in docs:
                    f.write(t + "\n")
            walks = {}
            # engines in a rotating order, so that each sees the machine's load alike
            order = engines[si % 3:] + engines[:si % 3]
            for e in order:
                try:
                    if e == "tern":
                        cms = tern.compile(vocab, spath, dpath)
                        w = tern.walk(vocab, spath, dpath, work)
                        for r, t in zip(w, toks):
                            if r["tokens"] != t:
                                raise RuntimeError("tern grammar check tokenized differently from tern tokenize")
                    else:
                        cms, g = peers[e].compile(stext)
                        t0 = time.process_time()
                        w = peer_walk(peers[e], g, vocab, toks)
                        del t0
                        if e not in overhead:
                            overhead[e] = peers[e].overhead_us(peers[e].matcher(g))
                except Exception as ex:  # a compile error: the schema is unsupported by e
                    msg = str(ex).strip().split("\n")[0][:300]
                    per[e]["unsupported"][name] = msg
                    log("  %s: %s unsupported: %s" % (name, e, msg))
                    continue
                per[e]["compile"][name] = cms
                per[e]["mask_us"][name] = [u for r in w for u in r["us"]]
                per[e]["first_us"][name] = cms * 1e3 + (w[0]["us"][0] if w and w[0]["us"] else 0)
                for di, r in enumerate(w):
                    if not r["accept"]:
                        at = r.get("refused_at", len(r["steps"]) - 1)
                        per[e]["refused"].append({"schema": name, "doc": di + 1, "token": at})
                        log("  %s: %s REFUSES valid document %d at token %s: %s" % (name, e, di + 1, at, docs[di][:80]))
                walks[e] = w
            # tern's full sets where they differ from every peer's (else a peer's equal set stands in)
            need = []
            for d, r in enumerate(walks.get("tern", [])):
                for i, st in enumerate(r["steps"]):
                    peers_here = [walks[p][d]["steps"][i] for p in PEERS
                                  if p in walks and i < len(walks[p][d]["steps"])]
                    if peers_here and st not in peers_here:
                        need.append((d, i))
            tern_bits = tern.ids_at(vocab, spath, dpath, need[:DIAGNOSE_PER_SCHEMA], work)
            ctx = {"vocab": vocab, "schema": name, "schema_path": spath, "docs": docs, "tokens": toks,
                   "tern": tern, "work": work, "walks": walks, "tern_bits": tern_bits}
            for p in pairs:
                if p[0] in walks and p[1] in walks:
                    r = compare_pair(p[0], p[1], walks, ctx, findings)
                    acc = agree[p]
                    for key in ("steps", "agree", "eos_steps", "eos_agree"):
                        acc[key] += r[key]
                    for c, n in r["classes"].items():
                        acc["classes"][c] = acc["classes"].get(c, 0) + n
            log("%s %s: compile ms %s; steps %d" % (
                vocab.name, name, " ".join("%s=%.3f" % (e, per[e]["compile"][name]) for e in engines
                                           if name in per[e]["compile"]),
                sum(len(r["steps"]) for r in walks.get("tern", []))))
    load1 = os.getloadavg()
    log("# %s: differences by kind (engine+kinds of token only it allows; steps, schemas, first example)" % vocab.name)
    for (a, b, key), f in sorted(findings.items()):
        log("  %s vs %s: %s: %d steps in %d schemas (%s)" % (a, b, key, f["steps"], len(f["schemas"]),
                                                           ", ".join(sorted(f["schemas"])[:6])))
        for ex in f["examples"]:
            log("      e.g. %s" % json.dumps(ex, ensure_ascii=False))
    versions = {"tern": tern.version, "xgrammar": peers["xgrammar"].version, "llguidance": peers["llguidance"].version}
    out = []
    for e in engines:
        s = {"layer": "grammar", "vocab": vocab.name, "n_vocab": vocab.n_vocab, "engine": e, "version": versions[e],
             "schemas": len(files), "documents": n_docs, "supported": len(per[e]["compile"]),
             "unsupported": per[e]["unsupported"], "refused_valid": per[e]["refused"],
             "load": [round(x, 2) for x in load0[:1] + load1[:1]], "tokenization_differs_from_hf": tok_mismatch}
        if e != "tern":
            s["vocab_setup_s"] = round(peers[e].vocab_s, 3)
            s["call_overhead_us"] = overhead.get(e)
        # figures over the schemas this engine and tern both support (the ratio's basis)
        for other in engines:
            if other == e:
                continue
            common = sorted(set(per[e]["compile"]) & set(per[other]["compile"]))
            key = "vs_" + other
            s[key] = {"schemas": len(common)}
            for who, tag in ((e, "self"), (other, "other")):
                comp = [per[who]["compile"][n] for n in common]
                masks = [u for n in common for u in per[who]["mask_us"][n]]
                first = [per[who]["first_us"][n] for n in common]
                s[key][tag] = {"compile_ms_p50": pct(comp, 0.5), "compile_ms_p99": pct(comp, 0.99),
                               "mask_us_p50": pct(masks, 0.5), "mask_us_p99": pct(masks, 0.99),
                               "first_mask_us_p50": pct(first, 0.5), "masks": len(masks)}
            p = (e, other) if (e, other) in agree else (other, e)
            s[key]["agreement"] = agree[p]
            s[key]["differences"] = [{"kind": k, "steps": f["steps"], "schemas": sorted(f["schemas"]),
                                      "examples": f["examples"]}
                                     for (x, y, k), f in sorted(findings.items()) if (x, y) == p]
        out.append(s)
        print(json.dumps(s), flush=True)
    return out


def fmt_ratio(tern_v, peer_v):
    if not tern_v or peer_v is None:
        return "-"
    return "%.2fx" % (peer_v / tern_v)


def by_vocab(summaries):
    """The summaries grouped: vocabulary -> engine -> summary, in the order they came."""
    by = {}
    for s in summaries:
        by.setdefault(s["vocab"], {})[s["engine"]] = s
    return by


def peers_of(v, es):
    """(tern's summary, peer, the peer's summary, layer, who) for each peer that ran beside tern
    on vocabulary v."""
    t = es.get("tern")
    for peer in PEERS:
        p = es.get(peer)
        if t and p:
            yield t, peer, p, "grammar %s (%d)" % (v.split("-")[0], p["n_vocab"]), "%s %s" % (peer, p["version"])


def table_rows(summaries):
    """The rows of bench/peers/table.py (run.sh's one table): times with ratio = peer / tern (how
    many times faster tern is), then support and agreement as counts."""
    out = []
    for v, es in by_vocab(summaries).items():
        for t, peer, p, layer, who in peers_of(v, es):
            me, tn = p["vs_tern"]["self"], p["vs_tern"]["other"]
            for metric, key, unit in (("compile p50", "compile_ms_p50", "ms"), ("compile p99", "compile_ms_p99", "ms"),
                                      ("mask p50", "mask_us_p50", "us"), ("mask p99", "mask_us_p99", "us")):
                a, b = tn[key], me[key]
                out.append({"layer": layer, "peer": who, "metric": "%s (%s, thread CPU)" % (metric, unit),
                            "tern": a, "peer_value": b, "ratio": (b / a) if a and b else None})
            out.append({"layer": layer, "peer": who, "metric": "schemas supported",
                        "tern": "%d/%d" % (t["supported"], t["schemas"]), "peer_value": "%d/%d" % (p["supported"], p["schemas"])})
            ag = p["vs_tern"]["agreement"]
            out.append({"layer": layer, "peer": who, "metric": "steps with the same allowed set (docs/results/grammar-peers.md: why not all)",
                        "tern": "%d/%d" % (ag["agree"], ag["steps"]), "peer_value": "%d/%d" % (ag["agree"], ag["steps"])})
    return out


def markdown(summaries):
    rows = ["| layer | peer | metric | tern | peer | ratio |", "|---|---|---|---:|---:|---:|"]
    for v, es in by_vocab(summaries).items():
        for t, peer, p, layer, who in peers_of(v, es):
            vs = p["vs_tern"]
            me, tn = vs["self"], vs["other"]
            for metric, key, unit in (("compile p50", "compile_ms_p50", "ms"), ("compile p99", "compile_ms_p99", "ms"),
                                      ("compile + first mask p50", "first_mask_us_p50", "us"),
                                      ("mask p50", "mask_us_p50", "us"), ("mask p99", "mask_us_p99", "us")):
                a, b = tn[key], me[key]
                rows.append("| %s | %s | %s (%s) | %s | %s | %s |" % (
                    layer, who, metric, unit, "-" if a is None else "%.3g" % a, "-" if b is None else "%.3g" % b,
                    fmt_ratio(a, b)))
            rows.append("| %s | %s | schemas supported | %d/%d | %d/%d | |" % (
                layer, who, t["supported"], t["schemas"], p["supported"], p["schemas"]))
            ag = vs["agreement"]
            rows.append("| %s | %s | steps agreeing (same allowed set) | %d/%d | | %.1f%% |" % (
                layer, who, ag["agree"], ag["steps"], 100.0 * ag["agree"] / max(1, ag["steps"])))
            rows.append("| %s | %s | steps agreeing on EOS | %d/%d | | |" % (layer, who, ag["eos_agree"], ag["eos_steps"]))
        x, l = es.get("xgrammar"), es.get("llguidance")
        if x and l:
            ag = l["vs_xgrammar"]["agreement"]
            rows.append("| grammar %s (%d) | xgrammar vs llguidance | steps agreeing (same allowed set) | | %d/%d | %.1f%% |"
                        % (v.split("-")[0], x["n_vocab"], ag["agree"], ag["steps"], 100.0 * ag["agree"] / max(1, ag["steps"])))
    rows += ["", "Differing steps by kind (engine+kinds of token only it allows):", "",
             "| vocabulary | engines | kind | steps | schemas |", "|---|---|---|---:|---:|"]
    for s in summaries:
        for key, vs in sorted(s.items()):
            if not key.startswith("vs_") or (s["engine"], key[3:]) not in (
                    ("xgrammar", "tern"), ("llguidance", "tern"), ("llguidance", "xgrammar")):
                continue
            for d in vs.get("differences", []):
                rows.append("| %s | %s vs %s | %s | %d | %d |" % (s["vocab"].split("-")[0], key[3:], s["engine"], d["kind"],
                                                                d["steps"], len(d["schemas"])))
            und = vs["agreement"]["classes"].get("undiagnosed")
            if und:
                rows.append("| %s | %s vs %s | undiagnosed (tern's set not fetched) | %d | |" % (
                    s["vocab"].split("-")[0], key[3:], s["engine"], und))
    return "\n".join(rows)


if __name__ == "__main__":
    main()
