/* prefix_file.c — prefix-cache blocks on disk: one file per block, written atomically, verified
 * completely before use. Read prefix_cache.h first (what a block is).
 *
 * File "<model fp, 8 hex>-<key, 16 hex>.tkv" = a 256-byte header then the payload:
 *   off  size  field
 *     0     8  magic "TERNKVC1"
 *     8     4  version (1)            12   4  header bytes (256)
 *    16    32  model fingerprint      48  32  tokenizer fingerprint
 *    80    16  kernel ISA name (KV bits depend on it; NUL-padded)
 *    96    4x4 n_layer, n_head_kv, head_dim, KV type (1 = F16)
 *   112     4  block tokens B        116   4  depth (block index)
 *   120     8  key                   128   8  parent key
 *   136     8  payload bytes         144  32  SHA-256 of header (this field zeroed) + payload
 *   176     4  K halves per position over the layers that store KV, when the layers differ
 *              (gemma4); 0 = n_layer x n_head_kv x head_dim (every other model)
 *   180     8  bytes of the recurrent state after the block (qwen35), 0 = none
 *   188     4  flags: bit 0 = the sliding-window layers' rows are zeros (the context had released
 *              them when it stored the block: kv_cache.h); other bits 0
 *   192     8  isolation group of the chain (block 0 only: its key is hash(group, tokens); 0 =
 *              shared, and always 0 for deeper blocks, reached through their parent's key)
 *   200    56  zero
 *   payload: B int32 token ids, then the packed KV run (kv_copy.c), then the state if any (the
 *   F32 state of one sequence as the context keeps it: rec_state.h).
 * All integers little-endian. A file is used only if every field matches this cache and the
 * checksum holds; anything else is refused with the reason and left for the next save to
 * overwrite. One function judges a file's bytes, pc_block_from_bytes (the loader and the fuzz
 * target tests/fuzz/fuzz_cachefile.c call it); the loader checks the header before it reads the
 * payload, and opens only regular files. Writes go to a unique .tmp name, are fsynced, then renamed over the final name, so
 * a crash leaves either the old file or the new one, never a torn one. */
#include "kv/prefix_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/mman.h>
#include <unistd.h>

#include <nettle/sha2.h>

#include "util/check.h"
#include "util/error.h"

#define HDR 256
static const char MAGIC[8] = {'T', 'E', 'R', 'N', 'K', 'V', 'C', '1'};

static void put32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> 8 * i); }
static void put64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> 8 * i); }
static uint32_t get32(const uint8_t *p) { uint32_t v = 0; for (int i = 3; i >= 0; i--) v = v << 8 | p[i]; return v; }
static uint64_t get64(const uint8_t *p) { uint64_t v = 0; for (int i = 7; i >= 0; i--) v = v << 8 | p[i]; return v; }

struct hdr {
    uint8_t model_fp[32], tok_fp[32];
    char isa[17];
    uint32_t n_layer, n_head_kv, head_dim, kv_type, B, depth;
    uint64_t pos_elems; /* K halves per position (offset 176, or its default) */
    uint64_t state_bytes; /* offset 180: the recurrent state carried after the KV, 0 = none */
    uint32_t flags;       /* offset 188 */
    uint64_t group;       /* offset 192 */
    uint64_t key, parent, payload;
    uint8_t sum[32];
};

static void checksum(const uint8_t *hdr, const void *payload, uint64_t n, uint8_t out[32])
{
    uint8_t h[HDR];
    memcpy(h, hdr, HDR);
    memset(h + 144, 0, 32);
    struct sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, HDR, h);
    sha256_update(&c, n, payload);
    sha256_digest(&c, 32, out);
}

/* Structure only (magic, version, sizes); fields are compared by the caller. */
static tern_status parse_header(const uint8_t *p, uint64_t file_bytes, const char *name,
                                struct hdr *h)
{
    if (file_bytes < HDR)
        return tern_fail(TERN_ERR_FORMAT, "cache file %s: %llu bytes, shorter than the %d-byte "
                         "header (truncated)", name, (unsigned long long)file_bytes, HDR);
    if (memcmp(p, MAGIC, 8))
        return tern_fail(TERN_ERR_FORMAT, "cache file %s: bad magic at offset 0 (not a tern KV "
                         "cache file)", name);
    if (get32(p + 8) != 1 || get32(p + 12) != HDR)
        return tern_fail(TERN_ERR_FORMAT, "cache file %s: version %u / header size %u at offset "
                         "8 not supported (expected 1 / %d)", name, get32(p + 8), get32(p + 12), HDR);
    memcpy(h->model_fp, p + 16, 32);
    memcpy(h->tok_fp, p + 48, 32);
    memcpy(h->isa, p + 80, 16);
    h->isa[16] = 0;
    h->n_layer = get32(p + 96);
    h->n_head_kv = get32(p + 100);
    h->head_dim = get32(p + 104);
    h->kv_type = get32(p + 108);
    h->B = get32(p + 112);
    h->depth = get32(p + 116);
    h->key = get64(p + 120);
    h->parent = get64(p + 128);
    h->payload = get64(p + 136);
    memcpy(h->sum, p + 144, 32);
    h->pos_elems = get32(p + 176);
    h->state_bytes = get64(p + 180);
    h->flags = get32(p + 188);
    h->group = get64(p + 192);
    if (h->flags & ~1u)
        return tern_fail(TERN_ERR_FORMAT, "cache file %s: unknown flags 0x%x at offset 188", name, h->flags);
    if (h->kv_type != TERN_TYPE_F16 || !h->n_layer || !h->n_head_kv || !h->head_dim || !h->B ||
        h->n_layer > 4096 || h->n_head_kv > 4096 || h->head_dim > 4096 || h->B > 65536)
        return tern_fail(TERN_ERR_FORMAT, "cache file %s: absurd KV layout at offset 96 (layers "
                         "%u, kv_heads %u, head_dim %u, type %u, block %u)", name, h->n_layer,
                         h->n_head_kv, h->head_dim, h->kv_type, h->B);
    /* positions are ints everywhere (KV cache, walks, listings): the block's last one must fit */
    if ((uint64_t)h->depth * h->B + h->B - 1 > INT32_MAX)
        return tern_fail(TERN_ERR_FORMAT, "cache file %s: absurd depth %u at offset 116 (block "
                         "%u: positions beyond %d)", name, h->depth, h->B, INT32_MAX);
    if (!h->pos_elems) h->pos_elems = (uint64_t)h->n_layer * h->n_head_kv * h->head_dim;
    if (h->state_bytes > ((uint64_t)1 << 40) || h->state_bytes % sizeof(float))
        return tern_fail(TERN_ERR_FORMAT, "cache file %s: absurd recurrent state size %llu at "
                         "offset 180", name, (unsigned long long)h->state_bytes);
    uint64_t want = (uint64_t)h->B * 4 + 2 * sizeof(uint16_t) * h->pos_elems * h->B + h->state_bytes;
    if (h->payload != want)
        return tern_fail(TERN_ERR_FORMAT, "cache file %s: payload size %llu at offset 136 does "
                         "not match its layout (%llu)", name, (unsigned long long)h->payload,
                         (unsigned long long)want);
    if (file_bytes != HDR + h->payload)
        return tern_fail(TERN_ERR_FORMAT, "cache file %s: %llu bytes, expected %llu (truncated "
                         "or extended)", name, (unsigned long long)file_bytes,
                         (unsigned long long)(HDR + h->payload));
    return TERN_OK;
}

static void hex(const uint8_t *p, int n, char *out)
{
    for (int i = 0; i < n; i++) snprintf(out + 2 * i, 3, "%02x", p[i]);
}

/* Open a cache file for reading: only regular files (a FIFO named *.tkv would block the open
 * until a writer came, hence O_NONBLOCK; a directory cannot be read). *size is its length. */
static tern_status open_regular(const char *path, const char *name, int *fd_out, uint64_t *size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return tern_fail(TERN_ERR_IO, "cache file %s: cannot open: %s", name, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) < 0) {
        close(fd);
        return tern_fail(TERN_ERR_IO, "cache file %s: cannot stat: %s", name, strerror(errno));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return tern_fail(TERN_ERR_FORMAT, "cache file %s: not a regular file (a directory, FIFO "
                         "or device named like a cache file); not used", name);
    }
    *fd_out = fd;
    *size = (uint64_t)sb.st_size;
    return TERN_OK;
}

/* Read n bytes at offset 0 of fd into buf. */
static tern_status read_exact(int fd, const char *name, uint8_t *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, buf + got, n - got, (off_t)got);
        if (r <= 0) {
            if (r < 0 && errno == EINTR) continue;
            return tern_fail(TERN_ERR_IO, "cache file %s: read failed at byte %zu: %s", name, got,
                             r < 0 ? strerror(errno) : "unexpected end of file");
        }
        got += (size_t)r;
    }
    return TERN_OK;
}

/* The whole file mapped read-only (tern cache ls checks every block's checksum: a mapping is
 * paged in and dropped by the kernel as the checksum walks it, so a directory of large blocks
 * is listed without holding any of them in memory). Unmap with munmap(*out, *len). */
static tern_status map_all(const char *path, const char *name, uint8_t **out, uint64_t *len)
{
    *out = NULL;
    *len = 0;
    int fd;
    uint64_t size;
    tern_status st = open_regular(path, name, &fd, &size);
    if (st) return st;
    if (size == 0) {
        close(fd);
        return tern_fail(TERN_ERR_FORMAT, "cache file %s: empty", name);
    }
    void *p = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return tern_fail(TERN_ERR_IO, "cache file %s: cannot map: %s", name, strerror(errno));
    madvise(p, (size_t)size, MADV_SEQUENTIAL);
    *out = p;
    *len = size;
    return TERN_OK;
}

/* Compare a parsed header with this cache: model, tokenizer, KV layout, block size, kernel
 * path (what makes a file foreign rather than damaged: checked before the checksum). */
static tern_status match_header(const struct tern_prefix_cache *pc, const struct hdr *h,
                                const char *name)
{
    char a[17], b[17];
    if (memcmp(h->model_fp, pc->model_fp, 32)) {
        hex(h->model_fp, 8, a);
        hex(pc->model_fp, 8, b);
        return tern_fail(TERN_ERR_FORMAT, "cache file %s was made by another model (fingerprint "
                         "%s..., this model %s...); not used", name, a, b);
    }
    if (memcmp(h->tok_fp, pc->tok_fp, 32))
        return tern_fail(TERN_ERR_FORMAT, "cache file %s was made with another tokenizer "
                         "(tokenizer fingerprint differs); not used", name);
    if ((int)h->n_layer != pc->n_layer || (int)h->n_head_kv != pc->n_head_kv ||
        (int)h->head_dim != pc->head_dim || (int)h->B != pc->B || h->pos_elems != pc->pos_elems)
        return tern_fail(TERN_ERR_FORMAT, "cache file %s: KV layout (layers %u, kv_heads %u, "
                         "head_dim %u, block %u) differs from this cache's (%d, %d, %d, %d); not "
                         "used", name, h->n_layer, h->n_head_kv, h->head_dim, h->B, pc->n_layer,
                         pc->n_head_kv, pc->head_dim, pc->B);
    if (h->state_bytes && h->state_bytes != pc->state_bytes)
        return tern_fail(TERN_ERR_FORMAT, "cache file %s: a recurrent state of %llu bytes at offset "
                         "180, this model's is %zu; not used", name,
                         (unsigned long long)h->state_bytes, pc->state_bytes);
    if (strcmp(h->isa, kv_kernel_path()))
        return tern_fail(TERN_ERR_FORMAT, "cache file %s was computed by the %s kernels, this run "
                         "uses %s (results would not be bit-identical); not used", name, h->isa,
                         kv_kernel_path());
    return TERN_OK;
}

/* Block d covers positions d*B .. d*B+B-1, which must be ints; only block 0 has no parent. */
static tern_status check_depth(const struct tern_prefix_cache *pc, const struct hdr *h,
                               const char *name)
{
    if (h->depth && h->group)
        return tern_fail(TERN_ERR_FORMAT, "cache file %s: depth %u at offset 116 with an isolation "
                         "group at offset 192 (only the first block has one); not used", name, h->depth);
    if ((h->depth == 0) != (h->parent == 0))
        return tern_fail(TERN_ERR_FORMAT, "cache file %s: depth %u at offset 116 contradicts "
                         "parent key %016llx at offset 128 (only the first block, depth 0, has "
                         "none); not used", name, h->depth, (unsigned long long)h->parent);
    if (h->depth > (uint32_t)(INT_MAX / pc->B - 1))
        return tern_fail(TERN_ERR_FORMAT, "cache file %s: depth %u at offset 116 puts the "
                         "block's positions past %d; not used", name, h->depth, INT_MAX);
    return TERN_OK;
}

tern_status pc_block_from_bytes(const struct tern_prefix_cache *pc, const uint8_t *p, uint64_t n,
                                const char *name, struct pc_block **out)
{
    struct hdr h;
    tern_status st = parse_header(p, n, name, &h);
    if (!st) st = match_header(pc, &h, name);
    if (st) return st;
    uint8_t sum[32];
    checksum(p, p + HDR, h.payload, sum);
    if (memcmp(sum, h.sum, 32))
        return tern_fail(TERN_ERR_FORMAT, "cache file %s: checksum mismatch (damaged); not used",
                         name);
    if ((st = check_depth(pc, &h, name))) return st;
    /* the payload is exactly B token ids, block_bytes of KV and the state if any (parse_header,
     * match_header) */
    TERN_ASSERT(h.payload == (uint64_t)pc->B * 4 + pc->block_bytes + h.state_bytes);
    const uint8_t *tok = p + HDR; /* not int32-aligned in general: read bytes */
    for (int i = 0; i < pc->B; i++) {
        const int32_t t = (int32_t)get32(tok + 4 * (size_t)i);
        if (t < 0 || t >= pc->n_vocab)
            return tern_fail(TERN_ERR_FORMAT, "cache file %s: token %d at index %d (offset %d) is "
                             "outside the vocabulary (0..%d); not used", name, t, i, HDR + 4 * i,
                             pc->n_vocab - 1);
    }
    struct pc_block *blk = calloc(1, sizeof *blk);
    if (!blk || !(blk->tokens = malloc((size_t)pc->B * sizeof *blk->tokens)) ||
        !(blk->kv = malloc(pc->block_bytes)) ||
        (h.state_bytes && !(blk->state = malloc((size_t)h.state_bytes)))) {
        pc_block_free(blk);
        return tern_fail(TERN_ERR_NOMEM, "cache file %s: out of memory", name);
    }
    for (int i = 0; i < pc->B; i++) blk->tokens[i] = (int32_t)get32(tok + 4 * (size_t)i);
    if (pc_chain_key(h.depth ? h.parent : h.group, blk->tokens, pc->B) != h.key || h.key == h.parent) {
        pc_block_free(blk);
        return tern_fail(TERN_ERR_FORMAT, "cache file %s: its tokens do not hash to its key "
                         "(offset 120); not used", name);
    }
    memcpy(blk->kv, tok + (size_t)pc->B * 4, pc->block_bytes);
    if (h.state_bytes) memcpy(blk->state, tok + (size_t)pc->B * 4 + pc->block_bytes, (size_t)h.state_bytes);
    blk->key = h.key;
    blk->parent = h.parent;
    blk->group = h.group;
    blk->depth = (int)h.depth;
    blk->missing_win = h.flags & 1;
    blk->on_disk = true;
    *out = blk;
    return TERN_OK;
}

/* Verify a whole file against this cache; on success the block is built (caller inserts). The
 * header is checked first, so a file of the wrong size or layout is refused before its payload
 * is read (a huge file named *.tkv costs no memory). */
static tern_status load_block(struct tern_prefix_cache *pc, const char *path, const char *name,
                              struct pc_block **out)
{
    int fd;
    uint64_t size;
    tern_status st = open_regular(path, name, &fd, &size);
    if (st) return st;
    uint8_t head[HDR];
    struct hdr h;
    st = read_exact(fd, name, head, size < HDR ? (size_t)size : HDR);
    if (!st) st = parse_header(head, size, name, &h);
    if (!st) st = match_header(pc, &h, name);
    uint8_t *buf = NULL;
    if (!st && !(buf = malloc((size_t)size)))
        st = tern_fail(TERN_ERR_NOMEM, "cache file %s: out of memory", name);
    if (!st) st = read_exact(fd, name, buf, (size_t)size);
    close(fd);
    if (!st) st = pc_block_from_bytes(pc, buf, size, name, out);
    free(buf);
    return st;
}

static bool is_cache_name(const char *n)
{
    size_t l = strlen(n);
    return l > 4 && !strcmp(n + l - 4, ".tkv");
}

static int cmp_depth(const void *a, const void *b)
{
    const struct { char *name; uint32_t depth; } *x = a, *y = b;
    return (x->depth > y->depth) - (x->depth < y->depth);
}

/* Depth from the header alone, to load shallow blocks first (they are what walks reach). */
static uint32_t peek_depth(const char *path)
{
    uint8_t p[HDR];
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block */
    if (fd < 0) return UINT32_MAX;
    ssize_t r = read(fd, p, HDR);
    close(fd);
    return r == HDR && !memcmp(p, MAGIC, 8) ? get32(p + 116) : UINT32_MAX;
}

tern_status pc_load_dir(struct tern_prefix_cache *pc)
{
    if (mkdir(pc->dir, 0777) < 0 && errno != EEXIST)
        return tern_fail(TERN_ERR_IO, "prompt cache dir %s: cannot create: %s", pc->dir,
                         strerror(errno));
    DIR *d = opendir(pc->dir);
    if (!d) return tern_fail(TERN_ERR_IO, "prompt cache dir %s: cannot open: %s", pc->dir,
                             strerror(errno));
    struct ent { char *name; uint32_t depth; } *ents = NULL;
    size_t n = 0, cap = 0;
    tern_status st = TERN_OK;
    char path[4096];
    for (struct dirent *e; (e = readdir(d));) {
        if (!is_cache_name(e->d_name)) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            void *nw = realloc(ents, cap * sizeof *ents);
            if (!nw) { st = tern_fail(TERN_ERR_NOMEM, "prompt cache dir: out of memory"); break; }
            ents = nw;
        }
        snprintf(path, sizeof path, "%s/%s", pc->dir, e->d_name);
        ents[n].name = strdup(e->d_name);
        ents[n].depth = peek_depth(path);
        if (!ents[n].name) { st = tern_fail(TERN_ERR_NOMEM, "prompt cache dir: out of memory"); break; }
        n++;
    }
    closedir(d);
    if (!st && n) qsort(ents, n, sizeof *ents, cmp_depth); /* qsort(NULL, 0) is undefined */
    pc->loading = true; /* children and orphans are counted once, below */
    for (size_t i = 0; i < n && !st; i++) {
        if (pc->st.bytes + pc->block_bytes > pc->budget) break; /* budget full: rest stays on disk */
        snprintf(path, sizeof path, "%s/%s", pc->dir, ents[i].name);
        struct pc_block *b = NULL;
        tern_status lst = load_block(pc, path, ents[i].name, &b);
        if (lst == TERN_ERR_NOMEM) { st = lst; break; }
        if (lst) {
            pc->st.refused_files++;
            snprintf(pc->warning, sizeof pc->warning, "%s", tern_last_error());
            tern_clear_error();
            continue;
        }
        if (pc_find(pc, b->key)) { pc_block_free(b); continue; }
        if (b->state && pc->st.bytes + pc->block_bytes + pc->state_bytes > pc->budget) {
            pc_block_free(b); /* its state does not fit the budget: it stays on disk */
            continue;
        }
        b->last_used = ++pc->tick;
        if ((st = pc_insert(pc, b))) { pc_block_free(b); break; }
        pc->st.loaded_blocks++;
    }
    for (size_t i = 0; i < n; i++) free(ents[i].name);
    free(ents);
    pc->loading = false;
    pc_recount_children(pc);
    PC_CHECK(pc);
    return st;
}

static tern_status write_all(int fd, const void *p, size_t n, const char *path)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return tern_fail(TERN_ERR_IO, "cache file %s: write failed: %s", path,
                                     w < 0 ? strerror(errno) : "no progress");
        c += w;
        n -= (size_t)w;
    }
    return TERN_OK;
}

tern_status pc_save_block(struct tern_prefix_cache *pc, struct pc_block *b)
{
    uint8_t h[HDR];
    memset(h, 0, sizeof h);
    memcpy(h, MAGIC, 8);
    put32(h + 8, 1);
    put32(h + 12, HDR);
    memcpy(h + 16, pc->model_fp, 32);
    memcpy(h + 48, pc->tok_fp, 32);
    strncpy((char *)h + 80, kv_kernel_path(), 16);
    put32(h + 96, (uint32_t)pc->n_layer);
    put32(h + 100, (uint32_t)pc->n_head_kv);
    put32(h + 104, (uint32_t)pc->head_dim);
    put32(h + 108, TERN_TYPE_F16);
    put32(h + 112, (uint32_t)pc->B);
    put32(h + 116, (uint32_t)b->depth);
    if (pc->pos_elems != (size_t)pc->n_layer * pc->n_head_kv * pc->head_dim)
        put32(h + 176, (uint32_t)pc->pos_elems);
    const uint64_t state = b->state ? pc->state_bytes : 0;
    put64(h + 180, state);
    put32(h + 188, b->missing_win ? 1 : 0);
    put64(h + 120, b->key);
    put64(h + 128, b->parent);
    put64(h + 192, b->group);
    const uint64_t payload = (uint64_t)pc->B * 4 + pc->block_bytes + state;
    put64(h + 136, payload);
    uint8_t *pl = malloc(payload);
    if (!pl) return tern_fail(TERN_ERR_NOMEM, "saving a cache block: out of memory");
    for (int i = 0; i < pc->B; i++) put32(pl + 4 * i, (uint32_t)b->tokens[i]);
    memcpy(pl + (size_t)pc->B * 4, b->kv, pc->block_bytes);
    if (state) memcpy(pl + (size_t)pc->B * 4 + pc->block_bytes, b->state, (size_t)state);
    checksum(h, pl, payload, h + 144);

    char fp[17], path[4096], tmp[4200];
    hex(pc->model_fp, 4, fp);
    snprintf(path, sizeof path, "%s/%s-%016llx.tkv", pc->dir, fp, (unsigned long long)b->key);
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    tern_status st = TERN_OK;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) st = tern_fail(TERN_ERR_IO, "cache file %s: cannot create: %s", tmp, strerror(errno));
    if (!st) st = write_all(fd, h, HDR, tmp);
    if (!st) st = write_all(fd, pl, payload, tmp);
    if (!st && fsync(fd) < 0) st = tern_fail(TERN_ERR_IO, "cache file %s: fsync: %s", tmp, strerror(errno));
    if (fd >= 0 && close(fd) < 0 && !st)
        st = tern_fail(TERN_ERR_IO, "cache file %s: close: %s", tmp, strerror(errno));
    if (!st && rename(tmp, path) < 0)
        st = tern_fail(TERN_ERR_IO, "cache file %s: rename to %s: %s", tmp, path, strerror(errno));
    if (st && fd >= 0) unlink(tmp);
    free(pl);
    if (!st) b->on_disk = true;
    return st;
}

void pc_sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

tern_status tern_prefix_cache_save(struct tern_prefix_cache *pc)
{
    if (!pc->dir) return tern_fail(TERN_ERR_ARG, "prefix cache save: the cache has no directory");
    tern_status st = TERN_OK;
    for (size_t i = 0; i < pc->n_buckets && !st; i++)
        for (struct pc_block *b = pc->buckets[i]; b && !st; b = b->next)
            if (!b->on_disk && !(st = pc_save_block(pc, b))) pc->st.saved_blocks++;
    pc_sync_dir(pc->dir);
    return st;
}

/* ---------------------------------------------------------------- directory tools */

/* What tern_cache_dir_list needs beyond the public entry to follow chains. */
struct ls_link {
    uint64_t key, parent;
    int idx;            /* entry index */
    bool candidate;     /* valid and of this machine's kernel path: chains decide the rest */
    int culprit;        /* unusable: entry index of the first broken link of its chain, or -1 */
    int culprit_depth;  /* ... its depth (when the link is missing: the depth it would have) */
    uint64_t culprit_key;
};

static int cmp_link_key(const void *a, const void *b)
{
    const struct ls_link *x = a, *y = b;
    return (x->key > y->key) - (x->key < y->key);
}

/* Blocks chain only within one model, tokenizer and KV layout (what a run checks per file). */
static bool same_chain_space(const struct tern_cache_file_info *a,
                             const struct tern_cache_file_info *b)
{
    return !memcmp(a->model_fp, b->model_fp, 32) && !memcmp(a->tok_fp, b->tok_fp, 32) &&
           a->n_layer == b->n_layer && a->n_head_kv == b->n_head_kv &&
           a->head_dim == b->head_dim && a->n_tokens == b->n_tokens;
}

/* Mark every valid file a run could reach, as walk() in prefix_cache.c reaches blocks: block 0
 * has parent 0, block d's parent is a usable block d-1 of the same chain space. Files are
 * resolved in order of depth, so a parent's verdict is final before its children ask. The
 * first broken link of a chain is named in every later block's problem. */
struct ls_order {
    int depth, idx;
};

static int cmp_order(const void *a, const void *b)
{
    const struct ls_order *x = a, *y = b;
    if (x->depth != y->depth) return (x->depth > y->depth) - (x->depth < y->depth);
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* Keep `usable` only on the files a run could reach, as walk() in prefix_cache.c reaches
 * blocks: block 0 has parent 0, block d's parent is a usable block d-1 of the same chain space.
 * Files are resolved in order of depth, so a parent's verdict is final before its children
 * ask. Every later block of a broken chain names the chain's first broken link. */
static tern_status resolve_chains(struct tern_cache_file_info *v, int n, struct ls_link *lk)
{
    struct ls_link *by_key = malloc((size_t)(n ? n : 1) * sizeof *by_key);
    struct ls_order *order = malloc((size_t)(n ? n : 1) * sizeof *order);
    if (!by_key || !order) {
        free(by_key);
        free(order);
        return tern_fail(TERN_ERR_NOMEM, "cache dir: out of memory");
    }
    int nk = 0;
    for (int i = 0; i < n; i++)
        if ((lk[i].candidate = v[i].usable)) {
            by_key[nk] = lk[i];
            order[nk++] = (struct ls_order){v[i].depth, i};
        }
    if (nk) { /* qsort(NULL, 0) is undefined */
        qsort(by_key, (size_t)nk, sizeof *by_key, cmp_link_key);
        qsort(order, (size_t)nk, sizeof *order, cmp_order);
    }
    for (int oi = 0; oi < nk; oi++) {
        const int i = order[oi].idx;
        struct tern_cache_file_info *f = &v[i];
        struct ls_link *l = &lk[i];
        l->culprit = -2; /* -2: usable */
        if (f->depth == 0 && l->parent == 0) continue; /* the first block of a chain */
        if (f->depth == 0 || l->parent == 0) {
            /* checksummed, so written so: only a bug could make it; a walk never reaches it */
            snprintf(f->problem, sizeof f->problem, "depth %d with parent key %016llx (offsets "
                     "116, 128): no walk reaches it", f->depth, (unsigned long long)l->parent);
            f->usable = false;
            l->culprit = i;
            l->culprit_depth = f->depth;
            continue;
        }
        /* the parent: same key, same chain space, one block shallower */
        int lo = 0, hi = nk;
        while (lo < hi) {
            int mid = lo + (hi - lo) / 2;
            if (by_key[mid].key < l->parent) lo = mid + 1;
            else hi = mid;
        }
        int par = -1;
        for (int k = lo; k < nk && by_key[k].key == l->parent; k++) {
            int j = by_key[k].idx;
            if (v[j].depth == f->depth - 1 && same_chain_space(&v[j], f)) par = j;
        }
        if (par >= 0 && lk[par].culprit == -2) continue;
        if (par >= 0) {
            l->culprit = lk[par].culprit;
            l->culprit_depth = lk[par].culprit_depth;
            l->culprit_key = lk[par].culprit_key;
        } else {
            /* not among the usable files: damaged or refused (a save names a file by its
             * model fingerprint and key), or missing */
            char want[64], fp[9];
            hex(f->model_fp, 4, fp);
            snprintf(want, sizeof want, "%s-%016llx.tkv", fp, (unsigned long long)l->parent);
            l->culprit = -1;
            for (int j = 0; j < n; j++)
                if (!lk[j].candidate && !strcmp(v[j].name, want)) l->culprit = j;
            l->culprit_depth = f->depth - 1;
            l->culprit_key = l->parent;
        }
        f->usable = false;
        if (l->culprit >= 0)
            snprintf(f->problem, sizeof f->problem, "unreachable: block %d of its chain (%s) is "
                     "not usable", l->culprit_depth, v[l->culprit].name);
        else
            snprintf(f->problem, sizeof f->problem, "unreachable: block %d of its chain (key "
                     "%016llx) is missing", l->culprit_depth, (unsigned long long)l->culprit_key);
    }
    free(by_key);
    free(order);
    return TERN_OK;
}

tern_status tern_cache_dir_list(const char *dir, struct tern_cache_file_info **out, int *n_out)
{
    DIR *d = opendir(dir);
    if (!d) return tern_fail(TERN_ERR_IO, "cache dir %s: cannot open: %s", dir, strerror(errno));
    struct tern_cache_file_info *v = NULL;
    struct ls_link *lk = NULL;
    int n = 0, cap = 0;
    tern_status st = TERN_OK;
    char path[4096];
    for (struct dirent *e; (e = readdir(d)) && !st;) {
        if (!is_cache_name(e->d_name)) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 32;
            void *nw = realloc(v, (size_t)cap * sizeof *v);
            if (nw) v = nw;
            void *nl = nw ? realloc(lk, (size_t)cap * sizeof *lk) : NULL;
            if (nl) lk = nl;
            if (!nw || !nl) { st = tern_fail(TERN_ERR_NOMEM, "cache dir: out of memory"); break; }
        }
        struct ls_link *l = &lk[n];
        memset(l, 0, sizeof *l);
        l->idx = n;
        struct tern_cache_file_info *f = &v[n++];
        memset(f, 0, sizeof *f);
        snprintf(f->name, sizeof f->name, "%s", e->d_name);
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        uint8_t *buf;
        uint64_t len;
        struct hdr h;
        bool other_isa = false;
        tern_status fst = map_all(path, f->name, &buf, &len);
        if (fst == TERN_OK) {
            f->file_bytes = len;
            fst = parse_header(buf, len, f->name, &h);
            if (!fst) {
                memcpy(f->model_fp, h.model_fp, 32);
                memcpy(f->tok_fp, h.tok_fp, 32);
                f->n_layer = (int)h.n_layer;
                f->n_head_kv = (int)h.n_head_kv;
                f->head_dim = (int)h.head_dim;
                f->n_tokens = (int)h.B;
                f->depth = (int)h.depth;
                l->key = h.key;
                l->parent = h.parent;
                uint8_t sum[32];
                checksum(buf, buf + HDR, h.payload, sum);
                if (memcmp(sum, h.sum, 32)) {
                    fst = tern_fail(TERN_ERR_FORMAT, "checksum mismatch (damaged)");
                } else {
                    /* the same checks as load_block that need no model */
                    int32_t *tokens = malloc((size_t)h.B * sizeof *tokens);
                    if (!tokens) {
                        fst = tern_fail(TERN_ERR_NOMEM, "cache dir: out of memory");
                    } else {
                        for (uint32_t i = 0; i < h.B; i++) tokens[i] = (int32_t)get32(buf + HDR + 4 * i);
                        if (pc_chain_key(h.parent, tokens, (int)h.B) != h.key)
                            fst = tern_fail(TERN_ERR_FORMAT, "its tokens do not hash to its key "
                                            "(offset 120)");
                        free(tokens);
                    }
                    other_isa = strcmp(h.isa, kv_kernel_path()) != 0;
                }
            }
            munmap(buf, (size_t)len);
        }
        if (fst == TERN_ERR_NOMEM) st = fst;
        f->valid = fst == TERN_OK;
        f->usable = f->valid && !other_isa;
        if (fst) snprintf(f->problem, sizeof f->problem, "%s", tern_last_error());
        else if (other_isa)
            snprintf(f->problem, sizeof f->problem, "computed by the %s kernels, runs here use %s "
                     "(results would not be bit-identical)", h.isa, kv_kernel_path());
    }
    closedir(d);
    if (!st) st = resolve_chains(v, n, lk);
    free(lk);
    if (st) {
        free(v);
        return st;
    }
    tern_clear_error();
    *out = v;
    *n_out = n;
    return TERN_OK;
}

tern_status tern_cache_dir_clear(const char *dir, int *n_removed)
{
    DIR *d = opendir(dir);
    if (!d) return tern_fail(TERN_ERR_IO, "cache dir %s: cannot open: %s", dir, strerror(errno));
    int n = 0;
    tern_status st = TERN_OK;
    char path[4096];
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        bool tmp = l > 4 && !strcmp(e->d_name + l - 4, ".tmp") && strstr(e->d_name, ".tkv.");
        if (!is_cache_name(e->d_name) && !tmp) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (unlink(path) < 0 && !st)
            st = tern_fail(TERN_ERR_IO, "cache dir %s: cannot delete %s: %s", dir, e->d_name,
                           strerror(errno));
        else
            n++;
    }
    closedir(d);
    pc_sync_dir(dir);
    if (n_removed) *n_removed = n;
    return st;
}
