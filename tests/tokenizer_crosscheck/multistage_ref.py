"""Cross-check `tern tokenize` for the multi-stage pre-tokenizers (falcon, starcoder, gpt-neox =
llama.cpp's default, deepseek-llm) against a Python emulation of llama.cpp's sequential regex
splitting (each stage keeps matches and the gaps between them) and its special-token partition
(user-defined tokens, longest first), then BPE over the GGUF's merges. deepseek-llm's character
ranges are read from src/tokenizer/tok_pretok.c, so that table itself is not cross-checked.
Not run by ctest. Usage: python3 multistage_ref.py falcon|starcoder|gpt-neox|deepseek-llm TEXTFILE"""
import os
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, '..', '..'))
SHARED = os.environ.get('TERN_SHARED', os.path.normpath(os.path.join(REPO, '..', 'shared')))
TERN = os.environ.get('TERN_BIN', os.path.join(REPO, 'build', 'bin', 'tern'))
import regex, struct, sys, json, subprocess
name=sys.argv[1]; textfile=sys.argv[2]
path=SHARED+'/fixtures/tokenizer/ggml-vocab-%s.gguf'%name
d=open(path,'rb').read(); o=4
ver,nt,nkv=struct.unpack_from('<IQQ',d,o);o+=20
def rs():
    global o
    n,=struct.unpack_from('<Q',d,o);o+=8; s=d[o:o+n];o+=n;return s
sizes={0:1,1:1,2:2,3:2,4:4,5:4,6:4,7:1,10:8,11:8,12:8}; fmt={0:'B',1:'b',2:'H',3:'h',4:'I',5:'i',6:'f',7:'?',10:'Q',11:'q',12:'d'}
def rv(t):
    global o
    if t==8: return rs()
    if t==9:
        et,n=struct.unpack_from('<IQ',d,o);o+=12; return [rv(et) for _ in range(n)]
    v,=struct.unpack_from('<'+fmt[t],d,o);o+=sizes[t];return v
kv={}
for i in range(nkv):
    k=rs();t,=struct.unpack_from('<I',d,o);o+=4; kv[k.decode()]=rv(t)
toklist=[t.decode() for t in kv['tokenizer.ggml.tokens']]
toks={}
for i,t in enumerate(toklist): toks[t]=i
types=kv['tokenizer.ggml.token_type']
ranks={}
for i,m in enumerate(kv['tokenizer.ggml.merges']):
    a,b=m.decode().split(' ',1); ranks.setdefault((a,b),i)
bs=list(range(ord("!"),ord("~")+1))+list(range(ord("¡"),ord("¬")+1))+list(range(ord("®"),ord("ÿ")+1))
cs=bs[:]; n=0
for b in range(256):
    if b not in bs: bs.append(b); cs.append(256+n); n+=1
b2u={b:chr(c) for b,c in zip(bs,cs)}
def bpe(word):
    parts=[b2u[b] for b in word]
    while True:
        best=None
        for i in range(len(parts)-1):
            r=ranks.get((parts[i],parts[i+1]))
            if r is not None and (best is None or r<best[0]): best=(r,i)
        if best is None: break
        i=best[1]; parts[i:i+2]=[parts[i]+parts[i+1]]
    return [toks[p] for p in parts if p in toks]
G2=r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
stages={
 'falcon':[r"[\p{P}\$\+<=>\^~\|`]+", G2, r"[0-9][0-9][0-9]"],
 'starcoder':[r"\p{N}", G2],
 'deepseek-llm':[r"[\r\n]", "DSL", "DSP", r"\s+$", "CJK", r"\p{N}+"],
 'gpt-neox':[r"[\p{P}\$\+<=>\^~\|]+", G2, r"\p{N}+", r"[0-9][0-9][0-9]"],
}[name]
import re as _re
src=open(os.path.join(REPO,'src','tokenizer','tok_pretok.c')).read()
def table(name):
    body=src[src.index(name+'[] = {'):]
    body=body[:body.index('};')]
    return [(int(a,16),int(b,16)) for a,b in _re.findall(r'\{0x([0-9A-F]+), 0x([0-9A-F]+)\}', body)]
def cls(rs): return '['+''.join(regex.escape(chr(a))+'-'+regex.escape(chr(b)) for a,b in rs)+']'
for i,p in enumerate(stages):
    if p=='DSL': stages[i]=r'\s?'+cls(table('ds_letters'))+'+'
    if p=='DSP': stages[i]=r'\s?'+cls(table('ds_punct'))+'+'
    if p=='CJK': stages[i]=cls(table('cjk'))+'+'
def split(frags, pat):
    out=[]
    for f in frags:
        pos=0
        for m in regex.finditer(pat, f):
            if m.start()>pos: out.append(f[pos:m.start()])
            out.append(m.group(0)); pos=m.end()
        if pos<len(f): out.append(f[pos:])
    return out
text=open(textfile,'rb').read().decode('utf-8')
# llama.cpp partition: user-defined tokens, longest first, each searched in the remaining raw parts
specials=sorted([i for i in range(len(toklist)) if types[i]==4 and toklist[i]], key=lambda i:-len(toklist[i].encode()))
parts=[('raw',text)]
for sid in specials:
    st=toklist[sid]; newp=[]
    for kind,val in parts:
        if kind!='raw': newp.append((kind,val)); continue
        while True:
            k=val.find(st)
            if k<0: break
            if k>0: newp.append(('raw',val[:k]))
            newp.append(('tok',sid)); val=val[k+len(st):]
        if val: newp.append(('raw',val))
    parts=newp
ids=[]
for kind,val in parts:
    if kind=='tok': ids.append(val); continue
    frags=[val]
    for p in stages: frags=split(frags,p)
    for w in frags: ids+=bpe(w.encode('utf-8'))
out=subprocess.run([TERN,'tokenize','-m',path,'-f',textfile,'--no-bos','--json'],capture_output=True,check=True).stdout
got=json.loads(out)
print(name, textfile, 'ref', len(ids), 'tern', len(got), 'equal', ids==got)
if ids!=got:
    for i,(a,b) in enumerate(zip(ids,got)):
        if a!=b: print('first diff at', i, [toklist[x] for x in ids[max(0,i-5):i+5]], [toklist[x] for x in got[max(0,i-5):i+5]]); break
