"""Cross-check `tern tokenize` with the gpt-2 vocabulary against GPT-2's regex (Python `regex`)
plus BPE over the GGUF's merges, implemented independently here. Not run by ctest.
Usage: python3 gpt2_ref.py TEXTFILE"""
import os
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, '..', '..'))
SHARED = os.environ.get('TERN_SHARED', os.path.normpath(os.path.join(REPO, '..', 'shared')))
TERN = os.environ.get('TERN_BIN', os.path.join(REPO, 'build', 'bin', 'tern'))
import regex, struct, sys, json, subprocess
path=SHARED+'/fixtures/tokenizer/ggml-vocab-gpt-2.gguf'
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
toks={t.decode():i for i,t in enumerate(kv['tokenizer.ggml.tokens'])}
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
    return [toks[p] for p in parts]
pat=r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
textfile=sys.argv[1]
text=open(textfile,'rb').read().decode('utf-8')
ids=[]
for m in regex.finditer(pat, text): ids+=bpe(m.group(0).encode('utf-8'))
out=subprocess.run([TERN,'tokenize','-m',path,'-f',textfile,'--no-bos','--json'],capture_output=True,check=True).stdout
got=json.loads(out)
print('gpt-2', textfile, 'ref', len(ids), 'tern', len(got), 'equal', ids==got)
if ids!=got:
    for i,(a,b) in enumerate(zip(ids,got)):
        if a!=b: print('first diff at', i, ids[max(0,i-5):i+5], got[max(0,i-5):i+5]); break
