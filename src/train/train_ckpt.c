/* train_ckpt.c — checkpoints: everything a stopped run needs to continue bit-identically.
 *
 * DIR/checkpoint.bin (little-endian): "TCKP", u32 version, the model shape (arch, n_embd,
 * n_layer, n_head, n_head_kv, n_ff, n_ctx, n_vocab, tied; version 2 adds LoRA's rank, targets,
 * and the bits of alpha and dropout, all 0 for full training) as i32, i32 step, u64 seed, the data
 * position (epoch, cursor, piece, rng), u64 n_params, then weights, AdamW m and v (F32, n_params
 * each), then an FNV-1a 64 checksum of everything before it. Gradients are not saved: a step
 * starts from zero gradients. Written to checkpoint.bin.tmp, fsynced, renamed over the old one
 * and the directory fsynced, so a crash at any moment leaves the previous checkpoint or the new
 * one, never a torn file. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train/train_internal.h"
#include "util/error.h"

#define CKPT_MAGIC "TCKP"
#define CKPT_VERSION 2u
#define CKPT_SHAPE 13

struct ckpt_head {
    char magic[4];
    uint32_t version;
    int32_t shape[CKPT_SHAPE];
    int32_t step;
    uint64_t seed;
    uint64_t dpos[4];
    uint64_t n_params;
};

static void shape_of(const struct tern_trainer *t, int32_t s[CKPT_SHAPE])
{
    int32_t alpha = 0, dropout = 0;
    if (t->lora) {
        memcpy(&alpha, &t->c.lora_alpha, 4);
        memcpy(&dropout, &t->c.lora_dropout, 4);
    }
    const int32_t v[CKPT_SHAPE] = {(int32_t)t->c.arch, t->D, t->L, t->H, t->Hkv, t->F, t->T, t->V,
                                   t->c.tied_output, t->lora ? t->c.lora_rank : 0,
                                   t->lora ? (int32_t)t->c.lora_targets : 0, alpha, dropout};
    memcpy(s, v, sizeof v);
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 0x100000001b3ull;
    return h;
}

static tern_status put(int fd, const void *p, size_t n, uint64_t *h, const char *path)
{
    *h = fnv(*h, p, n);
    const char *c = p;
    while (n > 0) {
        ssize_t k = write(fd, c, n > (1u << 30) ? (1u << 30) : n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return tern_fail(TERN_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        c += k;
        n -= (size_t)k;
    }
    return TERN_OK;
}

tern_status tern_trainer_checkpoint_save(const struct tern_trainer *t, const char *dir)
{
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return tern_fail(TERN_ERR_IO, "checkpoint: cannot create directory %s: %s", dir,
                         strerror(errno));
    char path[4096], tmp[4200];
    if (snprintf(path, sizeof path, "%s/checkpoint.bin", dir) >= (int)sizeof path)
        return tern_fail(TERN_ERR_ARG, "checkpoint: directory name too long");
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return tern_fail(TERN_ERR_IO, "checkpoint: cannot create %s: %s", tmp, strerror(errno));
    struct ckpt_head h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, CKPT_MAGIC, 4);
    h.version = CKPT_VERSION;
    shape_of(t, h.shape);
    h.step = t->step;
    h.seed = t->c.seed;
    h.dpos[0] = t->dpos.epoch;
    h.dpos[1] = t->dpos.cursor;
    h.dpos[2] = t->dpos.piece;
    h.dpos[3] = t->dpos.rng;
    h.n_params = t->n_params;
    uint64_t sum = 0xcbf29ce484222325ull;
    const size_t bytes = t->n_params * sizeof(float);
    tern_status st = put(fd, &h, sizeof h, &sum, tmp);
    if (!st) st = put(fd, t->w, bytes, &sum, tmp);
    if (!st) st = put(fd, t->m, bytes, &sum, tmp);
    if (!st) st = put(fd, t->v, bytes, &sum, tmp);
    uint64_t dummy = 0;
    const uint64_t final = sum;
    if (!st) st = put(fd, &final, sizeof final, &dummy, tmp);
    if (!st && fsync(fd) != 0) st = tern_fail(TERN_ERR_IO, "checkpoint: fsync %s: %s", tmp, strerror(errno));
    if (close(fd) != 0 && !st) st = tern_fail(TERN_ERR_IO, "checkpoint: close %s: %s", tmp, strerror(errno));
    if (!st && rename(tmp, path) != 0)
        st = tern_fail(TERN_ERR_IO, "checkpoint: rename to %s: %s", path, strerror(errno));
    if (st) {
        unlink(tmp);
        return st;
    }
    /* the rename itself must reach the disk */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return TERN_OK;
}

static tern_status get(FILE *f, void *p, size_t n, uint64_t *h, const char *path, long *off)
{
    if (fread(p, 1, n, f) != n)
        return tern_fail(TERN_ERR_FORMAT, "%s: offset %ld: file ends early (truncated checkpoint)",
                         path, *off);
    *off += (long)n;
    *h = fnv(*h, p, n);
    return TERN_OK;
}

tern_status tern_trainer_checkpoint_load(struct tern_trainer *t, const char *dir)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s/checkpoint.bin", dir) >= (int)sizeof path)
        return tern_fail(TERN_ERR_ARG, "checkpoint: directory name too long");
    FILE *f = fopen(path, "rb");
    if (!f) return tern_fail(TERN_ERR_IO, "checkpoint: cannot open %s: %s", path, strerror(errno));
    struct ckpt_head h;
    uint64_t sum = 0xcbf29ce484222325ull, stored = 0, dummy = 0;
    long off = 0;
    tern_status st = get(f, &h, sizeof h, &sum, path, &off);
    int32_t shape[CKPT_SHAPE];
    shape_of(t, shape);
    static const char *names[CKPT_SHAPE] = {"arch", "n_embd", "n_layer", "n_head", "n_head_kv",
                                            "n_ff", "n_ctx", "n_vocab", "tied_output",
                                            "LoRA rank", "LoRA targets (bits)",
                                            "LoRA alpha (bits)", "LoRA dropout (bits)"};
    if (!st && (memcmp(h.magic, CKPT_MAGIC, 4) || h.version != CKPT_VERSION))
        st = tern_fail(TERN_ERR_FORMAT, "%s: offset 0: not a tern checkpoint of version %u "
                       "(version %u)", path, CKPT_VERSION, h.version);
    for (int i = 0; !st && i < CKPT_SHAPE; i++)
        if (h.shape[i] != shape[i])
            st = tern_fail(TERN_ERR_ARG, "%s: the checkpoint has %s %d, the config %d", path,
                           names[i], h.shape[i], shape[i]);
    if (!st && h.n_params != t->n_params)
        st = tern_fail(TERN_ERR_FORMAT, "%s: %llu parameters, expected %llu", path,
                       (unsigned long long)h.n_params, (unsigned long long)t->n_params);
    if (!st && h.step < 0) st = tern_fail(TERN_ERR_FORMAT, "%s: negative step %d", path, h.step);
    /* read into g (scratch until the next step) and m, v; commit w only when all is verified */
    const size_t bytes = t->n_params * sizeof(float);
    if (!st) st = get(f, t->g, bytes, &sum, path, &off);
    if (!st) st = get(f, t->m, bytes, &sum, path, &off);
    if (!st) st = get(f, t->v, bytes, &sum, path, &off);
    if (!st) st = get(f, &stored, sizeof stored, &dummy, path, &off);
    if (!st && stored != sum)
        st = tern_fail(TERN_ERR_FORMAT, "%s: checksum mismatch (the file is damaged)", path);
    fclose(f);
    if (st) {
        memset(t->m, 0, bytes);
        memset(t->v, 0, bytes);
        return st;
    }
    memcpy(t->w, t->g, bytes);
    t->step = h.step;
    t->c.seed = h.seed;
    t->dpos.epoch = h.dpos[0];
    t->dpos.cursor = h.dpos[1];
    t->dpos.piece = h.dpos[2];
    t->dpos.rng = h.dpos[3];
    t->perm_n = 0; /* recompute the order of the restored epoch */
    free(t->perm);
    t->perm = NULL;
    return TERN_OK;
}
