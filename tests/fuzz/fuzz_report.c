/* fuzz_report.c — fuzz target for the speed report reader and `tern gate` (scripts/fuzz.sh;
 * replayed by ctest).
 *
 * The input is a report. bench_report_check must refuse a malformed one with the file named,
 * never crash; an accepted one is gated against itself, with and without the machine-speed
 * allowance, through the public tern_bench_gate (which reads keys the check vouched for without
 * looking again: a report the check passes must not crash it), and an error there must name
 * the file too. Seeds: tests/fuzz/corpus/report (a real report of make demo's model with its
 * machine_speed probes; one made before the probe existed; one whose probe is null). */
#include "bench/bench.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[64]; /* the gate reads files: each accepted input is written here */
static void remove_path(void) { unlink(path); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0 || size > 1 << 18) return 0;
    cJSON *j = NULL;
    tern_status st = bench_report_parse((const char *)data, size, "fuzz.json", &j);
    if (st) {
        if (st != TERN_ERR_NOMEM && !strstr(tern_last_error(), "fuzz.json")) abort();
        return 0;
    }
    cJSON_Delete(j);
    if (!path[0]) {
        snprintf(path, sizeof path, "/tmp/tern-fuzz-report-XXXXXX");
        int fd = mkstemp(path);
        if (fd < 0) return 0;
        close(fd);
        atexit(remove_path);
    }
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    bool ok = fwrite(data, 1, size, f) == size;
    if (fclose(f) || !ok) return 0;
    FILE *null = fopen("/dev/null", "w");
    for (int raw = 0; raw < 2; raw++) {
        struct tern_bench_gate_params p = {.raw = raw, .out = null};
        enum tern_gate_verdict v;
        st = tern_bench_gate(path, path, &p, &v);
        if (st && st != TERN_ERR_NOMEM && !strstr(tern_last_error(), path)) abort();
    }
    if (null) fclose(null);
    return 0;
}
