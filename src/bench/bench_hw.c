/* bench_hw.c — the machine a report was measured on: CPU (vendor, model name, x86 family/model
 * or ARM implementer/part, the ISA features tern's kernels use, the kernel path it dispatches
 * to), online CPUs and physical cores, cache sizes, memory, OS and kernel (from /proc/cpuinfo,
 * /sys/devices/system/cpu, /etc/os-release and uname), and one measured figure: the memory read
 * bandwidth of one thread, since decode speed follows it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "kernels/kernels.h"
#include "util/clock.h"

/* The features that decide tern's kernel paths (and a few that would), in this order. */
static const char *const wanted_isa[] = {
    "sse4_2", "avx", "avx2", "fma", "f16c", "bmi2", "avx512f", "avx512bw", "avx512vl",
    "avx512dq", "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "sha_ni",
    "asimd", "asimddp", "fphp", "asimdhp", "i8mm", "sve", "sve2", "bf16"};

static void copy_value(const char *line, char *out, size_t n)
{
    const char *c = strchr(line, ':');
    if (!c) return;
    c++;
    while (*c == ' ' || *c == '\t') c++;
    snprintf(out, n, "%s", c);
    size_t l = strlen(out);
    while (l && (out[l - 1] == '\n' || out[l - 1] == ' ')) out[--l] = '\0';
}

static void read_cpuinfo(struct bench_hw *hw)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[8192], flags[8192] = "", v[128];
    bool first_cpu_done = false;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '\n') { first_cpu_done = hw->cpu_model[0] || flags[0]; continue; }
        if (first_cpu_done) continue;
        if (!strncmp(line, "vendor_id", 9)) copy_value(line, hw->vendor, sizeof hw->vendor);
        else if (!strncmp(line, "model name", 10)) copy_value(line, hw->cpu_model, sizeof hw->cpu_model);
        else if (!strncmp(line, "cpu family", 10)) { copy_value(line, v, sizeof v); hw->family = atoi(v); }
        else if (!strncmp(line, "model\t", 6) || !strncmp(line, "model :", 7)) { copy_value(line, v, sizeof v); hw->model = atoi(v); }
        else if (!strncmp(line, "flags", 5) || !strncmp(line, "Features", 8)) copy_value(line, flags, sizeof flags);
        else if (!strncmp(line, "CPU implementer", 15)) { copy_value(line, v, sizeof v); hw->family = (int)strtol(v, NULL, 0); }
        else if (!strncmp(line, "CPU part", 8)) { copy_value(line, v, sizeof v); hw->model = (int)strtol(v, NULL, 0); }
    }
    fclose(f);
    /* whole-word matches only: "avx512f" must not match "avx512fp16" */
    size_t used = 0;
    for (size_t k = 0; k < sizeof wanted_isa / sizeof wanted_isa[0]; k++) {
        const char *w = wanted_isa[k];
        size_t wl = strlen(w);
        for (const char *p = flags; (p = strstr(p, w)); p += wl) {
            bool start = p == flags || p[-1] == ' ';
            bool end = p[wl] == ' ' || p[wl] == '\0';
            if (start && end) {
                used += (size_t)snprintf(hw->isa + used, sizeof hw->isa - used, "%s%s", used ? " " : "", w);
                if (used >= sizeof hw->isa) used = sizeof hw->isa - 1;
                break;
            }
        }
    }
}

static int64_t read_int_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long long v = -1;
    if (fscanf(f, "%lld", &v) != 1) v = -1;
    fclose(f);
    return v;
}

static void read_topology(struct bench_hw *hw)
{
    /* distinct (package, core) pairs over the online CPUs */
    long pairs[1024][2];
    int n = 0;
    for (int cpu = 0; cpu < 1024; cpu++) {
        char p[128];
        snprintf(p, sizeof p, "/sys/devices/system/cpu/cpu%d/topology/core_id", cpu);
        int64_t core = read_int_file(p);
        if (core < 0) continue;
        snprintf(p, sizeof p, "/sys/devices/system/cpu/cpu%d/topology/physical_package_id", cpu);
        int64_t pkg = read_int_file(p);
        bool seen = false;
        for (int i = 0; i < n && !seen; i++) seen = pairs[i][0] == pkg && pairs[i][1] == core;
        if (!seen && n < 1024) { pairs[n][0] = (long)pkg; pairs[n][1] = (long)core; n++; }
    }
    hw->cores_physical = n > 0 ? n : -1;
    for (int idx = 0; idx < 8; idx++) {
        char p[128], type[32] = "";
        snprintf(p, sizeof p, "/sys/devices/system/cpu/cpu0/cache/index%d/level", idx);
        int64_t level = read_int_file(p);
        if (level < 1 || level > 3) continue;
        snprintf(p, sizeof p, "/sys/devices/system/cpu/cpu0/cache/index%d/type", idx);
        FILE *f = fopen(p, "r");
        if (f) { if (!fgets(type, sizeof type, f)) type[0] = '\0'; fclose(f); }
        snprintf(p, sizeof p, "/sys/devices/system/cpu/cpu0/cache/index%d/size", idx);
        f = fopen(p, "r");
        long long kb = -1;
        char unit = 'K';
        if (f) { if (fscanf(f, "%lld%c", &kb, &unit) < 1) kb = -1; fclose(f); }
        if (kb < 0) continue;
        int64_t bytes = unit == 'M' ? kb << 20 : kb << 10;
        int slot = level == 1 ? (strncmp(type, "Instruction", 11) ? 1 : 0) : (int)level;
        if (slot <= 3) hw->cache_bytes[slot] = bytes;
    }
}

static void read_os(struct bench_hw *hw)
{
    struct utsname u;
    if (uname(&u) == 0) {
        snprintf(hw->arch, sizeof hw->arch, "%s", u.machine);
        snprintf(hw->kernel, sizeof hw->kernel, "%s %s", u.sysname, u.release);
    }
    FILE *f = fopen("/etc/os-release", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "PRETTY_NAME=", 12)) continue;
        char *s = line + 12;
        if (*s == '"') s++;
        size_t l = strlen(s);
        while (l && (s[l - 1] == '\n' || s[l - 1] == '"')) s[--l] = '\0';
        snprintf(hw->os, sizeof hw->os, "%s", s);
    }
    if (f) fclose(f);
}

/* One thread summing 128 MiB (past any L3 this code will meet), best of 3 passes. The sum is
 * kept so the compiler cannot drop the reads. */
static double measure_bandwidth(void)
{
    const size_t bytes = (size_t)128 << 20, n = bytes / sizeof(uint64_t);
    uint64_t *buf = malloc(bytes);
    if (!buf) return 0;
    for (size_t i = 0; i < n; i++) buf[i] = i;
    double best = 0;
    volatile uint64_t sink = 0;
    for (int pass = 0; pass < 3; pass++) {
        double t0 = util_now_s();
        uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (size_t i = 0; i < n; i += 4) {
            s0 += buf[i];
            s1 += buf[i + 1];
            s2 += buf[i + 2];
            s3 += buf[i + 3];
        }
        double t = util_now_s() - t0;
        sink += s0 + s1 + s2 + s3;
        if (t > 0 && bytes / t / 1e9 > best) best = bytes / t / 1e9;
    }
    (void)sink;
    free(buf);
    return best;
}

void bench_hw_detect(struct bench_hw *hw, bool measure_bw)
{
    memset(hw, 0, sizeof *hw);
    hw->family = hw->model = -1;
    for (int i = 0; i < 4; i++) hw->cache_bytes[i] = -1;
    read_os(hw);
    read_cpuinfo(hw);
    if (!hw->vendor[0]) snprintf(hw->vendor, sizeof hw->vendor, "%s", strncmp(hw->arch, "aarch64", 7) ? "unknown" : "ARM");
    if (!hw->cpu_model[0]) snprintf(hw->cpu_model, sizeof hw->cpu_model, "unknown");
    snprintf(hw->kernel_isa, sizeof hw->kernel_isa, "%s", kern_isa_name());
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    hw->cpus_online = ncpu > 0 ? (int)ncpu : 1;
    read_topology(hw);
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    hw->mem_bytes = pages > 0 && psz > 0 ? (int64_t)pages * psz : -1;
    hw->mem_bw_gbps = measure_bw ? measure_bandwidth() : 0;
}

static void add_int_or_null(cJSON *o, const char *k, int64_t v)
{
    if (v >= 0) cJSON_AddNumberToObject(o, k, (double)v);
    else cJSON_AddNullToObject(o, k);
}

cJSON *bench_hw_json(const struct bench_hw *hw)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "arch", hw->arch);
    cJSON_AddStringToObject(o, "vendor", hw->vendor);
    cJSON_AddStringToObject(o, "cpu_model", hw->cpu_model);
    add_int_or_null(o, "cpu_family", hw->family);
    add_int_or_null(o, "cpu_model_id", hw->model);
    cJSON *isa = cJSON_AddArrayToObject(o, "isa");
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s", hw->isa);
    for (char *save = NULL, *t = strtok_r(tmp, " ", &save); t; t = strtok_r(NULL, " ", &save))
        cJSON_AddItemToArray(isa, cJSON_CreateString(t));
    cJSON_AddStringToObject(o, "kernel_isa", hw->kernel_isa);
    cJSON_AddNumberToObject(o, "cpus_online", hw->cpus_online);
    add_int_or_null(o, "cores_physical", hw->cores_physical);
    cJSON *c = cJSON_AddObjectToObject(o, "caches_bytes");
    add_int_or_null(c, "l1i", hw->cache_bytes[0]);
    add_int_or_null(c, "l1d", hw->cache_bytes[1]);
    add_int_or_null(c, "l2", hw->cache_bytes[2]);
    add_int_or_null(c, "l3", hw->cache_bytes[3]);
    add_int_or_null(o, "memory_bytes", hw->mem_bytes);
    cJSON_AddStringToObject(o, "os", hw->os[0] ? hw->os : "unknown");
    cJSON_AddStringToObject(o, "kernel", hw->kernel);
    if (hw->mem_bw_gbps > 0) cJSON_AddNumberToObject(o, "mem_read_gbps_1thread", hw->mem_bw_gbps);
    else cJSON_AddNullToObject(o, "mem_read_gbps_1thread");
    return o;
}
