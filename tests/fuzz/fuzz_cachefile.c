/* fuzz_cachefile.c — fuzz target for the prompt-cache file reader (scripts/fuzz.sh; replayed
 * by ctest). Read src/kv/prefix_file.c first (the .tkv layout).
 *
 * Input: one control byte, then the bytes of a cache file. The file is judged by
 * pc_block_from_bytes (the function the directory loader uses) against a memory-only prefix
 * cache of 2-token blocks on the fixture model qwen2-tiny-q8_0 (../shared/fixtures, found from
 * this file's path or $TERN_SHARED; the target aborts with a message if it is missing). A
 * random mutation almost never survives the SHA-256, so the control byte asks for repairs
 * first, letting the fuzzer reach the checks behind it: bit 0 writes this run's kernel path
 * into the ISA field (seeds made on another CPU stay useful), bit 1 recomputes the key from the
 * parent key and the tokens, bit 2 recomputes the checksum over the header and payload.
 *
 * Every refusal must name the file ("fuzz.tkv"); an accepted block must hold exactly the
 * file's tokens and KV, be consistent (key, depth, vocabulary), survive insertion into the
 * table (whose whole-table check runs in this TERN_CHECKS build) and, at depth 0, be found by
 * a lookup of its tokens. Anything else aborts, so the fuzzer reports it.
 *
 * Seeds (tests/fuzz/corpus/cachefile): real blocks saved by the prefix cache, plus truncated,
 * damaged and inconsistent variants, written by this file's generator:
 *   cc -O1 -DFUZZ_CACHEFILE_SEEDS -Iinclude -Isrc tests/fuzz/fuzz_cachefile.c build/libtern.a \
 *      -lnettle -lcjson -lutf8proc -lm -lpthread -o /tmp/gen && /tmp/gen tests/fuzz/corpus/cachefile */
#include "kv/prefix_cache.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nettle/sha2.h>

#define HDR 256
#define BLOCK 2
#define NAME "fuzz.tkv"
enum { FIX_ISA = 1, FIX_KEY = 2, FIX_SUM = 4 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct tern_model *model;
static struct tern_prefix_cache *cache;

static const char *model_path(void)
{
    static char path[4096];
    static const char rel[] = "fixtures/models/qwen2-tiny-q8_0.gguf";
    const char *shared = getenv("TERN_SHARED");
    if (shared && *shared) {
        snprintf(path, sizeof path, "%s/%s", shared, rel);
        return path;
    }
    /* __FILE__ is <source>/tests/fuzz/fuzz_cachefile.c; the fixtures are <source>/../shared */
    const char *f = __FILE__, *cut = strstr(f, "tests/fuzz/fuzz_cachefile.c");
    snprintf(path, sizeof path, "%.*s../shared/%s", cut ? (int)(cut - f) : 0, f, rel);
    return path;
}

static void setup(void)
{
    if (cache) return;
    const char *path = model_path();
    if (tern_model_load(path, NULL, &model) != TERN_OK) {
        fprintf(stderr, "fuzz_cachefile: cannot load the fixture model %s (%s); set TERN_SHARED "
                "to the folder holding fixtures/\n", path, tern_last_error());
        abort();
    }
    struct tern_prefix_cache_params pp = {.block_tokens = BLOCK};
    if (tern_prefix_cache_create(model, &pp, &cache) != TERN_OK) {
        fprintf(stderr, "fuzz_cachefile: prefix cache: %s\n", tern_last_error());
        abort();
    }
}

static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t rd64(const uint8_t *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }
static void wr64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> 8 * i); }

/* The repairs the control byte asks for, in place on f[0..n). */
static void repair(uint8_t ctl, uint8_t *f, size_t n)
{
    if ((ctl & FIX_ISA) && n >= 96) {
        memset(f + 80, 0, 16);
        memcpy(f + 80, kv_kernel_path(), strnlen(kv_kernel_path(), 16));
    }
    if ((ctl & FIX_KEY) && n >= HDR + 4 * BLOCK) {
        int32_t tok[BLOCK];
        for (int i = 0; i < BLOCK; i++) tok[i] = (int32_t)rd32(f + HDR + 4 * i);
        wr64(f + 120, pc_chain_key(rd64(f + 128), tok, BLOCK));
    }
    if ((ctl & FIX_SUM) && n >= HDR) {
        memset(f + 144, 0, 32);
        struct sha256_ctx c;
        uint8_t sum[32];
        sha256_init(&c);
        sha256_update(&c, n, f);
        sha256_digest(&c, 32, sum);
        memcpy(f + 144, sum, 32);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    if (size == 0) return 0;
    const size_t n = size - 1;
    uint8_t *f = malloc(n ? n : 1); /* exact size: ASan sees a read one byte past the file */
    if (!f) return 0;
    memcpy(f, data + 1, n);
    repair(data[0], f, n);
    struct pc_block *b = NULL;
    tern_status st = pc_block_from_bytes(cache, f, n, NAME, &b);
    if (st != TERN_OK) {
        if (b || !strstr(tern_last_error(), NAME)) {
            fprintf(stderr, "fuzz_cachefile: refusal without the file name: %s\n", tern_last_error());
            abort();
        }
        free(f);
        return 0;
    }
    /* accepted: the block is the file's bytes, and consistent */
    const int B = cache->B;
    bool ok = b && n == HDR + 4 * (size_t)B + cache->block_bytes && b->key == rd64(f + 120) &&
              b->parent == rd64(f + 128) && b->depth == (int)rd32(f + 116) &&
              (b->depth == 0) == (b->parent == 0) &&
              b->key == pc_chain_key(b->parent, b->tokens, B) &&
              !memcmp(b->kv, f + HDR + 4 * B, cache->block_bytes);
    for (int i = 0; ok && i < B; i++)
        ok = b->tokens[i] == (int32_t)rd32(f + HDR + 4 * i) && b->tokens[i] >= 0 &&
             b->tokens[i] < cache->n_vocab;
    if (!ok) {
        fprintf(stderr, "fuzz_cachefile: an accepted block differs from its file\n");
        abort();
    }
    const int depth = b->depth;
    int32_t tokens[BLOCK];
    memcpy(tokens, b->tokens, sizeof tokens);
    if (pc_insert(cache, b) != TERN_OK) {
        pc_block_free(b);
    } else if (depth == 0 && tern_prefix_cache_match(cache, tokens, B) != B) {
        fprintf(stderr, "fuzz_cachefile: an accepted first block is not found by its tokens\n");
        abort();
    }
    tern_prefix_cache_clear(cache);
    free(f);
    return 0;
}

#ifdef FUZZ_CACHEFILE_SEEDS
/* ---------------------------------------------------------------- seed generator */
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *out_dir;

static void put(const char *name, uint8_t ctl, const uint8_t *f, size_t n)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", out_dir, name);
    FILE *o = fopen(p, "wb");
    if (!o || fwrite(&ctl, 1, 1, o) != 1 || (n && fwrite(f, 1, n, o) != n) || fclose(o)) {
        fprintf(stderr, "cannot write %s\n", p);
        exit(1);
    }
}

/* A copy of f with one 32-bit field set. */
static void put_field(const char *name, uint8_t ctl, const uint8_t *f, size_t n, int off, uint32_t v)
{
    uint8_t *g = malloc(n);
    memcpy(g, f, n);
    for (int i = 0; i < 4; i++) g[off + i] = (uint8_t)(v >> 8 * i);
    put(name, ctl, g, n);
    free(g);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
        return 2;
    }
    out_dir = argv[1];
    mkdir(out_dir, 0777);
    char dir[] = "/tmp/fuzz-cachefile-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    setup();
    struct tern_prefix_cache_params pp = {.block_tokens = BLOCK, .dir = dir};
    struct tern_prefix_cache *pc;
    struct tern_context *ctx;
    struct tern_context_params cp = {.n_ctx = 16, .n_threads = 1};
    if (tern_prefix_cache_create(model, &pp, &pc) || tern_context_create(model, &cp, &ctx)) {
        fprintf(stderr, "%s\n", tern_last_error());
        return 1;
    }
    const int32_t prompt[7] = {50256, 464, 2068, 7586, 21831, 18045, 625};
    int reused;
    if (tern_prefix_cache_prefill(pc, ctx, prompt, 7, &reused) || tern_prefix_cache_save(pc)) {
        fprintf(stderr, "%s\n", tern_last_error());
        return 1;
    }
    /* the three saved blocks, by depth */
    uint8_t *blk[3] = {0};
    size_t len[3] = {0};
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!strstr(e->d_name, ".tkv")) continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        FILE *in = fopen(p, "rb");
        uint8_t *buf = malloc(1 << 16);
        size_t n = fread(buf, 1, 1 << 16, in);
        fclose(in);
        unlink(p);
        const uint32_t depth = rd32(buf + 116);
        if (depth < 3) {
            blk[depth] = buf;
            len[depth] = n;
        } else {
            free(buf);
        }
    }
    if (d) closedir(d);
    rmdir(dir);
    if (!blk[0] || !blk[1] || !blk[2]) {
        fprintf(stderr, "expected blocks at depths 0, 1, 2\n");
        return 1;
    }
    const uint8_t *b0 = blk[0], *b1 = blk[1];
    const size_t n = len[0];
    char name[64];
    for (int k = 0; k < 3; k++) {
        snprintf(name, sizeof name, "block%d-asis", k);
        put(name, 0, blk[k], len[k]);
        snprintf(name, sizeof name, "block%d-isa", k);
        put(name, FIX_ISA, blk[k], len[k]);
    }
    put("block1-allfix", FIX_ISA | FIX_KEY | FIX_SUM, b1, n);
    put("empty", 0, b0, 0);
    put("trunc-100", FIX_ISA | FIX_SUM, b0, 100);
    put("trunc-header", FIX_ISA | FIX_SUM, b0, HDR);
    put("trunc-payload", FIX_ISA | FIX_SUM, b0, n - 7);
    put_field("bad-magic", FIX_ISA, b0, n, 4, 0x21212121);
    put_field("bad-version", FIX_ISA, b0, n, 8, 2);
    put_field("bad-layout", FIX_ISA, b0, n, 104, 4096);
    put_field("bad-block", FIX_ISA, b0, n, 112, 3);
    put_field("bad-payload", FIX_ISA, b0, n, 136, 12);
    put_field("other-model", FIX_ISA | FIX_SUM, b0, n, 16, 0xdeadbeef);
    put_field("other-tokenizer", FIX_ISA | FIX_SUM, b0, n, 48, 0xdeadbeef);
    put_field("other-isa", FIX_SUM, b0, n, 80, 0x6f6e); /* "no" */
    put_field("flipped-payload", FIX_ISA, b0, n, 600, 0x01020304);
    put_field("depth-no-parent", FIX_ISA | FIX_SUM, b0, n, 116, 1);
    put_field("depth0-with-parent", FIX_ISA | FIX_SUM, b1, n, 116, 0);
    put_field("depth-huge", FIX_ISA | FIX_SUM, b1, n, 116, 0x80000000u);
    put_field("token-outside-vocab", FIX_ISA | FIX_KEY | FIX_SUM, b0, n, HDR + 4, 50257);
    put_field("token-negative", FIX_ISA | FIX_KEY | FIX_SUM, b0, n, HDR, 0xffffffffu);
    put_field("key-mismatch", FIX_ISA | FIX_SUM, b0, n, HDR + 4, 7);
    for (int k = 0; k < 3; k++) free(blk[k]);
    tern_context_free(ctx);
    tern_prefix_cache_free(pc);
    printf("seeds written to %s\n", out_dir);
    return 0;
}
#endif
