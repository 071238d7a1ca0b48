/* cmd_train.c — `tern train --config model.json --data DATA -o model.gguf [--resume DIR]`:
 * train a Llama/Qwen2 model on the CPU and export it as an F32 GGUF (tern.h "training").
 *
 * Checkpoints go to --checkpoint-dir (default OUT.ckpt) every ckpt_every steps and at the end;
 * --resume DIR continues from DIR's checkpoint exactly as the uninterrupted run would have.
 * Progress is a line per step on a terminal (step, loss, lr, tokens/s, ETA) or, with --json,
 * one JSON object per step on stdout. A NaN/Inf loss stops the run without touching the last
 * checkpoint. --bench trains a few steps on random tokens and reports throughput. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "tern_train.h"
#include "cli_train.h"

struct train_opts {
    const char *config, *data, *val, *out, *ckdir, *resume, *lora_init;
    bool json, bench, strict, loss_on_prompt;
    int matmul; /* -1 the config's, else 0 f32 / 1 bf16 */
    long long threads, until, bench_steps, val_every;
    struct cli_lora_train_opts lo;
};

static void train_init(void *p)
{
    *(struct train_opts *)p = (struct train_opts){.matmul = -1, .bench_steps = 3};
}

#define T struct train_opts
static const struct cli_option train_table[] = {
    {NULL, "--config", CLI_PATH, "FILE", CLI_AT(T, config),
     .help = "JSON: arch (llama|qwen2), n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx, rope_base, "
             "rms_eps, tied_output, tokenizer (GGUF) or n_vocab; lr, lr_min, warmup, steps, batch_tokens "
             "(tokens per micro-batch, a multiple of n_ctx), accum, weight_decay, beta1, beta2, adam_eps, "
             "clip, init_std, init_std_proj, seed, threads, ckpt_every, matmul (\"f32\" | \"bf16\")"},
    {NULL, "--data", CLI_PATH, "FILE", CLI_AT(T, data),
     .help = "training data: conversations (.jsonl, one {\"messages\", \"tools\"} per line, rendered with "
             "the tokenizer GGUF's chat template, loss on the assistant's turns) or documents of (token "
             "ids, loss mask) (.tdat, format in tern.h)"},
    {NULL, "--val", CLI_PATH, "FILE", CLI_AT(T, val),
     .help = "validation data (.jsonl or .tdat): mean loss every --val-every steps and at the end"},
    {NULL, "--strict", CLI_FLAG, NULL, CLI_AT(T, strict),
     .help = "a malformed .jsonl line is fatal (default: skipped and counted)"},
    {NULL, "--loss-on-prompt", CLI_FLAG, NULL, CLI_AT(T, loss_on_prompt),
     .help = ".jsonl: train on every token of the conversation, not only the assistant's turns (a "
             "language-modelling phase)"},
    {"-o", "--output", CLI_PATH, "FILE", CLI_AT(T, out), .help = "the trained model (GGUF, F32)"},
    {NULL, "--checkpoint-dir", CLI_PATH, "DIR", CLI_AT(T, ckdir), .def = "OUT.ckpt", .help = "checkpoints"},
    {NULL, "--val-every", CLI_INT, "N", CLI_AT(T, val_every), CLI_RANGE(1, 1000000000),
     .def = "ckpt_every, else 100", .help = "steps between validations"},
    {NULL, "--resume", CLI_PATH, "DIR", CLI_AT(T, resume),
     .help = "continue the run saved in DIR (checkpoints keep going there)"},
    {NULL, "--until", CLI_INT, "STEP", CLI_AT(T, until), CLI_RANGE(1, 1000000000), .def = "",
     .help = "stop after this step (checkpoint + export), e.g. to split a run"},
    {"-t", "--threads", CLI_INT, "N", CLI_AT(T, threads), CLI_RANGE(1, 1024), .def = "the config's",
     .help = "override the config's threads"},
    {NULL, "--matmul", CLI_ENUM, "f32|bf16", CLI_AT(T, matmul),
     .choices = (const struct cli_choice[]){{"f32", 0}, {"bf16", 1}, {NULL}}, .def = "the config's",
     .help = "override the config's matmul: bf16 rounds the operands of every matrix product to BF16 "
             "and sums in F32 (AVX512-BF16 CPUs only; weights, optimizer, norms and loss stay F32)"},
    {NULL, "--json", CLI_FLAG, NULL, CLI_AT(T, json), .help = "one JSON object per step on stdout"},
    {NULL, "--bench", CLI_FLAG, NULL, CLI_AT(T, bench), .group = "Benchmark",
     .help = "time training steps on random tokens (default config: n_embd 384, 6 layers, 6 heads, "
             "n_ff 1024, vocab 8192, n_ctx 1024)"},
    {NULL, "--steps", CLI_INT, "N", CLI_AT(T, bench_steps), CLI_RANGE(1, 1000000),
     .help = "--bench: timed steps after one warm-up step"},
    {.kind = CLI_INCLUDE, .sub = cli_lora_train_table, CLI_AT(T, lo)},
    {NULL, "--lora-init", CLI_PATH, "FILE", CLI_AT(T, lora_init),
     .help = "start the adapters from this adapter file (same rank, alpha, targets; fresh optimizer "
             "state) instead of PEFT's init"},
    {0},
};
#undef T

const struct cli_command cli_spec_train = {
    "train", "--config model.json --data DATA.jsonl|.tdat -o model.gguf [options]\n"
    "       tern train --bench [--config model.json] [--steps N] [-t N] [--json]",
    "Trains a llama or qwen2 model from scratch in F32 on the CPU (AdamW, warmup + cosine,\n"
    "gradient clipping and accumulation) and writes it as an F32 GGUF with the tokenizer\n"
    "of the config's \"tokenizer\" GGUF (tern quantize makes Q8_0 etc. from it).\n",
    train_table, CLI_OPTS(struct train_opts, train_init),
    "Data parallelism: mpirun -np N tern train ... splits each step's micro-batches (accum,\n"
    "a multiple of N) over N processes and sums their gradients (Open MPI); process 0\n"
    "prints, validates, checkpoints and exports (docs/train-and-distill.md \"Distillation\").\n",
};

/* Parse the config file at path over *c (the defaults, or a LoRA base's shape). */
static int load_config(const char *path, struct tern_train_config *c)
{
    size_t len;
    char *text = cli_read_file(path, &len);
    if (!text) {
        fprintf(stderr, "tern train: cannot read config %s\n", path);
        return CLI_EXIT_FAIL;
    }
    tern_status st = tern_train_config_parse_over(text, len, c, c);
    free(text);
    if (st) {
        fprintf(stderr, "tern train: %s: %s\n", path, tern_last_error());
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}

/* Random tokens (every one trained on) for --bench: throughput does not depend on the values. */
static tern_status bench_data(const struct tern_train_config *c, const char *path)
{
    struct tern_train_data_writer *w;
    tern_status st = tern_train_data_writer_create(&w);
    if (st) return st;
    int32_t *tok = malloc((size_t)c->n_ctx * sizeof *tok);
    uint64_t s = 1;
    for (int d = 0; !st && d < 64; d++) {
        for (int i = 0; i < c->n_ctx; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            tok[i] = (int32_t)((s >> 33) % (uint64_t)c->n_vocab);
        }
        st = tern_train_data_add(w, tok, NULL, c->n_ctx);
    }
    free(tok);
    if (!st) st = tern_train_data_write(w, path);
    tern_train_data_writer_free(w);
    return st;
}

static int run_bench(struct tern_train_config *c, int steps, bool json)
{
    char path[] = "/tmp/tern-train-bench-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return cli_usage_error("train", "cannot create a temporary file");
    close(fd);
    tern_status st = bench_data(c, path);
    struct tern_train_data *d = NULL;
    struct tern_trainer *t = NULL;
    if (!st) st = tern_train_data_open(path, &d);
    if (!st) st = tern_trainer_create(c, &t);
    if (!st) st = tern_trainer_init(t);
    struct tern_train_step_info si;
    if (!st) st = tern_trainer_step(t, d, &si); /* warm-up: page faults, thread start */
    /* the process's CPU time too: on a loaded machine wall time says little, CPU seconds per
     * step (all threads, waiting included) stay comparable */
    struct timespec c0, c1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    const double t0 = cli_now_s();
    double first_loss = si.loss;
    for (int i = 0; !st && i < steps; i++) st = tern_trainer_step(t, d, &si);
    const double dt = cli_now_s() - t0;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    const double cpu = (double)(c1.tv_sec - c0.tv_sec) + 1e-9 * (double)(c1.tv_nsec - c0.tv_nsec);
    unlink(path);
    if (st) {
        tern_trainer_free(t);
        tern_train_data_free(d);
        return cli_report("train", st);
    }
    const double tok = (double)si.tokens * steps;
    const int nth = c->threads > 0 ? c->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (json)
        printf("{\"bench\":\"train\",\"n_embd\":%d,\"n_layer\":%d,\"n_head\":%d,\"n_ff\":%d,"
               "\"n_vocab\":%d,\"n_ctx\":%d,\"batch_tokens\":%d,\"threads\":%d,\"kernel\":\"%s\","
               "\"steps\":%d,\"seconds\":%.3f,\"tokens_per_s\":%.1f,\"cpu_s_per_step\":%.3f,"
               "\"tokens_per_cpu_s\":%.1f,\"loss_first\":%.4f,\"loss_last\":%.4f}\n",
               c->n_embd, c->n_layer, c->n_head, c->n_ff, c->n_vocab, c->n_ctx,
               c->batch_tokens ? c->batch_tokens : c->n_ctx, nth, tern_trainer_kernel(t), steps, dt,
               tok / dt, cpu / steps, tok / cpu, first_loss, si.loss);
    else
        printf("tern train --bench: n_embd %d, %d layers, %d heads, n_ff %d, vocab %d, n_ctx %d, "
               "%d threads, %s GEMM\n  %d steps of %lld tokens in %.2f s: %.0f tokens/s "
               "(forward + backward + AdamW; data preparation included, the warm-up step not)\n"
               "  CPU time (all threads): %.2f s per step, %.0f tokens per CPU second\n",
               c->n_embd, c->n_layer, c->n_head, c->n_ff, c->n_vocab, c->n_ctx, nth,
               tern_trainer_kernel(t), steps, si.tokens, dt, tok / dt, cpu / steps, tok / cpu);
    tern_trainer_free(t);
    tern_train_data_free(d);
    return CLI_EXIT_OK;
}

int cmd_train(int argc, char **argv)
{
    struct train_opts o;
    train_init(&o);
    const int pr = cli_parse(&cli_spec_train, argc, argv, &o);
    if (pr != CLI_PARSED) return pr;
    const char *config = o.config, *data = o.data, *val = o.val, *out = o.out, *ckdir = o.ckdir,
               *resume = o.resume, *lora_init = o.lora_init;
    const bool json = o.json, bench = o.bench, strict = o.strict, loss_on_prompt = o.loss_on_prompt;
    const long long threads = o.threads, until = o.until, bench_steps = o.bench_steps;
    long long val_every = o.val_every;
    const struct cli_lora_train_opts lo = o.lo;
    struct tern_train_config c = tern_train_config_default();
    if (bench) {
        c.n_embd = 384, c.n_layer = 6, c.n_head = 6, c.n_head_kv = 6, c.n_ff = 1024;
        c.n_vocab = 8192, c.n_ctx = 1024, c.batch_tokens = 1024, c.warmup = 0;
        tern_status lst = cli_lora_train_base(&lo, &c);
        if (lst) return cli_report("train", lst);
        if (config && load_config(config, &c)) return CLI_EXIT_FAIL;
        if (threads) c.threads = (int)threads;
        if (o.matmul >= 0) c.matmul_bf16 = o.matmul == 1;
        if ((lst = cli_lora_train_apply(&lo, &c))) return cli_report("train", lst);
        return run_bench(&c, (int)bench_steps, json);
    }
    if ((!config && !lo.base) || !data || !out)
        return cli_usage_error("train", "need --config (or --lora-base), --data and -o");
    struct cli_par par;
    int prc = cli_par_init("train", &par);
    if (prc) return prc;
    tern_status lst = cli_lora_train_base(&lo, &c);
    if (lst) return cli_report("train", lst);
    if (config && load_config(config, &c)) return CLI_EXIT_FAIL;
    if ((lst = cli_lora_train_apply(&lo, &c))) return cli_report("train", lst);
    if (threads) c.threads = (int)threads;
    if (o.matmul >= 0) c.matmul_bf16 = o.matmul == 1;
    char ckbuf[4096];
    if (!ckdir) {
        if (resume) ckdir = resume;
        else {
            snprintf(ckbuf, sizeof ckbuf, "%s.ckpt", out);
            ckdir = ckbuf;
        }
    }
    if (!c.tokenizer[0] && (cli_ends_with(data, ".jsonl") || (val && cli_ends_with(val, ".jsonl"))))
        return cli_usage_error("train", "conversations (.jsonl) need \"tokenizer\" in the config: "
                               "a GGUF whose tokenizer and chat template render them");
    if (!val_every) val_every = c.ckpt_every > 0 ? c.ckpt_every : 100;
    struct tern_train_data *d = NULL, *vd = NULL;
    struct tern_trainer *t = NULL;
    /* the checkpoint first: a run resumed at or past --until only exports, and needs no data */
    tern_status st = tern_trainer_create(&c, &t);
    if (!st) st = resume ? tern_trainer_checkpoint_load(t, resume) : tern_trainer_init(t);
    if (!st && lora_init && !resume) st = tern_trainer_load_adapter(t, lora_init);
    const bool export_only = !st && until && tern_trainer_step_index(t) >= until;
    if (!st && !export_only)
        st = cli_train_load_data_tmpl("train", data, c.tokenizer, c.chat_template_file, c.n_ctx,
                                      strict, loss_on_prompt, false, NULL, &d);
    if (!st && val && !export_only)
        st = cli_train_load_data_tmpl("train", val, c.tokenizer, c.chat_template_file, c.n_ctx,
                                      strict, false, false, NULL, &vd);
    if (st) {
        tern_trainer_free(t);
        tern_train_data_free(d);
        tern_train_data_free(vd);
        return cli_report("train", st);
    }
    const int start = tern_trainer_step_index(t);
    int last = until && until < c.steps ? (int)until : c.steps;
    if (last < start) last = start;
    if (!json && d && par.rank == 0)
        fprintf(stderr, "tern train: %s, n_embd %d, %d layers, %d/%d heads, n_ff %d, vocab %d, "
                "n_ctx %d; %llu documents, %llu tokens; %s GEMM; steps %d..%d\n",
                c.arch == TERN_ARCH_QWEN2 ? "qwen2" : "llama", c.n_embd, c.n_layer, c.n_head,
                c.n_head_kv, c.n_ff, c.n_vocab, c.n_ctx, (unsigned long long)tern_train_data_n_docs(d),
                (unsigned long long)tern_train_data_n_tokens(d), tern_trainer_kernel(t), start + 1, last);
    if (!json && d && par.rank == 0 && c.lora_base[0]) cli_lora_train_report("train", t, &c);
    if (par.size > 1 && (st = tern_trainer_set_parallel(t, par.rank, par.size, cli_par_allreduce, NULL)))
        return cli_report("train", st);
    const struct cli_train_run run = {.cmd = "train", .t = t, .c = &c, .d = d, .vd = vd,
                                      .ckdir = ckdir, .out = out, .json = json,
                                      .resumed = resume != NULL, .last = last,
                                      .val_every = val_every, .rank = par.rank};
    const int rc = cli_train_loop(&run);
    if (rc == 0) cli_par_finish(); /* a failed process exits without it: mpirun stops the others */
    tern_trainer_free(t);
    tern_train_data_free(d);
    tern_train_data_free(vd);
    return rc;
}
