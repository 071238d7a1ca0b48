#!/usr/bin/env python3
"""tokenizers_compare.py — tern's tokenizer against Hugging Face `tokenizers` on the same GGUF
vocabularies: identical ids, and single-thread encoding speed.

The peer's tokenizer is built from the GGUF itself by `transformers`' GGUF reader
(AutoTokenizer.from_pretrained(dir, gguf_file=...)), so both read the same vocabulary and merges;
it encodes with the Rust `tokenizers` backend, add_special_tokens=False (tern: --no-bos).

Texts:
- held: the llama.cpp tokenizer test strings of the fixtures (tokenizer/*.inp, 46 per
  vocabulary: the texts tern's suite holds its tokenizer to), every string for every vocabulary;
- mixed: about --mb MB cut into documents of 1-8 KB at line ends, made deterministically from
  what a Debian machine has (licenses and copyright files, C headers, Python's standard library)
  and synthesized JSON tool calls and multilingual sentences (CJK, Cyrillic, Arabic, Devanagari,
  emoji), so no download is needed.

Identity: every document through `tern tokenize --jsonl` and the peer; a document counts as equal
when the id lists are equal. The first differences are printed with their pieces.
Speed: the whole mixed text as one string, one thread (RAYON_NUM_THREADS=1 for the peer;
tern tokenizes on one thread), cold (first call) and warm (median of the next --repeat - 1);
both timed with the thread's CPU clock, so that other work on a shared machine does not count:
tern's figure from `tern tokenize --time --cpu-clock` (tokenization alone, no loading or
printing), the peer's from time.thread_time() around encode() (which runs on the calling thread).
MB = 10^6 bytes.

Prints one JSON object per vocabulary on stdout, then its table rows as "ROW {json}" lines
(bench/peers/run.sh collects them, bench/peers/table.py prints the table).

usage: tokenizers_compare.py --tern build/bin/tern [--mb 10] [--repeat 5] MODEL.gguf ...
"""
import argparse
import glob
import json
import os
import random
import subprocess
import sys
import tempfile
import time

from gguf_hf import load_tokenizer

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "fixtures")

WORDS = {
    "zh": "我们 今天 天气 很好 请问 北京 上海 会议 时间 明天 下午 三点 提醒 我 打电话 给 妈妈 数据 分析 报告",
    "ja": "東京 の 天気 は 晴れ です 明日 会議 を 予約 して ください ありがとう ございます 新幹線 大阪",
    "ko": "서울 날씨 오늘 내일 회의 예약 해 주세요 감사합니다 부산 기차 시간",
    "ru": "Погода в Москве сегодня хорошая пожалуйста забронируйте встречу на завтра спасибо",
    "ar": "الطقس في القاهرة اليوم جميل من فضلك احجز موعدا غدا شكرا",
    "hi": "दिल्ली में आज मौसम अच्छा है कृपया कल बैठक बुक करें धन्यवाद",
    "emoji": "🙂 🚀 ✅ 🇳🇴 👩‍💻 🎉 ❤️ 🔥 1️⃣",
}


def read_files(patterns, limit):
    out, total = [], 0
    for pat in patterns:
        for path in sorted(glob.glob(pat, recursive=True)):
            try:
                with open(path, "rb") as f:
                    data = f.read(200_000)
                text = data.decode("utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            out.append(text)
            total += len(data)
            if total >= limit:
                return out
    return out


def synth_json(rng, n):
    keys = ["city", "date", "order_id", "amount", "currency", "to", "subject", "body", "path", "query"]
    docs = []
    for _ in range(n):
        call = {"name": rng.choice(["get_weather", "send_email", "create_order", "search_files"]),
                "arguments": {k: rng.choice([rng.randint(-10**6, 10**9), round(rng.uniform(-1e4, 1e4), 4),
                                             "A%06d" % rng.randint(0, 999999), "Zürich", "São Paulo",
                                             "2026-12-%02d" % rng.randint(1, 28), [1, 2, {"x": None}], True])
                              for k in rng.sample(keys, rng.randint(1, 5))}}
        docs.append(json.dumps(call, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, 2])))
    return "\n".join(docs)


def synth_multilingual(rng, n):
    lines = []
    for _ in range(n):
        lang = rng.choice(sorted(WORDS))
        words = WORDS[lang].split()
        sep = "" if lang in ("zh", "ja") and rng.random() < 0.7 else " "
        lines.append(sep.join(rng.choice(words) for _ in range(rng.randint(4, 20))) + rng.choice(["。", ".", "!", "?", ""]))
    return "\n".join(lines)


def mixed_documents(mb, seed=1):
    rng = random.Random(seed)
    budget = int(mb * 1e6)
    share = budget // 5
    sources = [
        "\n".join(read_files(["/usr/share/common-licenses/*", "/usr/share/doc/*/copyright"], share)),
        "\n".join(read_files(["/usr/include/**/*.h"], share)),
        "\n".join(read_files(["/usr/lib/python3*/**/*.py"], share)),
    ]
    for synth in (synth_json, synth_multilingual):
        parts, size = [], 0
        while size < share:
            parts.append(synth(rng, 200))
            size += len(parts[-1].encode())
        sources.append("\n".join(parts))
    docs = []
    for text in sources:
        lines = text.splitlines(keepends=True)
        i = 0
        while i < len(lines):
            want, size, j = rng.randint(1000, 8000), 0, i
            while j < len(lines) and size < want:
                size += len(lines[j].encode())
                j += 1
            docs.append("".join(lines[i:j]))
            i = j
    total, out = 0, []
    for d in docs:
        if total >= budget:
            break
        out.append(d)
        total += len(d.encode())
    return out


def held_texts():
    texts = []
    for path in sorted(glob.glob(os.path.join(FIXTURES, "tokenizer", "*.inp"))):
        with open(path, encoding="utf-8") as f:
            texts += f.read().split("\n__ggml_vocab_test__\n")
    return [t for t in texts if t]


def tern_ids(tern, model, docs, workdir):
    path = os.path.join(workdir, "docs.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps(d, ensure_ascii=False) + "\n")
    out = subprocess.run([tern, "tokenize", "-m", model, "-f", path, "--jsonl", "--no-bos"],
                         check=True, capture_output=True, text=True).stdout
    ids = [json.loads(line) for line in out.splitlines() if line.strip()]
    # --jsonl skips empty lines only; no document is empty here
    assert len(ids) == len(docs), (len(ids), len(docs))
    return ids


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def compare(tern, model, repeat, mb, workdir):
    t0 = time.perf_counter()
    hf, pre = load_tokenizer(model)  # the SmolLM2 digit split is restored there
    load_s = time.perf_counter() - t0
    backend = hf.backend_tokenizer
    result = {"model": os.path.basename(model), "pre": pre, "peer_class": type(hf).__name__,
              "peer_load_s": round(load_s, 1)}
    for name, docs in (("held", held_texts()), ("mixed", mixed_documents(mb))):
        ours = tern_ids(tern, model, docs, workdir)
        theirs = [e.ids for e in backend.encode_batch(docs, add_special_tokens=False)]
        diffs = [i for i in range(len(docs)) if ours[i] != theirs[i]]
        result[name] = {"documents": len(docs), "bytes": sum(len(d.encode()) for d in docs),
                        "equal": len(docs) - len(diffs), "tokens": sum(len(x) for x in theirs)}
        for i in diffs[:3]:
            k = first_difference(ours[i], theirs[i])
            print(f"# {result['model']} {name} document {i}: differ at token {k}: "
                  f"tern {ours[i][k:k+5]} {[hf.decode([t]) for t in ours[i][k:k+5]]} / "
                  f"tokenizers {theirs[i][k:k+5]} {[hf.decode([t]) for t in theirs[i][k:k+5]]}", file=sys.stderr)
    # speed: the mixed text as one string
    text = "".join(mixed_documents(mb))
    path = os.path.join(workdir, "mixed.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    err = subprocess.run([tern, "tokenize", "-m", model, "-f", path, "--no-bos", "--time", "--cpu-clock",
                          "--repeat", str(repeat)],
                         check=True, capture_output=True, text=True).stderr
    # "... cold X s (A MB/s); warm median of N Y s (B MB/s)"
    mbs = [float(part.split("(")[1].split()[0]) for part in err.split(";") if "MB/s" in part]
    secs = []
    for r in range(repeat):
        t0 = time.thread_time()
        enc = backend.encode(text, add_special_tokens=False)
        secs.append(time.thread_time() - t0)
    warm = sorted(secs[1:])[(len(secs) - 2) // 2] if len(secs) > 1 else secs[0]
    n = len(text.encode())
    result["speed"] = {"bytes": n, "tokens_peer": len(enc.ids),
                       "tern_cold_MBps": mbs[0], "tern_warm_MBps": mbs[-1],
                       "peer_cold_MBps": round(n / 1e6 / secs[0], 2), "peer_warm_MBps": round(n / 1e6 / warm, 2)}
    return result


def table_rows(r):
    """The rows bench/peers/table.py prints: ids first (counts), then speed (ratio = tern / peer)."""
    layer = f"tokenizer {r['model']} ({r['pre']})"
    rows = []
    for name in ("held", "mixed"):
        x = r[name]
        rows.append({"layer": layer, "peer": r["peer"], "metric": f"identical ids, {name} texts "
                     f"({x['documents']} documents, {x['bytes'] / 1e6:.2f} MB)",
                     "tern": f"{x['equal']}/{x['documents']}", "peer_value": f"{x['documents']}/{x['documents']}"})
    sp = r["speed"]
    for kind in ("cold", "warm"):
        a, b = sp[f"tern_{kind}_MBps"], sp[f"peer_{kind}_MBps"]
        rows.append({"layer": layer, "peer": r["peer"], "metric": f"encode MB/s, 1 thread, {kind}",
                     "tern": a, "peer_value": b, "ratio": a / b})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tern", required=True)
    ap.add_argument("--mb", type=float, default=10)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    import tokenizers
    with tempfile.TemporaryDirectory() as workdir:
        for m in a.models:
            r = compare(a.tern, m, a.repeat, a.mb, workdir)
            r["peer"] = f"tokenizers {tokenizers.__version__}"
            print(json.dumps(r), flush=True)
            for row in table_rows(r):
                print("ROW " + json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
