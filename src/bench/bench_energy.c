/* bench_energy.c — energy from Linux powercap (RAPL): the package domains'
 * /sys/class/powercap/<zone>/energy_uj counters, read before and after the timed runs. The
 * counters wrap at max_energy_range_uj and are unwrapped here (a run shorter than one wrap,
 * minutes at full power, is assumed). Where the counters are absent (VMs, non-Intel/AMD kernels
 * without the driver, macOS) or unreadable (recent kernels make energy_uj root-only), the report
 * says so with the reason instead of a number. Package energy covers the whole socket: other
 * processes' work is included, which the report states. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bench/bench.h"

#define POWERCAP "/sys/class/powercap"

static bool read_u64(const char *path, uint64_t *v, int *err)
{
    FILE *f = fopen(path, "r");
    if (!f) { *err = errno; return false; }
    unsigned long long x;
    bool ok = fscanf(f, "%llu", &x) == 1;
    *err = ok ? 0 : (errno ? errno : EIO);
    fclose(f);
    if (ok) *v = x;
    return ok;
}

void bench_energy_start(struct bench_energy *e)
{
    memset(e, 0, sizeof *e);
    DIR *d = opendir(POWERCAP);
    if (!d) {
        snprintf(e->reason, sizeof e->reason, "%s: %s (no powercap/RAPL driver: a VM, or a kernel or "
                 "CPU without it)", POWERCAP, strerror(errno));
        return;
    }
    struct dirent *de;
    int last_err = 0;
    char denied[300] = "";
    while ((de = readdir(d)) && e->n_domains < 4) {
        /* package zones are "intel-rapl:N" (also on AMD); subzones "intel-rapl:N:M" are parts
         * of a package and would count twice */
        const char *n = de->d_name;
        if (strncmp(n, "intel-rapl:", 11) || strchr(n + 11, ':')) continue;
        char p[300], q[300];
        snprintf(p, sizeof p, POWERCAP "/%s/energy_uj", n);
        snprintf(q, sizeof q, POWERCAP "/%s/max_energy_range_uj", n);
        uint64_t v, mx;
        int err;
        if (!read_u64(p, &v, &err)) { last_err = err; snprintf(denied, sizeof denied, "%s", p); continue; }
        if (!read_u64(q, &mx, &err)) mx = 0;
        int i = e->n_domains++;
        snprintf(e->path[i], sizeof e->path[i], "%s", p);
        e->start_uj[i] = v;
        e->max_uj[i] = mx;
    }
    closedir(d);
    if (e->n_domains > 0) { e->available = true; return; }
    if (denied[0])
        snprintf(e->reason, sizeof e->reason, "%s: %s (RAPL counters are root-only on this kernel)",
                 denied, strerror(last_err));
    else
        snprintf(e->reason, sizeof e->reason, "%s has no package (intel-rapl:N) zone", POWERCAP);
}

double bench_energy_joules(struct bench_energy *e)
{
    if (!e->available) return -1;
    double uj = 0;
    for (int i = 0; i < e->n_domains; i++) {
        uint64_t v;
        int err;
        if (!read_u64(e->path[i], &v, &err)) {
            snprintf(e->reason, sizeof e->reason, "%s: %s at the end of the run", e->path[i], strerror(err));
            e->available = false;
            return -1;
        }
        uj += v >= e->start_uj[i] ? (double)(v - e->start_uj[i])
                                  : (double)(e->max_uj[i] - e->start_uj[i] + v);
    }
    return uj * 1e-6;
}
