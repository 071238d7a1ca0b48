/* bench_sha.c — SHA-256 fingerprints of a report (Debian's nettle, already tern's hash library):
 * of a buffer, or of a byte range of a file read in 1 MiB pieces, so a report's fingerprint of a
 * model's tensor data equals `tail -c +$((OFF + 1)) model.gguf | sha256sum`. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nettle/sha2.h>

#include "bench/bench.h"
#include "util/error.h"

static void to_hex(const uint8_t d[32], char hex[65])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        hex[2 * i] = digits[d[i] >> 4];
        hex[2 * i + 1] = digits[d[i] & 15];
    }
    hex[64] = '\0';
}

void bench_sha256_hex(const void *data, size_t n, char hex[65])
{
    struct sha256_ctx c;
    uint8_t d[32];
    sha256_init(&c);
    sha256_update(&c, n, data);
    sha256_digest(&c, sizeof d, d);
    to_hex(d, hex);
}

tern_status bench_sha256_file(const char *path, int64_t off, int64_t len, char hex[65])
{
    FILE *f = fopen(path, "rb");
    if (!f) return tern_fail(TERN_ERR_IO, "fingerprint: cannot open %s: %s", path, strerror(errno));
    if (off > 0 && fseeko(f, off, SEEK_SET) != 0) {
        fclose(f);
        return tern_fail(TERN_ERR_IO, "fingerprint: cannot seek %s to byte %lld", path, (long long)off);
    }
    enum { CHUNK = 1 << 20 };
    uint8_t *buf = malloc(CHUNK);
    if (!buf) {
        fclose(f);
        return tern_fail(TERN_ERR_NOMEM, "fingerprint: out of memory");
    }
    struct sha256_ctx c;
    sha256_init(&c);
    int64_t left = len;
    for (;;) {
        size_t want = CHUNK;
        if (left >= 0 && (int64_t)want > left) want = (size_t)left;
        if (want == 0) break;
        size_t got = fread(buf, 1, want, f);
        if (got) sha256_update(&c, got, buf);
        if (left >= 0) left -= (int64_t)got;
        if (got < want) break;
    }
    bool err = ferror(f) || left > 0;
    free(buf);
    fclose(f);
    if (err)
        return tern_fail(TERN_ERR_IO, "fingerprint: %s ended before byte %lld + %lld", path,
                         (long long)off, (long long)len);
    uint8_t d[32];
    sha256_digest(&c, sizeof d, d);
    to_hex(d, hex);
    return TERN_OK;
}

tern_status tern_sha256_file(const char *path, char hex[65])
{
    return bench_sha256_file(path, 0, -1, hex);
}
