/* cmd_cache.c — `tern cache ls|clear DIR` (inspect / delete prompt-cache files) and
 * `tern cache bench -m MODEL` (the three prompt-cache targets, see src/kv/prefix_bench.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_json.h"

static void help(void)
{
    printf("usage: tern cache ls DIR [--json]\n"
           "       tern cache clear DIR\n"
           "       tern cache bench -m MODEL [-t N] [--requests N] [--reps N] [--block N] [--json]\n"
           "\n"
           "Prompt-cache files (one per block of tokens, *.tkv) are written by a prefix cache with\n"
           "a directory (tern run --prompt-cache DIR). `ls` lists them with their model\n"
           "fingerprint, verifies every checksum and follows each chain of blocks as a run\n"
           "would: a block after a damaged or missing one is unusable, and the longest usable\n"
           "prefix counts only blocks a run can reach. `clear` deletes them.\n"
           "`bench` measures: TTFT of a 1024-token shared prefix + 32-token turn, cold vs cache\n"
           "hit; prefix-token hit rate of N requests (default 200) over 4 system prompts of\n"
           "1-2k tokens; loading a saved 2048-token prefix from disk vs recomputing it.\n"
           "\n"
           "  -m, --model FILE    GGUF model (bench)\n"
           "  -t, --threads N     threads (default: all CPUs)\n"
           "  --requests N        requests of the hit-rate workload (default 200)\n"
           "  --reps N            repetitions of each timing, median reported (default 3)\n"
           "  --block N           tokens per cache block (default 32)\n"
           "  --json              machine-readable output\n");
}

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
    const char *model = NULL, *v;
    long long threads = 0, requests = 0, reps = 0, block = 0;
    bool json = false;
    for (int i = 2; i < argc; i++) {
        int r = 0;
        if (!strcmp(argv[i], "--json")) { json = true; continue; }
#define OPT(name, alt) ((r = cli_opt(argc, argv, &i, name, alt, &v)) != 0)
#define BAD(what) return cli_usage_error("cache", "%s '%s' is not valid", what, v)
        if (OPT("-m", "--model")) { if (r < 0) return 2; model = v; }
        else if (OPT("-t", "--threads")) { if (r < 0) return 2; if (!cli_parse_int(v, 1, 512, &threads)) BAD("-t"); }
        else if (OPT("--requests", NULL)) { if (r < 0) return 2; if (!cli_parse_int(v, 1, 100000, &requests)) BAD("--requests"); }
        else if (OPT("--reps", NULL)) { if (r < 0) return 2; if (!cli_parse_int(v, 1, 1000, &reps)) BAD("--reps"); }
        else if (OPT("--block", NULL)) { if (r < 0) return 2; if (!cli_parse_int(v, 1, 1024, &block)) BAD("--block"); }
        else return cli_usage_error("cache", "unknown option '%s'", argv[i]);
#undef OPT
#undef BAD
    }
    if (!model) return cli_usage_error("cache", "bench: missing -m MODEL");
    return cli_prompt_cache_bench("cache", model, (int)threads, (int)requests, (int)reps, (int)block, json);
}

int cmd_cache(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        help();
        return argc < 2 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
    }
    if (!strcmp(argv[1], "bench")) return cache_bench(argc, argv);
    if (strcmp(argv[1], "ls") && strcmp(argv[1], "clear"))
        return cli_usage_error("cache", "unknown subcommand '%s' (ls, clear, bench)", argv[1]);
    const char *dir = NULL;
    bool json = false;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = true;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { help(); return 0; }
        else if (!dir && argv[i][0] != '-') dir = argv[i];
        else return cli_usage_error("cache", "unexpected argument '%s'", argv[i]);
    }
    if (!dir) return cli_usage_error("cache", "%s: missing DIR", argv[1]);
    if (!strcmp(argv[1], "ls")) return cache_ls(dir, json);
    int n;
    tern_status st = tern_cache_dir_clear(dir, &n);
    if (st) return cli_report("cache", st);
    printf("removed %d cache files from %s\n", n, dir);
    return CLI_EXIT_OK;
}
