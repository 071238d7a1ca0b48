/* bench.h — the bench room's speed governance (read first): one report for every suite run,
 * the hardware it ran on, and the gate that compares two reports (API in tern_bench.h, "speed
 * governance"; docs/bench-and-gate.md "Speed governance" documents the report schema, the profile
 * file and the gate).
 *
 * Files: bench_stats.c (percentiles, medians, spread), bench_sha.c (SHA-256 fingerprints, Debian's
 * nettle), bench_hw.c (CPU, caches, memory, OS, a measured memory bandwidth), bench_calib.c (a
 * machine-speed probe between rounds, so the gate can allow for a slower machine), bench_energy.c
 * (powercap/RAPL), bench_profiles.c (configs/hardware_profiles.yaml through libyaml),
 * bench_suite.c (the suite file), bench_run.c (timing the suite's prompts), bench_report.c (the
 * report's JSON), bench_check.c (reading a report back: every required key, named when absent),
 * bench_gate.c (baseline vs current), bench_html.c (the self-contained HTML page),
 * bench_batch_policy.c (batch 1..4 through the batcher, the offline choice written into a profile).
 *
 * Everything that reaches a report is built with cJSON; a report is an instrument, so a missing
 * piece is an error (a fingerprint that cannot be computed fails the run), never a silent gap. */
#ifndef TERN_BENCH_BENCH_H
#define TERN_BENCH_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "tern_bench.h"

#define BENCH_SCHEMA_VERSION 1

/* ---- bench_stats.c ---- */
/* Percentile q (0..100) of x[0..n) with linear interpolation between closest ranks (numpy's
 * default): monotone in q, so p50 <= p90 <= p95 <= p99 always. x is sorted in place. n > 0. */
double bench_percentile(double *x, int n, double q);
/* Median of x[0..n) (sorted in place). */
double bench_median(double *x, int n);
/* Median absolute deviation over the median: the relative spread of repetitions (0 if n < 2
 * or the median is 0). x is not modified. */
double bench_rel_mad(const double *x, int n);
/* Estimated relative standard error of the median of x[0..n): 1.25 x 1.4826 x rel. MAD /
 * sqrt(n) (the normal-theory SE of a median, the MAD as a robust sigma). */
double bench_rel_se_median(const double *x, int n);
/* {"p50", "p90", "p95", "p99", "mean", "n"} of x[0..n) (sorted in place); the percentiles are
 * null when n == 0. */
cJSON *bench_pct_json(double *x, int n);

/* ---- bench_sha.c: lower-case hex SHA-256 (65 bytes with the NUL) ---- */
void bench_sha256_hex(const void *data, size_t n, char hex[65]);
/* Of the bytes [off, off + len) of a file (len < 0: to its end). */
TERN_NODISCARD tern_status bench_sha256_file(const char *path, int64_t off, int64_t len, char hex[65]);

/* ---- bench_hw.c ---- */
struct bench_hw {
    char arch[72];            /* "x86_64", "aarch64" */
    char vendor[32];          /* "AuthenticAMD", "GenuineIntel", "ARM" ... */
    char cpu_model[128];      /* model name */
    int family, model;        /* x86 family / model (-1 unknown); on ARM the implementer/part */
    char isa[512];            /* space-separated ISA features tern cares about */
    char kernel_isa[16];      /* the kernel path tern dispatches to: avx512, avx2, neon, scalar */
    int cpus_online;
    int cores_physical;       /* -1 unknown */
    int64_t cache_bytes[4];   /* L1d, L2, L3 (index = level; [0] = L1i); -1 unknown */
    int64_t mem_bytes;
    char os[128], kernel[160];
    double mem_bw_gbps;       /* one thread reading 128 MiB, best of 3 passes */
};
/* Detect the machine; measure_bw runs the bandwidth probe (~0.2 s), else mem_bw_gbps = 0. */
void bench_hw_detect(struct bench_hw *hw, bool measure_bw);
cJSON *bench_hw_json(const struct bench_hw *hw);

/* ---- bench_calib.c: the machine's speed, independent of tern's code ---- */
/* GOP/s of a fixed int8 multiply-accumulate loop in L1, best of 5 passes (~40 ms). */
double bench_calib_probe(void);
/* What the probe is (its version, compiler and flags): probes compare only when it is equal. */
const char *bench_calib_method(void);

/* ---- bench_energy.c ---- */
struct bench_energy {
    bool available;
    char reason[256];         /* why not, when not available */
    int n_domains;
    char path[4][300];        /* energy_uj of each package domain */
    uint64_t start_uj[4], max_uj[4];
};
/* Find readable package domains and read their counters now. */
void bench_energy_start(struct bench_energy *e);
/* Joules since start (-1 and a reason when not available). Counters that wrapped are unwrapped. */
double bench_energy_joules(struct bench_energy *e);

/* ---- bench_profiles.c ---- */
struct bench_gate_limits {
    double ttft_regress_pct;      /* TTFT p50/p95 may grow by this much (default 5) */
    double tps_regress_pct;       /* TPS p50/p95 may fall by this much (default 5) */
    double ttfa_p95_max_tokens;   /* TTFA p95 at most this many tokens (default 25) */
    double residency_drop_points; /* residency may fall by this many points (default 10) */
};
struct bench_band {
    char model[128];              /* glob on the model file's base name */
    double tps_p50[2], ttft_ms_p50[2]; /* [lo, hi]; lo = hi = 0 when not given */
};
/* How a suite is measured on the profile's machines unless the command line says otherwise. */
struct bench_measure {
    int threads;                  /* 0 = every online CPU */
    int reps, max_reps;           /* max_reps 0 = a fixed reps rounds */
    double noise_target;          /* relative SE of every median, with max_reps */
};
struct bench_profile {
    char name[64];
    struct bench_measure measure;
    char source[512];             /* FILE:LINE of the profile's entry */
    int batch_interactive, batch_offline;
    double batch_min_tps_gain, batch_max_p95_penalty;
    char kv_precision[16];
    struct bench_gate_limits gate;
    struct bench_band bands[16];
    int n_bands;
};
/* Parse the profile file and pick the first profile whose match (arch, vendor, families, isa)
 * fits hw. Errors name FILE:LINE (libyaml's marks). No profile matching is TERN_ERR_NOT_FOUND. */
TERN_NODISCARD tern_status bench_profile_match(const char *path, const struct bench_hw *hw, struct bench_profile *out);
/* Only parse (every profile checked), for tests and `tern bench --check-profiles`. */
TERN_NODISCARD tern_status bench_profiles_check(const char *path, int *n_profiles);
struct bench_gate_limits bench_gate_default_limits(void);
/* "profile/vendor-fFAMILY-mMODEL/isa/Ncpu": what two reports must share to be compared. */
void bench_profile_key(const struct bench_profile *p, const struct bench_hw *hw, char *out, size_t n);

/* ---- bench_suite.c ---- */
struct bench_prompt {
    int line;                     /* 1-based line in the suite file */
    char *request_json;           /* {"messages": [...], "tools": [...]} */
    char *tools_json;             /* compact tools array or NULL */
};
struct tern_bench_suite {
    char *path;
    struct bench_prompt *prompts;
    int n;
};


/* ---- bench_run.c -> bench_report.c: what a suite run measured ---- */
enum { BENCH_M_TEMPLATE, BENCH_M_TOKENIZER, BENCH_M_PREFILL, BENCH_M_FIRST_STEP, BENCH_M_TTFT,
       BENCH_M_TPS, BENCH_M_TTFA_MS, BENCH_M_COUNT };
struct bench_prompt_run {
    int n_tokens;                 /* prompt tokens */
    int bucket;                   /* 512, 1024, 2048, 4096, or 0 = longer */
    bool has_tools;
    double *samples[BENCH_M_COUNT]; /* [reps] each; TTFA ms < 0 = no valid call in that run */
    int ttfa_tokens;              /* of the first repetition; -1 = no valid call */
    int valid_calls, invalid_calls; /* of the first repetition (before end-of-generation) */
    char tokens_sha[65];          /* SHA-256 of the first repetition's generated token ids */
    bool identical;               /* every repetition generated the same tokens */
};
struct bench_results {
    const struct tern_bench_suite *suite;
    struct tern_bench_suite_params params;
    int n_threads, n_ctx;
    const char *model_path;
    const struct tern_model_info *info;
    uint64_t kv_bytes_per_pos;    /* tern_model_kv_bytes(model, 1): layers may differ (gemma4) */
    struct bench_hw hw;
    struct bench_profile profile;
    char profile_key[256];
    char fp_model[65], fp_tokenizer[65], fp_template[65], fp_suite[65], fp_tools[65], fp_runner[65];
    uint64_t model_data_offset, model_data_bytes;
    char tool_format[32];
    struct bench_prompt_run *runs;  /* [suite->n] */
    struct tern_profile_entry prof[TERN_PROF_COUNT];
    double wall_s;                /* the timed phase */
    double cpu_s;                 /* process CPU time in the timed phase (all threads) */
    double load_start, load_end;  /* 1-minute load average before and after it */
    int64_t tokens_generated, tokens_prompt; /* over the timed phase */
    bool from_profile[4];         /* threads, reps, max_reps, noise_target came from the profile */
    int reps_done;                /* rounds run (params.reps .. max_reps) */
    bool stable;                  /* the noise target was met (always true without max_reps) */
    double rel_se[BENCH_M_COUNT]; /* the estimate when the run stopped (TTFT, TPS) */
    double *calib_gops;           /* [reps_done + 1] machine-speed probes: before round 0 and after
                                     every round (bench_calib.c) */
    int n_calib;
    double energy_j;              /* -1 = unavailable */
    char energy_reason[256];
};
/* The report's JSON from a finished run (caller frees with cJSON_Delete). */
cJSON *bench_report_build(const struct bench_results *r);

/* ---- bench_check.c ---- */
/* Validate a parsed report: schema_version, the required sections and keys, six fingerprints of
 * 64 hex digits, p50 <= p90 <= p95 <= p99 per metric. Errors name path and the key. */
TERN_NODISCARD tern_status bench_report_check(const cJSON *r, const char *path);
/* Parse and check report text (path names it in errors); *out owned by the caller. */
TERN_NODISCARD tern_status bench_report_parse(const char *text, size_t len, const char *path, cJSON **out);
/* Parse and check a report file; *out owned by the caller (cJSON_Delete). Reports are a few
 * KiB; a file past BENCH_REPORT_MAX_BYTES is refused as not one. */
#define BENCH_REPORT_MAX_BYTES (64u << 20)
TERN_NODISCARD tern_status bench_report_load(const char *path, cJSON **out);

#endif
