"""Cross-check `tern tokenize` against an independent reference for the tiktoken vocabularies
(qwen2, llama3): HF's published pre-tokenizer regex (Python `regex` module) + tiktoken's BPE over
the original rank files in ../shared/fixtures/tokenizer/original. Not run by ctest (needs Python
and `regex`). Usage: python3 tiktoken_ref.py llama3|qwen2 TEXTFILE"""
import os
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, '..', '..'))
SHARED = os.environ.get('TERN_SHARED', os.path.normpath(os.path.join(REPO, '..', 'shared')))
TERN = os.environ.get('TERN_BIN', os.path.join(REPO, 'build', 'bin', 'tern'))
import regex, base64, sys, glob, json, subprocess
def load(path):
    r={}
    for line in open(path,'rb'):
        a,b=line.split()
        r[base64.b64decode(a)]=int(b)
    return r
def bpe(ranks, piece):
    if piece in ranks: return [ranks[piece]]
    parts=[bytes([b]) for b in piece]
    while True:
        best=None
        for i in range(len(parts)-1):
            r=ranks.get(parts[i]+parts[i+1])
            if r is not None and (best is None or r<best[0]): best=(r,i)
        if best is None: break
        i=best[1]; parts[i:i+2]=[parts[i]+parts[i+1]]
    return [ranks[p] for p in parts]
pats={
 'llama3': r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
 'qwen2': r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
}
which=sys.argv[1]; textfile=sys.argv[2]
ranks=load(SHARED+'/fixtures/tokenizer/original/'+('llama3-tokenizer.model' if which=='llama3' else 'qwen.tiktoken'))
text=open(textfile,'rb').read().decode('utf-8')
ids=[]
for m in regex.finditer(pats[which], text):
    ids+=bpe(ranks, m.group(0).encode('utf-8'))
gguf=SHARED+'/fixtures/tokenizer/ggml-vocab-%s-tiktoken.gguf'%which
out=subprocess.run([TERN,'tokenize','-m',gguf,'-f',textfile,'--no-bos','--json'],capture_output=True,check=True).stdout
got=json.loads(out)
print(which, textfile, 'ref', len(ids), 'tern', len(got), 'equal', ids==got)
if ids!=got:
    for i,(a,b) in enumerate(zip(ids,got)):
        if a!=b:
            print('first diff at', i, ids[max(0,i-5):i+5], got[max(0,i-5):i+5]); break
