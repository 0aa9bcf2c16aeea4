#!/usr/bin/env python3
"""The import graph of src/'s top-level modules, from their `crate::` references (comments and
tests left out), and its cycles. Exits 1 when there is one (docs/architecture.md)."""
import re,os,sys,collections
root=sys.argv[1] if len(sys.argv)>1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'src')
edges=collections.defaultdict(set)
for dp,_,fs in os.walk(root):
    for f in fs:
        if not f.endswith('.rs'): continue
        p=os.path.join(dp,f)
        rel=os.path.relpath(p,root)
        top=rel.split('/')[0].replace('.rs','')
        if top in ('lib','main'): continue
        src=open(p).read()
        # strip tests modules roughly: skip files named tests.rs / *_test.rs
        if f=='tests.rs' or f.endswith('_test.rs'): continue
        src=src.split('#[cfg(test)]')[0]
        src=re.sub(r'//[^\n]*','',src)
        for m in re.finditer(r'crate::(\w+)',src):
            t=m.group(1)
            if t!=top: edges[top].add(t)
        for m in re.finditer(r'use crate::\{([^}]*)\}',src):
            for t in re.findall(r'(?:^|,)\s*(\w+)',m.group(1)):
                if t!=top and t!='self': edges[top].add(t)
for k in sorted(edges): print(k,'->',sorted(edges[k]))
# cycles via SCC
idx={};low={};st=[];on=set();res=[];c=[0]
def sc(v):
    idx[v]=low[v]=c[0];c[0]+=1;st.append(v);on.add(v)
    for w in edges.get(v,()):
        if w not in idx: sc(w);low[v]=min(low[v],low[w])
        elif w in on: low[v]=min(low[v],idx[w])
    if low[v]==idx[v]:
        comp=[]
        while True:
            w=st.pop();on.discard(w);comp.append(w)
            if w==v:break
        if len(comp)>1: res.append(comp)
for v in list(edges): 
    if v not in idx: sc(v)
print('cycles:',res)
if res:
    # CI sends the graph to /dev/null: the cycle itself must still be seen.
    print('import cycle between top-level modules of src/:', res, file=sys.stderr)
sys.exit(1 if res else 0)
