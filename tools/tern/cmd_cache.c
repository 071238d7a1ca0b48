/* cmd_cache.c — `tern cache ls|clear DIR` (inspect / delete prompt-cache files) and
 * `tern cache bench -m MODEL` (the three prompt-cache targets, see src/kv/prefix_bench.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_json.h"

struct cache_dir_opts {
    const char *dir;
    bool json;
};

#define D struct cache_dir_opts
static const struct cli_option cache_ls_table[] = {
    {.meta = "DIR", .kind = CLI_PATH, CLI_AT(D, dir), .flags = CLI_REQUIRED,
     .help = "a prompt-cache directory (tern run --prompt-cache DIR)"},
    {NULL, "--json", CLI_FLAG, NULL, CLI_AT(D, json), .help = "machine-readable output"},
    {0},
};
static const struct cli_option cache_clear_table[] = {
    {.meta = "DIR", .kind = CLI_PATH, CLI_AT(D, dir), .flags = CLI_REQUIRED,
     .help = "a prompt-cache directory (tern run --prompt-cache DIR)"},
    {0},
};
#undef D

const struct cli_command cli_spec_cache_ls = {
    "cache ls", "DIR [--json]",
    "Prompt-cache files (one per block of tokens, *.tkv) are written by a prefix cache with\n"
    "a directory (tern run --prompt-cache DIR). `ls` lists them with their model\n"
    "fingerprint, verifies every checksum and follows each chain of blocks as a run\n"
    "would: a block after a damaged or missing one is unusable, and the longest usable\n"
    "prefix counts only blocks a run can reach.\n",
    cache_ls_table, CLI_OPTS(struct cache_dir_opts, NULL), NULL,
};

const struct cli_command cli_spec_cache_clear = {
    "cache clear", "DIR", "Deletes the prompt-cache files (*.tkv) of DIR.\n",
    cache_clear_table, CLI_OPTS(struct cache_dir_opts, NULL), NULL,
};

struct cache_bench_opts {
    const char *model;
    long long threads, requests, reps, block;
    bool json;
};

/* 0 leaves a figure to the library's default (tern_prompt_cache_bench_default_params) */
#define B struct cache_bench_opts
static const struct cli_option cache_bench_table[] = {
    {"-m", "--model", CLI_PATH, "FILE", CLI_AT(B, model), .flags = CLI_REQUIRED, .help = "GGUF model"},
    {"-t", "--threads", CLI_INT, "N", CLI_AT(B, threads), CLI_RANGE(1, 512), .def = "all CPUs", .help = "threads"},
    {NULL, "--requests", CLI_INT, "N", CLI_AT(B, requests), CLI_RANGE(1, 100000), .def = "200",
     .help = "requests of the hit-rate workload"},
    {NULL, "--reps", CLI_INT, "N", CLI_AT(B, reps), CLI_RANGE(1, 1000), .def = "3",
     .help = "repetitions of each timing, median reported"},
    {NULL, "--block", CLI_INT, "N", CLI_AT(B, block), CLI_RANGE(1, 1024), .def = "32",
     .help = "tokens per cache block"},
    {NULL, "--json", CLI_FLAG, NULL, CLI_AT(B, json), .help = "machine-readable output"},
    {0},
};
#undef B

const struct cli_command cli_spec_cache_bench = {
    "cache bench", "-m MODEL [-t N] [--requests N] [--reps N] [--block N] [--json]",
    "Measures: TTFT of a 1024-token shared prefix + 32-token turn, cold vs cache\n"
    "hit; prefix-token hit rate of N requests over 4 system prompts of\n"
    "1-2k tokens; loading a saved 2048-token prefix from disk vs recomputing it.\n",
    cache_bench_table, CLI_OPTS(struct cache_bench_opts, NULL), NULL,
};

static void hex8(const uint8_t *p, char *out)
{
    for (int i = 0; i < 8; i++) snprintf(out + 2 * i, 3, "%02x", p[i]);
}

/* A run reaches a block only through every block before it (keys are chained), so the prefix
 * reported is the longest chain of usable blocks, not the deepest intact file. */
static int cache_ls(const char *dir, bool json)
{
    struct tern_cache_file_info *f;
    int n;
    tern_status st = tern_cache_dir_list(dir, &f, &n);
    if (st) return cli_report("cache", st);
    uint64_t bytes = 0;
    int bad = 0, unusable = 0, roots = 0, longest = 0;
    cJSON *j = NULL, *files = NULL;
    if (json) {
        j = cJSON_CreateObject();
        cli_json_str(j, "dir", dir);
        files = cli_json_arr(j, "files");
    }
    for (int i = 0; i < n; i++) {
        char fp[17] = "", tfp[17] = "";
        hex8(f[i].model_fp, fp);
        hex8(f[i].tok_fp, tfp);
        bytes += f[i].file_bytes;
        if (!f[i].valid) bad++;
        if (!f[i].usable) unusable++;
        else {
            if (f[i].depth == 0) roots++;
            int end = (f[i].depth + 1) * f[i].n_tokens; /* fits: the library checks it */
            if (end > longest) longest = end;
        }
        if (json) {
            cJSON *e = cli_json_obj(files, NULL);
            cli_json_str(e, "name", f[i].name);
            cli_json_uint(e, "bytes", f[i].file_bytes);
            cli_json_bool(e, "valid", f[i].valid);
            cli_json_bool(e, "usable", f[i].usable);
            if (f[i].valid) {
                cli_json_int(e, "tokens", f[i].n_tokens);
                cli_json_int(e, "first_pos", (long long)f[i].depth * f[i].n_tokens);
                cli_json_str(e, "model_fp", fp);
                cli_json_str(e, "tokenizer_fp", tfp);
                cli_json_int(e, "layers", f[i].n_layer);
                cli_json_int(e, "kv_heads", f[i].n_head_kv);
                cli_json_int(e, "head_dim", f[i].head_dim);
            }
            if (!f[i].usable) cli_json_str(e, "problem", f[i].problem);
        } else if (f[i].valid) {
            printf("%-36s %9llu bytes  tokens %5d..%-5d  model %s  kv (%d, %d, %d)%s%s\n",
                   f[i].name, (unsigned long long)f[i].file_bytes, f[i].depth * f[i].n_tokens,
                   (f[i].depth + 1) * f[i].n_tokens - 1, fp, f[i].n_layer, f[i].n_head_kv,
                   f[i].head_dim, f[i].usable ? "" : "  UNUSABLE: ", f[i].problem);
        } else {
            printf("%-36s %9llu bytes  INVALID: %s\n", f[i].name,
                   (unsigned long long)f[i].file_bytes, f[i].problem);
        }
    }
    free(f);
    if (json) {
        cli_json_int(j, "n_files", n);
        cli_json_uint(j, "bytes", bytes);
        cli_json_int(j, "invalid", bad);
        cli_json_int(j, "unusable", unusable);
        cli_json_int(j, "prefixes", roots);
        cli_json_int(j, "longest_prefix_tokens", longest);
        return cli_json_emit("cache", stdout, j, false, "", "\n");
    }
    printf("%d files, %.1f MiB, %d invalid, %d unusable; %d distinct first blocks, longest "
           "usable prefix %d tokens\n", n, bytes / 1048576.0, bad, unusable, roots, longest);
    return CLI_EXIT_OK;
}

/* Run the prompt-cache benchmark on one model and print it (shared with `tern bench
 * --prompt-cache`); cmd names the calling subcommand in messages. 0 = defaults. */
int cli_prompt_cache_bench(const char *cmd, const char *model, int threads, int requests,
                           int reps, int block, bool json)
{
    struct tern_model *m;
    tern_status st = tern_model_load(model, &(struct tern_model_params){.prefault = true}, &m);
    if (st) return cli_report(cmd, st);
    struct tern_prompt_cache_bench_params bp = tern_prompt_cache_bench_default_params();
    bp.n_threads = threads;
    bp.n_requests = requests;
    bp.reps = reps;
    bp.block_tokens = block;
    struct tern_prompt_cache_bench_report r;
    st = tern_prompt_cache_bench(m, &bp, &r);
    tern_model_free(m);
    if (st) return cli_report(cmd, st);
    if (json) {
        cJSON *j = cJSON_CreateObject();
        cli_json_int(j, "prefix_tokens", r.prefix_tokens);
        cli_json_int(j, "turn_tokens", r.turn_tokens);
        cli_json_num(j, "ttft_cold_ms", r.ttft_cold_ms);
        cli_json_num(j, "ttft_warm_ms", r.ttft_warm_ms);
        cli_json_num(j, "warm_ratio", r.warm_ratio);
        cli_json_bool(j, "warm_identical", r.warm_identical);
        cli_json_int(j, "n_requests", r.n_requests);
        cli_json_num(j, "hit_rate", r.hit_rate);
        cli_json_num(j, "hit_rate_all_tokens", r.hit_rate_all);
        cli_json_uint(j, "budget_bytes", r.budget_bytes);
        cli_json_uint(j, "evicted_bytes", r.evicted_bytes);
        cli_json_int(j, "disk_tokens", r.disk_tokens);
        cli_json_num(j, "disk_load_ms", r.disk_load_ms);
        cli_json_num(j, "recompute_ms", r.recompute_ms);
        cli_json_num(j, "disk_speedup", r.disk_speedup);
        cli_json_bool(j, "disk_identical", r.disk_identical);
        return cli_json_emit(cmd, stdout, j, false, "", "\n");
    } else {
        printf("TTFT, %d-token prefix + %d-token turn: cold %.1f ms, cache hit %.1f ms "
               "(%.1f%% of cold; target <= 10%%), logits identical: %s\n",
               r.prefix_tokens, r.turn_tokens, r.ttft_cold_ms, r.ttft_warm_ms,
               100 * r.warm_ratio, r.warm_identical ? "yes" : "NO");
        printf("hit rate, %d requests over 4 system prompts: %.1f%% of system-prompt tokens "
               "(target >= 95%%), %.1f%% of all prompt tokens; budget %.1f MiB, evicted %.1f MiB\n",
               r.n_requests, 100 * r.hit_rate, 100 * r.hit_rate_all, r.budget_bytes / 1048576.0,
               r.evicted_bytes / 1048576.0);
        printf("disk, %d-token prefix: load %.1f ms vs recompute %.1f ms (%.1fx; target >= 10x), "
               "logits identical: %s\n", r.disk_tokens, r.disk_load_ms, r.recompute_ms,
               r.disk_speedup, r.disk_identical ? "yes" : "NO");
    }
    return CLI_EXIT_OK;
}

static int cache_bench(int argc, char **argv)
{
    struct cache_bench_opts o = {0};
    const int pr = cli_parse(&cli_spec_cache_bench, argc, argv, &o);
    if (pr != CLI_PARSED) return pr;
    return cli_prompt_cache_bench("cache", o.model, (int)o.threads, (int)o.requests, (int)o.reps,
                                  (int)o.block, o.json);
}

int cmd_cache(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        FILE *f = argc < 2 ? stderr : stdout;
        const struct cli_command *sub[] = {&cli_spec_cache_ls, &cli_spec_cache_clear, &cli_spec_cache_bench};
        for (int i = 0; i < 3; i++) {
            if (i) fputc('\n', f);
            cli_print_help(sub[i], f, 100);
        }
        return argc < 2 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
    }
    if (!strcmp(argv[1], "bench")) return cache_bench(argc - 1, argv + 1);
    const bool ls = !strcmp(argv[1], "ls");
    if (!ls && strcmp(argv[1], "clear"))
        return cli_usage_error("cache", "unknown subcommand '%s' (ls, clear, bench)", argv[1]);
    struct cache_dir_opts o = {0};
    const int pr = cli_parse(ls ? &cli_spec_cache_ls : &cli_spec_cache_clear, argc - 1, argv + 1, &o);
    if (pr != CLI_PARSED) return pr;
    if (ls) return cache_ls(o.dir, o.json);
    int n;
    tern_status st = tern_cache_dir_clear(o.dir, &n);
    if (st) return cli_report("cache", st);
    printf("removed %d cache files from %s\n", n, o.dir);
    return CLI_EXIT_OK;
}
