/* gguf_write.c — build a GGUF v3 file in memory and write it atomically.
 *
 * Read gguf_internal.h for the file layout. Each KV is held as its key plus the exact bytes its
 * value has on disk (after the u32 type), so copying a KV out of an open file — nested arrays
 * included — is a memcpy of the validated range. Tensor data is copied at add time. The file
 * is streamed to "<path>.tmp", fsync'ed, then renamed over path: a reader sees either the old
 * file or the complete new one, and on any failure the tmp file is removed.
 *
 * The writer's alignment always wins: a "general.alignment" KV is written with that value
 * (whatever was set or copied under that key), and added when the alignment is not 32. */
#include "gguf/gguf_internal.h"
#include "util/error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

struct gguf_wkv {
    char *key;                /* owned, NUL-terminated */
    uint32_t type;            /* enum tern_gguf_type */
    uint8_t *val;             /* owned: value bytes as on disk */
    uint64_t len;
};

struct gguf_wtensor {
    char *name;               /* owned */
    int type;
    int n_dims;
    int64_t ne[TERN_MAX_DIMS];
    uint64_t nbytes;
    void *data;               /* owned copy, nbytes */
};

struct tern_gguf_writer {
    uint32_t alignment;
    struct gguf_wkv *kv;
    int64_t n_kv, cap_kv;
    struct gguf_wtensor *t;
    int64_t n_t, cap_t;
};

tern_status tern_gguf_writer_create(uint32_t alignment, struct tern_gguf_writer **out)
{
    if (!out) return tern_fail(TERN_ERR_ARG, "gguf writer: NULL out");
    if (alignment == 0) alignment = GGUF_DEFAULT_ALIGNMENT;
    if (alignment & (alignment - 1))
        return tern_fail(TERN_ERR_ARG, "gguf writer: alignment %u is not a power of two",
                         alignment);
    struct tern_gguf_writer *w = calloc(1, sizeof *w);
    if (!w) return tern_fail(TERN_ERR_NOMEM, "gguf writer: out of memory");
    w->alignment = alignment;
    *out = w;
    return TERN_OK;
}

void tern_gguf_writer_free(struct tern_gguf_writer *w)
{
    if (!w) return;
    for (int64_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].val);
    }
    for (int64_t i = 0; i < w->n_t; i++) {
        free(w->t[i].name);
        free(w->t[i].data);
    }
    free(w->kv);
    free(w->t);
    free(w);
}

static tern_status check_name(const char *what, const char *name, uint64_t len)
{
    if (len == 0) return tern_fail(TERN_ERR_ARG, "gguf writer: empty %s", what);
    if (len > GGUF_MAX_NAME_LEN)
        return tern_fail(TERN_ERR_ARG, "gguf writer: %s '%.40s...' is %llu bytes (max %u)", what,
                         name, (unsigned long long)len, GGUF_MAX_NAME_LEN);
    return TERN_OK;
}

/* Store key -> (type, value bytes); takes ownership of val (freed on failure too). */
static tern_status set_raw(struct tern_gguf_writer *w, const char *key, uint64_t key_len,
                           uint32_t type, uint8_t *val, uint64_t len)
{
    tern_status st = check_name("key", key, key_len);
    if (st) {
        free(val);
        return st;
    }
    for (int64_t i = 0; i < w->n_kv; i++) {
        if (strlen(w->kv[i].key) == key_len && memcmp(w->kv[i].key, key, key_len) == 0) {
            free(w->kv[i].val);
            w->kv[i].type = type;
            w->kv[i].val = val;
            w->kv[i].len = len;
            return TERN_OK;
        }
    }
    if (w->n_kv == w->cap_kv) {
        int64_t cap = w->cap_kv ? 2 * w->cap_kv : 16;
        struct gguf_wkv *kv = realloc(w->kv, (size_t)cap * sizeof *kv);
        if (!kv) {
            free(val);
            return tern_fail(TERN_ERR_NOMEM, "gguf writer: out of memory for key '%s'", key);
        }
        w->kv = kv;
        w->cap_kv = cap;
    }
    char *k = malloc(key_len + 1);
    if (!k) {
        free(val);
        return tern_fail(TERN_ERR_NOMEM, "gguf writer: out of memory for key '%s'", key);
    }
    memcpy(k, key, key_len);
    k[key_len] = '\0';
    w->kv[w->n_kv++] = (struct gguf_wkv){k, type, val, len};
    return TERN_OK;
}

/* malloc(len) that also succeeds for len 0, with an error message on failure. */
static uint8_t *alloc_val(uint64_t len, const char *key)
{
    uint8_t *p = len <= SIZE_MAX ? malloc(len ? (size_t)len : 1) : NULL;
    if (!p) tern_fail(TERN_ERR_NOMEM, "gguf writer: out of memory for %llu bytes of key '%s'",
                      (unsigned long long)len, key);
    return p;
}

static tern_status set_scalar(struct tern_gguf_writer *w, const char *key, uint32_t type,
                              const void *v, uint64_t size)
{
    if (!w || !key) return tern_fail(TERN_ERR_ARG, "gguf writer: NULL argument");
    uint8_t *val = alloc_val(size, key);
    if (!val) return TERN_ERR_NOMEM;
    memcpy(val, v, size);
    return set_raw(w, key, strlen(key), type, val, size);
}

tern_status tern_gguf_writer_set_u32(struct tern_gguf_writer *w, const char *key, uint32_t v)
{
    return set_scalar(w, key, TERN_GGUF_UINT32, &v, 4);
}

tern_status tern_gguf_writer_set_i32(struct tern_gguf_writer *w, const char *key, int32_t v)
{
    return set_scalar(w, key, TERN_GGUF_INT32, &v, 4);
}

tern_status tern_gguf_writer_set_u64(struct tern_gguf_writer *w, const char *key, uint64_t v)
{
    return set_scalar(w, key, TERN_GGUF_UINT64, &v, 8);
}

tern_status tern_gguf_writer_set_f32(struct tern_gguf_writer *w, const char *key, float v)
{
    return set_scalar(w, key, TERN_GGUF_FLOAT32, &v, 4);
}

tern_status tern_gguf_writer_set_bool(struct tern_gguf_writer *w, const char *key, bool v)
{
    uint8_t b = v ? 1 : 0;
    return set_scalar(w, key, TERN_GGUF_BOOL, &b, 1);
}

tern_status tern_gguf_writer_set_str(struct tern_gguf_writer *w, const char *key, const char *v)
{
    if (!w || !key || !v) return tern_fail(TERN_ERR_ARG, "gguf writer: NULL argument");
    uint64_t n = strlen(v);
    uint8_t *val = alloc_val(8 + n, key);
    if (!val) return TERN_ERR_NOMEM;
    memcpy(val, &n, 8);
    memcpy(val + 8, v, n);
    return set_raw(w, key, strlen(key), TERN_GGUF_STRING, val, 8 + n);
}

tern_status tern_gguf_writer_set_arr(struct tern_gguf_writer *w, const char *key,
                                     enum tern_gguf_type elem_type, const void *data, uint64_t n)
{
    if (!w || !key || (!data && n)) return tern_fail(TERN_ERR_ARG, "gguf writer: NULL argument");
    uint64_t es = gguf_type_size((uint32_t)elem_type);
    if (es == 0)
        return tern_fail(TERN_ERR_ARG, "gguf writer: key '%s': element type %s is not a "
                         "fixed-size type (use set_arr_str for strings)", key,
                         gguf_type_name((uint32_t)elem_type));
    if (n > (UINT64_MAX - 12) / es)
        return tern_fail(TERN_ERR_ARG, "gguf writer: key '%s': %llu elements overflow", key,
                         (unsigned long long)n);
    uint8_t *val = alloc_val(12 + n * es, key);
    if (!val) return TERN_ERR_NOMEM;
    uint32_t et = (uint32_t)elem_type;
    memcpy(val, &et, 4);
    memcpy(val + 4, &n, 8);
    if (n) memcpy(val + 12, data, n * es);
    if (elem_type == TERN_GGUF_BOOL) /* readers (tern's included) accept only 0 and 1 */
        for (uint64_t j = 0; j < n; j++) val[12 + j] = val[12 + j] != 0;
    return set_raw(w, key, strlen(key), TERN_GGUF_ARRAY, val, 12 + n * es);
}

tern_status tern_gguf_writer_set_arr_str(struct tern_gguf_writer *w, const char *key,
                                         const char *const *strs, uint64_t n)
{
    if (!w || !key || (!strs && n)) return tern_fail(TERN_ERR_ARG, "gguf writer: NULL argument");
    uint64_t total = 12;
    for (uint64_t j = 0; j < n; j++) {
        if (!strs[j])
            return tern_fail(TERN_ERR_ARG, "gguf writer: key '%s': string %llu is NULL", key,
                             (unsigned long long)j);
        total += 8 + strlen(strs[j]);
    }
    uint8_t *val = alloc_val(total, key);
    if (!val) return TERN_ERR_NOMEM;
    uint32_t et = TERN_GGUF_STRING;
    memcpy(val, &et, 4);
    memcpy(val + 4, &n, 8);
    uint8_t *p = val + 12;
    for (uint64_t j = 0; j < n; j++) {
        uint64_t len = strlen(strs[j]);
        memcpy(p, &len, 8);
        memcpy(p + 8, strs[j], len);
        p += 8 + len;
    }
    return set_raw(w, key, strlen(key), TERN_GGUF_ARRAY, val, total);
}

tern_status tern_gguf_writer_copy_kv(struct tern_gguf_writer *w, const struct tern_gguf *src,
                                     int64_t i)
{
    if (!w || !src) return tern_fail(TERN_ERR_ARG, "gguf writer: NULL argument");
    if (i < 0 || i >= src->n_kv)
        return tern_fail(TERN_ERR_ARG, "gguf writer: kv index %lld out of range (file has %lld)",
                         (long long)i, (long long)src->n_kv);
    const struct gguf_kv *kv = &src->kv[i];
    /* The key in the file is not NUL-terminated; messages below need a C string. */
    char *key = malloc(kv->key.len + 1);
    uint8_t *val = key ? alloc_val(kv->value_size, "(copied key)") : NULL;
    if (!val) {
        free(key);
        return tern_fail(TERN_ERR_NOMEM, "gguf writer: out of memory copying kv %lld",
                         (long long)i);
    }
    memcpy(key, kv->key.ptr, kv->key.len);
    key[kv->key.len] = '\0';
    memcpy(val, src->data + kv->value_offset, kv->value_size);
    tern_status st = set_raw(w, key, kv->key.len, kv->type, val, kv->value_size);
    free(key);
    return st;
}

tern_status tern_gguf_writer_add_tensor(struct tern_gguf_writer *w, const char *name, int type,
                                        int n_dims, const int64_t *ne, const void *data)
{
    if (!w || !name || !ne) return tern_fail(TERN_ERR_ARG, "gguf writer: NULL argument");
    tern_status st = check_name("tensor name", name, strlen(name));
    if (st) return st;
    for (int64_t i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0)
            return tern_fail(TERN_ERR_ARG, "gguf writer: duplicate tensor '%s'", name);
    int64_t bs = type >= 0 && type < TERN_TYPE_COUNT_ ? tern_type_block_size(type) : 0;
    int64_t bb = type >= 0 && type < TERN_TYPE_COUNT_ ? tern_type_block_bytes(type) : 0;
    if (bs <= 0 || bb <= 0)
        return tern_fail(TERN_ERR_ARG, "gguf writer: tensor '%s': unknown type id %d", name, type);
    if (n_dims < 1 || n_dims > TERN_MAX_DIMS)
        return tern_fail(TERN_ERR_ARG, "gguf writer: tensor '%s': n_dims %d not in 1..%d", name,
                         n_dims, TERN_MAX_DIMS);
    uint64_t n_el = 1;
    for (int d = 0; d < n_dims; d++) {
        if (ne[d] <= 0 || n_el > ((1ull << 62) - 1) / (uint64_t)ne[d])
            return tern_fail(TERN_ERR_ARG, "gguf writer: tensor '%s': dimension %d = %lld "
                             "(must be > 0, element count < 2^62)", name, d, (long long)ne[d]);
        n_el *= (uint64_t)ne[d];
    }
    if (ne[0] % bs != 0)
        return tern_fail(TERN_ERR_ARG, "gguf writer: tensor '%s': dimension 0 = %lld is not a "
                         "multiple of the block size %lld of %s", name, (long long)ne[0],
                         (long long)bs, tern_type_name(type));
    uint64_t blocks = n_el / (uint64_t)bs;
    if (blocks > (uint64_t)INT64_MAX / (uint64_t)bb)
        return tern_fail(TERN_ERR_ARG, "gguf writer: tensor '%s': byte size overflows", name);
    uint64_t nbytes = blocks * (uint64_t)bb;
    if (!data) return tern_fail(TERN_ERR_ARG, "gguf writer: tensor '%s': NULL data", name);

    if (w->n_t == w->cap_t) {
        int64_t cap = w->cap_t ? 2 * w->cap_t : 16;
        struct gguf_wtensor *t = realloc(w->t, (size_t)cap * sizeof *t);
        if (!t) return tern_fail(TERN_ERR_NOMEM, "gguf writer: out of memory");
        w->t = t;
        w->cap_t = cap;
    }
    struct gguf_wtensor t = {.type = type, .n_dims = n_dims, .nbytes = nbytes};
    for (int d = 0; d < TERN_MAX_DIMS; d++) t.ne[d] = d < n_dims ? ne[d] : 1;
    t.name = strdup(name);
    t.data = nbytes <= SIZE_MAX ? malloc((size_t)nbytes) : NULL;
    if (!t.name || !t.data) {
        free(t.name);
        free(t.data);
        return tern_fail(TERN_ERR_NOMEM, "gguf writer: out of memory for %llu bytes of tensor "
                         "'%s'", (unsigned long long)nbytes, name);
    }
    memcpy(t.data, data, (size_t)nbytes);
    w->t[w->n_t++] = t;
    return TERN_OK;
}

/* ---- output: a small buffered writer over a file descriptor ---- */

struct out {
    int fd;
    const char *path;
    uint64_t pos;             /* bytes emitted so far (= file offset) */
    size_t used;
    int err;                  /* errno of the first failure, 0 if none */
    uint8_t buf[1 << 16];
};

static void out_flush(struct out *o)
{
    size_t done = 0;
    while (!o->err && done < o->used) {
        ssize_t n = write(o->fd, o->buf + done, o->used - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) o->err = n < 0 ? errno : EIO;
        else done += (size_t)n;
    }
    o->used = 0;
}

static void out_bytes(struct out *o, const void *p, uint64_t n)
{
    const uint8_t *s = p;
    o->pos += n;
    while (n > 0 && !o->err) {
        size_t k = sizeof o->buf - o->used;
        if (k > n) k = (size_t)n;
        memcpy(o->buf + o->used, s, k);
        o->used += k;
        s += k;
        n -= k;
        if (o->used == sizeof o->buf) out_flush(o);
    }
}

static void out_u32(struct out *o, uint32_t v) { out_bytes(o, &v, 4); }
static void out_u64(struct out *o, uint64_t v) { out_bytes(o, &v, 8); }
static void out_str(struct out *o, const char *s)
{
    uint64_t n = strlen(s);
    out_u64(o, n);
    out_bytes(o, s, n);
}

static void out_pad(struct out *o, uint64_t alignment)
{
    static const uint8_t zeros[64];
    uint64_t pad = (alignment - o->pos % alignment) % alignment;
    while (pad > 0) {
        uint64_t k = pad < sizeof zeros ? pad : sizeof zeros;
        out_bytes(o, zeros, k);
        pad -= k;
    }
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

static void emit(struct tern_gguf_writer *w, struct out *o)
{
    int64_t have_align = -1;
    for (int64_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->kv[i].key, "general.alignment") == 0) have_align = i;
    int add_align = have_align < 0 && w->alignment != GGUF_DEFAULT_ALIGNMENT;

    out_bytes(o, GGUF_MAGIC, 4);
    out_u32(o, 3);
    out_u64(o, (uint64_t)w->n_t);
    out_u64(o, (uint64_t)w->n_kv + (uint64_t)add_align);
    for (int64_t i = 0; i < w->n_kv; i++) {
        out_str(o, w->kv[i].key);
        if (i == have_align) {
            out_u32(o, TERN_GGUF_UINT32);
            out_u32(o, w->alignment);
        } else {
            out_u32(o, w->kv[i].type);
            out_bytes(o, w->kv[i].val, w->kv[i].len);
        }
    }
    if (add_align) {
        out_str(o, "general.alignment");
        out_u32(o, TERN_GGUF_UINT32);
        out_u32(o, w->alignment);
    }
    uint64_t off = 0;
    for (int64_t i = 0; i < w->n_t; i++) {
        const struct gguf_wtensor *t = &w->t[i];
        out_str(o, t->name);
        out_u32(o, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++) out_u64(o, (uint64_t)t->ne[d]);
        out_u32(o, (uint32_t)t->type);
        out_u64(o, off);
        off = align_up(off + t->nbytes, w->alignment);
    }
    out_pad(o, w->alignment);
    for (int64_t i = 0; i < w->n_t; i++) {
        out_bytes(o, w->t[i].data, w->t[i].nbytes);
        if (i + 1 < w->n_t) out_pad(o, w->alignment);
    }
    out_flush(o);
}

/* Make the rename itself durable; failure here is not fatal (the data is already synced). */
static void sync_parent_dir(const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(dir, sizeof dir, ".");
    } else {
        size_t n = (size_t)(slash - path);
        if (n == 0) n = 1;
        if (n >= sizeof dir) return;
        memcpy(dir, path, n);
        dir[n] = '\0';
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

tern_status tern_gguf_writer_write(struct tern_gguf_writer *w, const char *path)
{
    if (!w || !path) return tern_fail(TERN_ERR_ARG, "gguf writer: NULL argument");
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 5);
    struct out *o = malloc(sizeof *o);
    if (!tmp || !o) {
        free(tmp);
        free(o);
        return tern_fail(TERN_ERR_NOMEM, "gguf writer: out of memory");
    }
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);

    tern_status st = TERN_OK;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        st = tern_fail(TERN_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
        goto done;
    }
    o->fd = fd;
    o->path = tmp;
    o->pos = 0;
    o->used = 0;
    o->err = 0;
    emit(w, o);
    if (o->err) {
        st = tern_fail(TERN_ERR_IO, "%s: write failed at offset %llu: %s", tmp,
                       (unsigned long long)o->pos, strerror(o->err));
    } else if (fsync(fd) != 0) {
        st = tern_fail(TERN_ERR_IO, "%s: fsync failed: %s", tmp, strerror(errno));
    }
    if (close(fd) != 0 && !st) st = tern_fail(TERN_ERR_IO, "%s: close failed: %s", tmp,
                                              strerror(errno));
    if (!st && rename(tmp, path) != 0)
        st = tern_fail(TERN_ERR_IO, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
    if (st) unlink(tmp);
    else sync_parent_dir(path);
done:
    free(tmp);
    free(o);
    return st;
}
