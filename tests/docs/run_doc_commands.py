#!/usr/bin/env python3
"""run_doc_commands.py — the documentation is run, so it cannot drift from the code.

Two checks over README.md and docs/**/*.md (docs/cli.md "Documentation tests" is the user's
description of both):

--commands (ctest docs_commands): every fenced block whose info string is `sh doc-test ...` is
  run with `sh -e` in a fresh temporary directory that mirrors a checkout (links to the source
  tree's folders, build/bin pointing at the build's binaries, ../shared pointing at the
  checkout's ../shared) with the build's bin first on PATH. A block passes when it exits 0 within
  its time limit and, with expect="TEXT", its stdout + stderr contain TEXT. needs=LIST names what
  the block requires: `shared` (../shared/fixtures), `model:NAME` (an installed real model, as
  `tern models --json` lists it), `cmd:NAME` (a program on PATH). A block whose needs are missing
  is skipped and the run exits 77 (ctest's SKIP_RETURN_CODE) naming each one, so a missing model
  never reads as a pass. Each block runs in its own process group, which is killed afterwards, so
  a server a failed block started does not outlive it.

--links (ctest docs_links): every relative link of those pages points at a file or folder that
  exists, every #anchor at a heading of its page (GitHub's anchor rules), and every reference of
  the form docs/<page>.md "<heading>" in the source tree (comments, --help texts, error messages,
  scripts) names an existing page and one of its headings.

Exit status: 0 all passed, 1 a failure (each one named with FILE:LINE), 77 skipped blocks only.
"""
import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile

SKIP = 77
FENCE = re.compile(r'^(`{3,})(.*)$')


def doc_files(src):
    """README.md, CHANGELOG.md and every page under docs/, in a stable order."""
    files = [os.path.join(src, 'README.md'), os.path.join(src, 'CHANGELOG.md')]
    for root, _, names in os.walk(os.path.join(src, 'docs')):
        files += [os.path.join(root, n) for n in names if n.endswith('.md')]
    return sorted(f for f in files if os.path.isfile(f))


def blocks(path):
    """(line of the opening fence, info string, body) of every fenced block of a page."""
    out, lines, i = [], open(path, encoding='utf-8').read().split('\n'), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        ticks, info, start, body = m.group(1), m.group(2).strip(), i + 1, []
        i += 1
        while i < len(lines) and not (lines[i].startswith(ticks) and lines[i].strip() == ticks):
            body.append(lines[i])
            i += 1
        if i == len(lines):
            raise SystemExit(f'{path}:{start}: fenced block never closed')
        out.append((start, info, '\n'.join(body) + '\n'))
        i += 1
    return out


def parse_marker(info, where):
    """The attributes of a `sh doc-test` info string, or None for a block that is not marked."""
    words = shlex.split(info) if info else []
    if len(words) < 2 or words[0] != 'sh' or words[1] != 'doc-test':
        return None
    attrs = {'needs': [], 'expect': None, 'timeout': 120}
    for w in words[2:]:
        key, eq, value = w.partition('=')
        if not eq or key not in attrs:
            raise SystemExit(f'{where}: unknown doc-test attribute {w!r} (needs=, expect=, timeout=)')
        if key == 'needs':
            attrs['needs'] = [n for n in value.split(',') if n]
        elif key == 'timeout':
            attrs['timeout'] = int(value)
        else:
            attrs['expect'] = value
    return attrs


class Needs:
    """Decides whether a block's requirements are met; the installed models are asked once."""

    def __init__(self, bin_dir, shared):
        self.bin_dir, self.shared, self._models = bin_dir, shared, None

    def installed(self):
        if self._models is None:
            r = subprocess.run([os.path.join(self.bin_dir, 'tern'), 'models', '--json'],
                               capture_output=True, text=True)
            try:
                listed = json.loads(r.stdout) if r.returncode == 0 else []
            except json.JSONDecodeError:
                listed = []
            self._models = {m.get('name') for m in listed if isinstance(m, dict) and not m.get('error')}
        return self._models

    def missing(self, need):
        kind, _, name = need.partition(':')
        if need == 'shared':
            ok = os.path.isdir(os.path.join(self.shared, 'fixtures'))
            return None if ok else f'../shared/fixtures is absent ({self.shared})'
        if kind == 'model':
            return None if name in self.installed() else \
                f'model {name} is not installed (python3 scripts/install-models.py --only {name})'
        if kind == 'cmd':
            return None if shutil.which(name) else f'{name} is not on PATH'
        raise SystemExit(f'unknown need {need!r} (shared, model:NAME, cmd:NAME)')


def checkout_mirror(src, bin_dir, shared):
    """A temporary directory laid out as a checkout: TMP/w (the working directory) links the
    source tree's entries and has build/bin -> the build's bin; TMP/shared -> ../shared."""
    top = tempfile.mkdtemp(prefix='tern-doc-')
    work = os.path.join(top, 'w')
    os.makedirs(os.path.join(work, 'build'))
    for name in os.listdir(src):
        if name not in ('build', '.git') and not name.startswith('build-'):
            os.symlink(os.path.join(src, name), os.path.join(work, name))
    os.symlink(bin_dir, os.path.join(work, 'build', 'bin'))
    if os.path.isdir(shared):
        os.symlink(shared, os.path.join(top, 'shared'))
    return top, work


def run_block(body, attrs, src, bin_dir, shared):
    """(ok, message): the block run with sh -e in a fresh mirror of the checkout."""
    top, work = checkout_mirror(src, bin_dir, shared)
    env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get('PATH', ''))
    proc = subprocess.Popen(['sh', '-e', '-c', body], cwd=work, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=attrs['timeout'])
        timed_out = False
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        try:  # whatever the block left running in its group (a server after a failed curl)
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if timed_out:
        out, _ = proc.communicate()
    shutil.rmtree(top, ignore_errors=True)
    text = out.decode('utf-8', 'replace')
    if timed_out:
        return False, f'did not finish within {attrs["timeout"]} s', text
    if proc.returncode != 0:
        return False, f'exit status {proc.returncode}', text
    if attrs['expect'] is not None and attrs['expect'] not in text:
        return False, f'output does not contain {attrs["expect"]!r}', text
    return True, 'ok', text


def check_commands(src, bin_dir, shared, list_only):
    needs = Needs(bin_dir, shared)
    marked = []
    for path in doc_files(src):
        for line, info, body in blocks(path):
            where = f'{os.path.relpath(path, src)}:{line}'
            attrs = parse_marker(info, where)
            if attrs is not None:
                marked.append((where, attrs, body))
    if not marked:
        print('no block is marked `sh doc-test`: nothing would be checked')
        return 1
    if list_only:
        for where, attrs, body in marked:
            print(f'{where}: needs {",".join(attrs["needs"]) or "nothing"}'
                  f'{", expects " + repr(attrs["expect"]) if attrs["expect"] else ""}')
        return 0
    failed = skipped = passed = 0
    for where, attrs, body in marked:
        missing = [m for m in (needs.missing(n) for n in attrs['needs']) if m]
        if missing:
            skipped += 1
            print(f'SKIP {where}: {"; ".join(missing)}')
            continue
        ok, why, text = run_block(body, attrs, src, bin_dir, shared)
        if ok:
            passed += 1
            print(f'PASS {where}')
        else:
            failed += 1
            print(f'FAIL {where}: {why}\n--- the block:\n{body}--- its output (last 40 lines):')
            print('\n'.join(text.rstrip('\n').split('\n')[-40:]))
    print(f'doc commands: {len(marked)} blocks, {passed} passed, {failed} failed, {skipped} skipped')
    if failed:
        return 1
    return SKIP if skipped else 0


# ---- links

def anchor_of(heading, seen):
    """GitHub's anchor for a heading's text: formatting dropped, lower case, punctuation other
    than '-' and '_' removed, spaces to '-'; repeats get -1, -2, ..."""
    text = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', heading)
    text = text.replace('`', '').replace('*', '').strip().lower()
    slug = re.sub(r'[^\w\- ]', '', text).replace(' ', '-')
    n = seen.get(slug, 0)
    seen[slug] = n + 1
    return slug if n == 0 else f'{slug}-{n}'


def headings(path):
    """(anchor set, heading texts) of a markdown page, fenced blocks left out."""
    anchors, texts, seen, in_fence = set(), [], {}, None
    for line in open(path, encoding='utf-8'):
        m = FENCE.match(line.rstrip('\n'))
        if m:
            if in_fence is None:
                in_fence = m.group(1)
            elif line.strip() == in_fence:
                in_fence = None
            continue
        if in_fence is None:
            h = re.match(r'^(#{1,6})\s+(.*?)\s*#*\s*$', line)
            if h:
                texts.append(h.group(2))
                anchors.add(anchor_of(h.group(2), seen))
    return anchors, texts


LINK = re.compile(r'\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+"[^"]*")?\)')


def page_links(path):
    """(line, target) of every markdown link outside fenced blocks and code spans."""
    out, in_fence = [], None
    for n, line in enumerate(open(path, encoding='utf-8'), 1):
        m = FENCE.match(line.rstrip('\n'))
        if m:
            if in_fence is None:
                in_fence = m.group(1)
            elif line.strip() == in_fence:
                in_fence = None
            continue
        if in_fence is None:
            for t in LINK.findall(re.sub(r'`[^`]*`', '', line)):
                out.append((n, t))
    return out


REF = re.compile(r'(?<![\w./-])docs/([A-Za-z0-9_./-]+\.md)(?:\s+"([^"]+)")?')
REF_DIRS = ('src', 'include', 'tools', 'tests', 'scripts', 'bench', 'configs', 'deploy', '.ci')
REF_FILES = ('CMakeLists.txt', 'Makefile', 'models/README.md')


def source_refs(src):
    """(file, line, page, heading or None) of every docs/<page>.md ["<heading>"] in the tree."""
    files = [os.path.join(src, f) for f in REF_FILES]
    for d in REF_DIRS:
        for root, dirs, names in os.walk(os.path.join(src, d)):
            # installed packages (npm's node_modules, bench/peers' virtual environment) and
            # bench/peers' outputs are not ours: their own docs/ links mean nothing here
            dirs[:] = [x for x in dirs if x not in ('node_modules', '.venv', 'out')]
            if '/tests/fuzz/corpus' in root or '/tests/fuzz/regress' in root:
                continue
            files += [os.path.join(root, n) for n in names]
    for f in sorted(files):
        if not os.path.isfile(f) or os.path.getsize(f) > 2_000_000:
            continue
        try:
            text = open(f, encoding='utf-8').read()
        except UnicodeDecodeError:
            continue
        for n, line in enumerate(text.split('\n'), 1):
            for m in REF.finditer(line):
                yield f, n, m.group(1), m.group(2)


def check_links(src):
    bad, count = [], 0
    cache = {}

    def page(p):
        if p not in cache:
            cache[p] = headings(p)
        return cache[p]

    for path in doc_files(src):
        for line, target in page_links(path):
            if re.match(r'^[a-z][a-z0-9+.-]*:', target):
                continue  # http:, https:, mailto:
            count += 1
            where = f'{os.path.relpath(path, src)}:{line}'
            file_part, _, anchor = target.partition('#')
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            if not os.path.exists(dest):
                bad.append(f'{where}: {target}: {os.path.relpath(dest, src)} does not exist')
                continue
            if anchor:
                if not dest.endswith('.md') or os.path.isdir(dest):
                    bad.append(f'{where}: {target}: an anchor into something that is not a page')
                elif anchor not in page(dest)[0]:
                    bad.append(f'{where}: {target}: no heading of {os.path.relpath(dest, src)} has the anchor #{anchor}')
    refs = 0
    for f, n, pg, heading in source_refs(src):
        refs += 1
        where = f'{os.path.relpath(f, src)}:{n}'
        dest = os.path.join(src, 'docs', pg)
        if not os.path.isfile(dest):
            bad.append(f'{where}: docs/{pg} does not exist')
        elif heading is not None:
            texts = [t.replace('`', '') for t in page(dest)[1]]
            want = heading.replace('`', '')
            if not any(t == want or t.startswith(want) for t in texts):
                bad.append(f'{where}: docs/{pg} has no heading "{heading}"')
    for b in bad:
        print('FAIL ' + b)
    print(f'doc links: {count} links in {len(doc_files(src))} pages, {refs} references from the '
          f'source tree, {len(bad)} broken')
    return 1 if bad else 0


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--src', default=os.path.normpath(os.path.join(here, '..', '..')))
    ap.add_argument('--bin', help="the build's bin directory (holds tern)")
    ap.add_argument('--shared', help='the shared fixtures folder (default: SRC/../shared)')
    ap.add_argument('--links', action='store_true', help='check links and references only')
    ap.add_argument('--list', action='store_true', help='list the marked blocks, run nothing')
    a = ap.parse_args()
    src = os.path.abspath(a.src)
    if a.links:
        return check_links(src)
    if not a.bin and not a.list:
        ap.error('--bin is required to run the blocks')
    bin_dir = os.path.abspath(a.bin or '.')
    if not a.list and not os.access(os.path.join(bin_dir, 'tern'), os.X_OK):
        print(f'{bin_dir}/tern is missing: build the tern_cli target first')
        return 1
    shared = os.path.abspath(a.shared or os.path.join(src, '..', 'shared'))
    return check_commands(src, bin_dir, shared, a.list)


if __name__ == '__main__':
    sys.exit(main())
