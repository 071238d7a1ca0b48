/* replay_main.c — runs a fuzz target's LLVMFuzzerTestOneInput over files, without libFuzzer.
 *
 * ctest links every tests/fuzz/fuzz_<name>.c with this main and passes it the target's seed
 * corpus and regression folders: each file is read whole and fed once, so an input that ever
 * crashed a fuzzer is replayed by every build (under ASan in `make test-asan`). A folder that
 * does not exist is skipped (a target may have no regressions yet); the seed corpus must hold
 * at least one input, or the replay fails: a target with nothing to replay tests nothing. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "replay: cannot open %s\n", path); return -1; }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    for (size_t r; buf && (r = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += r;
        if (n == cap) {
            uint8_t *nb = realloc(buf, cap *= 2);
            if (!nb) { free(buf); buf = NULL; }
            else buf = nb;
        }
    }
    fclose(f);
    if (!buf) { fprintf(stderr, "replay: out of memory reading %s\n", path); return -1; }
    /* an exact-size copy, so ASan sees a read one byte past the input */
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact) { free(buf); return -1; }
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

int main(int argc, char **argv)
{
    int total = 0;
    for (int a = 1; a < argc; a++) {
        DIR *d = opendir(argv[a]);
        if (!d) {
            if (a == 1) { fprintf(stderr, "replay: seed corpus %s missing\n", argv[a]); return 1; }
            continue;
        }
        int n = 0;
        for (struct dirent *e; (e = readdir(d));) {
            char path[4096];
            struct stat st;
            snprintf(path, sizeof path, "%s/%s", argv[a], e->d_name);
            if (stat(path, &st) || !S_ISREG(st.st_mode)) continue;
            if (replay_file(path)) { closedir(d); return 1; }
            n++;
        }
        closedir(d);
        printf("%s: %d inputs replayed\n", argv[a], n);
        if (a == 1 && n == 0) { fprintf(stderr, "replay: seed corpus %s is empty\n", argv[a]); return 1; }
        total += n;
    }
    printf("%d inputs, no crash\n", total);
    return 0;
}
