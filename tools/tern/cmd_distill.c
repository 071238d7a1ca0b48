/* cmd_distill.c — `tern distill --teacher T.gguf (--student S.gguf | --student-config cfg.json |
 * --lora-base MODEL) --data train.jsonl [--val val.jsonl] -o student.gguf [--recipe recipe.json]`:
 * train a student to match a teacher (tern.h "distillation"; docs/train-and-distill.md
 * "Distillation: `tern distill`"). With --lora-base the student is a LoRA adapter on that frozen
 * model (the trainer's LoRA, as `tern train --lora-base`), and -o is the adapter.
 *
 * Order of work: the student's config (from its GGUF or its config file) with the recipe's
 * training keys over it; the tokenizer check (teacher and student must share a tokenizer, by
 * fingerprint); with --sequence-kd the teacher's own answers in place of the data's
 * (cli_distill_seqkd.c); the data, rendered once with the student's template; the teacher's signal,
 * read from its cache or computed by tern's inference and cached (in the checkpoint directory
 * unless --teacher-cache says otherwise), so epochs and --resume never run the teacher again;
 * then tern train's loop (cli_train.c): progress, length-aware KD's minings before steps
 * (cli_distill_length.c), validation (KL, CE, top-1 agreement; per length bucket; the safety
 * rail), checkpoints, the stop on NaN/Inf naming the step and the last good checkpoint, export. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "tern_gguf.h"
#include "tern_train.h"
#include "cli_distill_length.h"
#include "cli_distill_seqkd.h"
#include "cli_distill_speed.h"
#include "cli_gov.h"
#include "cli_train.h"

struct distill_opts {
    const char *teacher, *student, *student_cfg, *data, *val, *out, *recipe, *kd_path, *vkd_path,
               *ckdir, *resume, *layers, *speed_cases, *speed_suite, *speed_type;
    const char *lora_init;
    struct cli_lora_train_opts lo;
    long long speed_max, seqkd_max, threads, until, val_every;
    bool json, strict, loss_on_prompt, rebuild, seqkd;
};

static void distill_init(void *p)
{
    *(struct distill_opts *)p = (struct distill_opts){
        .speed_suite = "bench/suites/toolcalls.jsonl", .speed_type = "q8_0", .speed_max = 64,
        .seqkd_max = 512};
}

#define D struct distill_opts
static const struct cli_option distill_table[] = {
    {NULL, "--teacher", CLI_PATH, "FILE", CLI_AT(D, teacher), .flags = CLI_REQUIRED,
     .help = "the teacher model (GGUF)"},
    {NULL, "--student", CLI_PATH, "FILE", CLI_AT(D, student),
     .help = "start from this model (llama/qwen2 GGUF, any weight type)"},
    {NULL, "--student-layers", CLI_STRING, "L", CLI_AT(D, layers),
     .help = "with --student: keep only these blocks of it, e.g. 0,2,4,6 (block j of the student "
             "starts as block L[j] of the file)"},
    {NULL, "--student-config", CLI_PATH, "F", CLI_AT(D, student_cfg),
     .help = "or from scratch: a tern train config (with \"tokenizer\")"},
    {NULL, "--data", CLI_PATH, "FILE", CLI_AT(D, data), .flags = CLI_REQUIRED,
     .help = "training data (.jsonl conversations or .tdat documents)"},
    {NULL, "--val", CLI_PATH, "FILE", CLI_AT(D, val),
     .help = "validation data: loss, KL, CE and top-1 agreement with the teacher every --val-every "
             "steps and at the end"},
    {NULL, "--recipe", CLI_PATH, "FILE", CLI_AT(D, recipe),
     .help = "JSON: top_k (32), temperature (1), kd_weight (1), ce_weight (0.5), qat_start (1 = no "
             "QAT), qat_type (q8_0), qat_lr_scale (0.1), and the training keys lr, lr_min, warmup, "
             "steps, batch_tokens, accum, weight_decay, beta1, beta2, adam_eps, clip, seed, threads, "
             "ckpt_every, n_ctx (over the student's); latency-aware: early_tool_weight (0 = off), "
             "early_tool_n (25), early_tool_warmup_epochs (1), length_kd_weight (0 = off), "
             "length_kd_hinge (0.15), length_kd_slope (1), length_kd_every (100), length_kd_docs (0 = "
             "all); the safety rail rail_ce_rise (0.05); length buckets: shape_buckets "
             "([512,1024,2048,4096] or true; off by default), bucket_weights (0.4,0.4,0.15,0.05), "
             "bucket_alpha (100; 0 = fixed weights)"},
    {"-o", "--output", CLI_PATH, "FILE", CLI_AT(D, out), .flags = CLI_REQUIRED,
     .help = "the distilled student (GGUF, F32; tern quantize it), or with --lora-base its adapter"},
    {NULL, "--teacher-cache", CLI_PATH, "FILE", CLI_AT(D, kd_path), .def = "CKPT/teacher.kd",
     .help = "the teacher's signal on --data"},
    {NULL, "--val-cache", CLI_PATH, "FILE", CLI_AT(D, vkd_path), .def = "CKPT/teacher-val.kd",
     .help = "the same on --val"},
    {NULL, "--rebuild-cache", CLI_FLAG, NULL, CLI_AT(D, rebuild),
     .help = "recompute a cache that does not match (default: refuse it)"},
    {NULL, "--checkpoint-dir", CLI_PATH, "DIR", CLI_AT(D, ckdir), .def = "OUT.ckpt", .help = "checkpoints"},
    {NULL, "--resume", CLI_PATH, "DIR", CLI_AT(D, resume), .help = "continue the run saved in DIR"},
    {NULL, "--until", CLI_INT, "STEP", CLI_AT(D, until), CLI_RANGE(1, 1000000000), .def = "",
     .help = "stop after this step (checkpoint + export)"},
    {NULL, "--val-every", CLI_INT, "N", CLI_AT(D, val_every), CLI_RANGE(1, 1000000000),
     .def = "ckpt_every, else 100", .help = "steps between validations"},
    {NULL, "--speed-cases", CLI_PATH, "FILE", CLI_AT(D, speed_cases),
     .help = "at each validation, speed and quality proxies: tern eval cases answered (constrained) "
             "by the exported student, and a tern bench --suite run; the teacher once at the start"},
    {NULL, "--speed-suite", CLI_PATH, "FILE", CLI_AT(D, speed_suite), .help = "the suite"},
    {NULL, "--speed-max", CLI_INT, "N", CLI_AT(D, speed_max), CLI_RANGE(1, 1000000),
     .help = "the first N cases"},
    {NULL, "--speed-type", CLI_STRING, "TYPE", CLI_AT(D, speed_type), .help = "both measured at this type"},
    {"-t", "--threads", CLI_INT, "N", CLI_AT(D, threads), CLI_RANGE(1, 1024), .def = "the recipe's",
     .help = "trainer and teacher threads"},
    {NULL, "--strict", CLI_FLAG, NULL, CLI_AT(D, strict), .help = "a malformed .jsonl line is fatal"},
    {NULL, "--loss-on-prompt", CLI_FLAG, NULL, CLI_AT(D, loss_on_prompt),
     .help = ".jsonl: train on every token, not only the assistant's turns"},
    {NULL, "--sequence-kd", CLI_FLAG, NULL, CLI_AT(D, seqkd),
     .help = "sequence-level KD: train on the teacher's own answers (each assistant message of --data "
             "answered by the teacher, tool calls constrained; kept in CKPT/teacher-answers.jsonl)"},
    {NULL, "--sequence-kd-max-tokens", CLI_INT, "N", CLI_AT(D, seqkd_max), CLI_RANGE(1, 65536),
     .help = "answers cut at N tokens are left out"},
    {NULL, "--json", CLI_FLAG, NULL, CLI_AT(D, json), .help = "one JSON object per step on stdout"},
    {.kind = CLI_INCLUDE, .sub = cli_lora_train_table, CLI_AT(D, lo)},
    {NULL, "--lora-init", CLI_PATH, "FILE", CLI_AT(D, lora_init),
     .help = "with --lora-base: start from this adapter (its rank, alpha and targets must match)"},
    {0},
};
#undef D

const struct cli_command cli_spec_distill = {
    "distill", "--teacher T.gguf (--student S.gguf | --student-config cfg.json | --lora-base MODEL)\n"
    "                    --data DATA.jsonl|.tdat -o student.gguf [options]",
    "Trains a student (llama or qwen2, F32 on the CPU) to match a teacher (any GGUF tern\n"
    "runs) that shares its tokenizer: KL to the teacher's top-k distribution at temperature\n"
    "tau plus cross-entropy on the data, weighted by the recipe; optional QAT at the end.\n"
    "Give one of --student, --student-config or --lora-base (a LoRA adapter on that frozen\n"
    "model is the student, and -o writes the adapter).\n",
    distill_table, CLI_OPTS(struct distill_opts, distill_init),
    "Data parallelism: mpirun -np N tern distill ... splits each step's micro-batches\n"
    "(accum, a multiple of N) over N processes and sums their gradients (Open MPI);\n"
    "process 0 runs the teacher, prints, validates, checkpoints and exports.\n",
};

/* "0,2,4,6" -> layers (distinct, ascending not required, each < n_file_layers). */
static int parse_layers(const char *v, int n_file_layers, int *layers, int cap, int *n)
{
    *n = 0;
    const char *p = v;
    while (*p) {
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < 0 || x >= n_file_layers || (*end && *end != ','))
            return cli_usage_error("distill", "--student-layers '%s': give block numbers below %d "
                                   "separated by commas", v, n_file_layers);
        for (int j = 0; j < *n; j++)
            if (layers[j] == x)
                return cli_usage_error("distill", "--student-layers '%s': block %ld twice", v, x);
        if (*n == cap) return cli_usage_error("distill", "--student-layers: too many blocks");
        layers[(*n)++] = (int)x;
        p = *end ? end + 1 : end;
        if (*end && !*p) return cli_usage_error("distill", "--student-layers '%s': ends in a comma", v);
    }
    if (!*n) return cli_usage_error("distill", "--student-layers: empty list");
    return CLI_EXIT_OK;
}

static void hex(const uint8_t d[32], char out[65])
{
    static const char x[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) out[2 * i] = x[d[i] >> 4], out[2 * i + 1] = x[d[i] & 15];
    out[64] = 0;
}

/* The student's tokenizer (its GGUF, or its config's "tokenizer") against the teacher's. */
static int check_tokenizers(const struct tern_model *teacher, const char *teacher_path,
                            const char *student_tok)
{
    uint8_t a[32], b[32];
    struct tern_gguf *g = NULL;
    tern_status st = tern_tokenizer_fingerprint(teacher, a);
    if (!st) st = tern_gguf_open(student_tok, &g);
    if (!st) st = tern_gguf_tokenizer_fingerprint(g, b);
    tern_gguf_close(g);
    if (st) return cli_report("distill", st);
    if (memcmp(a, b, 32)) {
        char ha[65], hb[65];
        hex(a, ha);
        hex(b, hb);
        fprintf(stderr, "tern distill: the teacher and the student have different tokenizers: "
                "teacher %s has tokenizer fingerprint %s, student tokenizer %s has %s; a student "
                "must share its teacher's vocabulary\n", teacher_path, ha, student_tok, hb);
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}

/* What the exported student records of its making: the fingerprints of teacher, tokenizer and
 * data (SHA-256, hex), the effective recipe (with the training keys) and the binary. */
static tern_status record_run(struct tern_trainer *t, const struct tern_model *teacher,
                              const struct tern_train_data *d, const struct tern_train_config *c,
                              const struct tern_distill_recipe *r, const char *student)
{
    uint8_t fp[32];
    char h[65], json[1024];
    tern_status st = tern_model_fingerprint(teacher, fp);
    if (!st) hex(fp, h), st = tern_trainer_set_export_str(t, "tern.distill.teacher_fingerprint", h);
    if (!st) st = tern_tokenizer_fingerprint(teacher, fp);
    if (!st) hex(fp, h), st = tern_trainer_set_export_str(t, "tern.distill.tokenizer_fingerprint", h);
    if (!st) {
        tern_train_data_fingerprint(d, fp);
        hex(fp, h);
        st = tern_trainer_set_export_str(t, "tern.distill.data_fingerprint", h);
    }
    snprintf(json, sizeof json,
             "{\"top_k\":%d,\"temperature\":%.9g,\"kd_weight\":%.9g,\"ce_weight\":%.9g,"
             "\"qat_start\":%.9g,\"qat_type\":\"%s\",\"qat_lr_scale\":%.9g,\"lr\":%.9g,"
             "\"lr_min\":%.9g,\"warmup\":%d,\"steps\":%d,\"batch_tokens\":%d,\"accum\":%d,"
             "\"weight_decay\":%.9g,\"clip\":%.9g,\"seed\":%llu,\"threads\":%d,\"n_ctx\":%d,"
             "\"early_tool_weight\":%.9g,\"early_tool_n\":%d,\"early_tool_warmup_epochs\":%.9g}",
             r->top_k, r->temperature, r->kd_weight, r->ce_weight, r->qat_start, r->qat_type,
             r->qat_lr_scale, c->lr, c->lr_min, c->warmup, c->steps,
             c->batch_tokens ? c->batch_tokens : c->n_ctx, c->accum, c->weight_decay, c->clip,
             (unsigned long long)c->seed, c->threads, c->n_ctx, r->early_tool_weight,
             r->early_tool_n, r->early_tool_warmup_epochs);
    if (!st) st = tern_trainer_set_export_str(t, "tern.distill.recipe", json);
    if (!st) st = tern_trainer_set_export_str(t, "tern.distill.student_init", student ? student : "config");
    if (!st) st = tern_trainer_set_export_str(t, "tern.distill.binary", tern_version());
    return st;
}

static int read_json(const char *what, const char *path, char **text, size_t *len)
{
    if (!(*text = cli_read_file(path, len))) {
        fprintf(stderr, "tern distill: cannot read %s %s: %s\n", what, path, strerror(errno));
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}

static void progress(void *user, uint64_t done, uint64_t n)
{
    const char *what = user;
    if (done == n || (done % 256 == 0 && isatty(STDERR_FILENO)))
        fprintf(stderr, "\rtern distill: teacher on %s: %llu/%llu documents%s", what,
                (unsigned long long)done, (unsigned long long)n, done == n ? "\n" : "");
}

/* The teacher's signal on d: opened from path when it matches, else computed (see tern.h). */
static tern_status teacher_signal(struct tern_model *teacher, const struct tern_train_data *d,
                                  const struct tern_train_config *c,
                                  const struct tern_distill_recipe *r, const char *path,
                                  bool rebuild, const char *what, bool quiet,
                                  struct tern_distill_cache **out)
{
    struct tern_distill_cache_params p = tern_distill_cache_default_params();
    p.top_k = r->top_k;
    p.temperature = r->temperature;
    p.n_ctx = c->n_ctx;
    p.n_vocab = c->n_vocab;
    p.n_threads = c->threads;
    p.progress = quiet ? NULL : progress;
    p.user = (void *)what;
    bool built = false;
    tern_status st = tern_distill_cache_ensure(teacher, d, &p, path, rebuild, out, &built);
    if (!st && !quiet)
        fprintf(stderr, "tern distill: teacher signal on %s: %s %s (%llu positions, top-%d at "
                "temperature %g)\n", what, built ? "computed into" : "read from", path,
                (unsigned long long)tern_distill_cache_n_entries(*out), r->top_k, r->temperature);
    return st;
}

int cmd_distill(int argc, char **argv)
{
    struct distill_opts o;
    distill_init(&o);
    const int pr = cli_parse(&cli_spec_distill, argc, argv, &o);
    if (pr != CLI_PARSED) return pr;
    const char *teacher_path = o.teacher, *student = o.student, *student_cfg = o.student_cfg,
               *data = o.data, *val = o.val, *out = o.out, *recipe_path = o.recipe,
               *kd_path = o.kd_path, *vkd_path = o.vkd_path, *ckdir = o.ckdir, *resume = o.resume,
               *layers_arg = o.layers, *speed_cases = o.speed_cases, *speed_suite = o.speed_suite,
               *speed_type = o.speed_type;
    const long long speed_max = o.speed_max, seqkd_max = o.seqkd_max, threads = o.threads,
                    until = o.until;
    long long val_every = o.val_every;
    int layers[256], n_layers = 0;
    const bool json = o.json, strict = o.strict, loss_on_prompt = o.loss_on_prompt,
               rebuild = o.rebuild, seqkd = o.seqkd;
    const struct cli_lora_train_opts lo = o.lo;
    const bool lora = lo.base != NULL;
    if ((student != NULL) + (student_cfg != NULL) + lora != 1)
        return cli_usage_error("distill", "need one of --student / --student-config / --lora-base");
    if (o.lora_init && !lora)
        return cli_usage_error("distill", "--lora-init needs --lora-base (the model the adapter is on)");
    /* the proxies and the minings run the exported student as a model: an adapter needs its base */
    if (lora && speed_cases)
        return cli_usage_error("distill", "--speed-cases runs the exported student as a model; with "
                               "--lora-base the export is an adapter: measure it with tern eval -m BASE "
                               "--lora ADAPTER");
    if (seqkd && !cli_ends_with(data, ".jsonl"))
        return cli_usage_error("distill", "--sequence-kd needs --data as .jsonl conversations (the "
                               "teacher answers their prompts), not %s", data);
    if (speed_cases && !val)
        return cli_usage_error("distill", "--speed-cases measures at each validation: give --val too");
    const char *profiles = speed_cases ? cli_profiles_path("distill", NULL) : NULL;
    if (speed_cases && !profiles) return CLI_EXIT_USAGE;
    if (layers_arg && !student)
        return cli_usage_error("distill", "--student-layers needs --student (the file whose blocks "
                               "the student keeps)");
    struct cli_par par;
    int rc = cli_par_init("distill", &par);
    if (rc) return rc;

    /* the student's config, then the recipe over it */
    struct tern_train_config c = tern_train_config_default();
    tern_status st = TERN_OK;
    char *text = NULL;
    size_t len = 0;
    if (lora) {
        if ((st = cli_lora_train_base(&lo, &c))) return cli_report("distill", st);
    } else if (student) {
        if ((st = tern_train_config_from_gguf(student, &c))) return cli_report("distill", st);
        if (layers_arg) {
            rc = parse_layers(layers_arg, c.n_layer, layers, 256, &n_layers);
            if (rc) return rc;
            c.n_layer = n_layers;
        }
    } else {
        if (read_json("student config", student_cfg, &text, &len)) return CLI_EXIT_FAIL;
        st = tern_train_config_parse(text, len, &c);
        free(text);
        if (st) {
            fprintf(stderr, "tern distill: %s: %s\n", student_cfg, tern_last_error());
            return CLI_EXIT_FAIL;
        }
        if (!c.tokenizer[0])
            return cli_usage_error("distill", "%s: the student config needs \"tokenizer\" (the GGUF "
                                   "whose vocabulary the student shares with the teacher)",
                                   student_cfg);
    }
    struct tern_distill_recipe recipe = tern_distill_recipe_default();
    if (recipe_path) {
        if (read_json("recipe", recipe_path, &text, &len)) return CLI_EXIT_FAIL;
        st = tern_distill_recipe_parse(text, len, &recipe, &c);
        free(text);
        if (st) {
            fprintf(stderr, "tern distill: %s: %s\n", recipe_path, tern_last_error());
            return CLI_EXIT_FAIL;
        }
    }
    if ((st = cli_lora_train_apply(&lo, &c))) return cli_report("distill", st);
    if (threads) c.threads = (int)threads;
    if (lora && recipe.length_kd_weight > 0.0f)
        return cli_usage_error("distill", "length_kd_weight has the exported student answer prompts; "
                               "with --lora-base the export is an adapter, not supported yet");
    if (recipe.length_kd_weight > 0.0f && !cli_ends_with(data, ".jsonl"))
        return cli_usage_error("distill", "length_kd_weight needs --data as .jsonl conversations "
                               "(the student answers their prompts), not %s", data);
    if (recipe.length_kd_weight > 0.0f && par.size > 1)
        return cli_usage_error("distill", "length_kd_weight is not supported under mpirun yet "
                               "(the minings run in one process); run it in one process");
    if (recipe.top_k > c.n_vocab)
        return cli_usage_error("distill", "top_k %d exceeds the vocabulary (%d)", recipe.top_k,
                               c.n_vocab);

    struct tern_model *teacher = NULL;
    struct tern_model_params mp = {0};
    if ((st = tern_model_load(teacher_path, &mp, &teacher))) return cli_report("distill", st);
    rc = check_tokenizers(teacher, teacher_path, c.tokenizer);
    if (rc) {
        tern_model_free(teacher);
        return rc;
    }

    char ckbuf[4096], kdbuf[4200], vkdbuf[4200];
    if (!ckdir) {
        if (resume) ckdir = resume;
        else {
            snprintf(ckbuf, sizeof ckbuf, "%s.ckpt", out);
            ckdir = ckbuf;
        }
    }
    if (mkdir(ckdir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "tern distill: cannot create %s: %s\n", ckdir, strerror(errno));
        tern_model_free(teacher);
        return CLI_EXIT_FAIL;
    }
    if (!kd_path) snprintf(kdbuf, sizeof kdbuf, "%s/teacher.kd", ckdir), kd_path = kdbuf;
    if (!vkd_path) snprintf(vkdbuf, sizeof vkdbuf, "%s/teacher-val.kd", ckdir), vkd_path = vkdbuf;
    if (!val_every) val_every = c.ckpt_every > 0 ? c.ckpt_every : 100;
    char seqbuf[4200];
    if (seqkd) { /* from here on the teacher's answers are the data */
        const struct cli_seqkd_params sp = {
            .teacher_path = teacher_path, .teacher = teacher, .data = data, .dir = ckdir,
            .threads = c.threads, .n_ctx = c.n_ctx, .max_tokens = (int)seqkd_max,
            .may_build = par.size == 1};
        if (cli_seqkd_prepare(&sp, seqbuf, sizeof seqbuf)) {
            tern_model_free(teacher);
            return CLI_EXIT_FAIL;
        }
        data = seqbuf;
    }

    struct tern_trainer *t = NULL;
    struct tern_train_data *d = NULL, *vd = NULL;
    struct tern_distill_cache *kd = NULL, *vkd = NULL;
    st = tern_trainer_create(&c, &t);
    if (!st) st = resume ? tern_trainer_checkpoint_load(t, resume)
                         : student ? tern_trainer_load_gguf_layers(t, student, n_layers ? layers : NULL,
                                                                   n_layers)
                                   : tern_trainer_init(t); /* a config, or LoRA: B = 0, A random */
    if (!st && o.lora_init && !resume) st = tern_trainer_load_adapter(t, o.lora_init);
    if (!st) st = tern_trainer_set_distill(t, &recipe);
    const bool length_kd = recipe.length_kd_weight > 0.0f;
    int64_t *doc_lines = NULL;
    /* rendered with the adapter's template when --chat-template-file gives one (empty: the
     * tokenizer's own) */
    if (!st) st = cli_train_load_data_tmpl("distill", data, c.tokenizer, c.chat_template_file, c.n_ctx,
                                           strict, loss_on_prompt, recipe.early_tool_weight > 0.0f,
                                           length_kd ? &doc_lines : NULL, &d);
    if (!st && val)
        st = cli_train_load_data_tmpl("distill", val, c.tokenizer, c.chat_template_file, c.n_ctx, strict,
                                      false, false, NULL, &vd);
    char lora_init_name[4200];
    if (lora) snprintf(lora_init_name, sizeof lora_init_name, "lora:%s", c.lora_base);
    if (!st) st = record_run(t, teacher, d, &c, &recipe, lora ? lora_init_name : student);
    if (!st && layers_arg) st = tern_trainer_set_export_str(t, "tern.distill.student_layers", layers_arg);
    if (!st && par.size > 1) st = tern_trainer_set_parallel(t, par.rank, par.size, cli_par_allreduce, NULL);
    bool peer_failed = false;
    /* the teacher runs once: in process 0, while the others wait, then read its files */
    for (int pass = 0; pass < 2; pass++) {
        const bool mine = pass == 0 ? par.rank == 0 : par.rank != 0;
        if (!st && mine) {
            st = teacher_signal(teacher, d, &c, &recipe, kd_path, rebuild && par.rank == 0, data,
                                par.rank != 0, &kd);
            if (!st && vd)
                st = teacher_signal(teacher, vd, &c, &recipe, vkd_path, rebuild && par.rank == 0,
                                    val, par.rank != 0, &vkd);
        }
        if (pass == 0 && par.size > 1 && !cli_par_all_ok(&par, !st) && !st) {
            fprintf(stderr, "tern distill: process %d: another process failed before training\n",
                    par.rank);
            st = TERN_ERR_ARG;
            peer_failed = true;
        }
        if (par.size == 1) break;
    }
    tern_model_free(teacher); /* its signal is on disk now */
    struct cli_distill_speed *speed = NULL;
    if (!st && speed_cases && par.rank == 0) {
        const struct cli_distill_speed_params sp = {
            .teacher = teacher_path, .cases = speed_cases, .suite = speed_suite, .profiles = profiles,
            .type = speed_type, .dir = ckdir, .max_cases = (int)speed_max, .threads = c.threads,
            .json = json};
        st = cli_distill_speed_open(&sp, &speed);
    }
    struct cli_distill_length *length = NULL;
    if (!st && length_kd && par.rank == 0) {
        const struct cli_distill_length_params lp = {
            .teacher = teacher_path, .data = data, .doc_lines = doc_lines,
            .n_docs = tern_train_data_n_docs(d), .recipe = &recipe, .dir = ckdir,
            .step_tokens = (uint64_t)(c.batch_tokens ? c.batch_tokens : c.n_ctx) *
                           (uint64_t)(c.accum > 0 ? c.accum : 1),
            .threads = c.threads, .n_ctx = c.n_ctx, .json = json};
        st = cli_distill_length_open(&lp, &length);
        if (!st && cli_distill_length_cases(length) == 0) {
            rc = cli_usage_error("distill", "length_kd_weight: %s holds no assistant answer that "
                                 "calls a tool, so there is nothing to compare lengths on", data);
            st = TERN_ERR_ARG;
            peer_failed = true; /* reported */
        }
    }
    if (!st) {
        const int start = tern_trainer_step_index(t);
        int last = until && until < c.steps ? (int)until : c.steps;
        if (last < start) last = start;
        if (!json && par.rank == 0)
            fprintf(stderr, "tern distill: student %s, n_embd %d, %d layers, %d/%d heads, n_ff %d, "
                    "vocab %d, n_ctx %d; loss %g * tau^2 KL (top-%d, tau %g) + %g * CE; QAT %s; "
                    "steps %d..%d\n", c.arch == TERN_ARCH_QWEN2 ? "qwen2" : "llama", c.n_embd,
                    c.n_layer, c.n_head, c.n_head_kv, c.n_ff, c.n_vocab, c.n_ctx, recipe.kd_weight,
                    recipe.top_k, recipe.temperature, recipe.ce_weight,
                    recipe.qat_start < 1.0f ? recipe.qat_type : "off", start + 1, last);
        if (!json && par.rank == 0 && lora) cli_lora_train_report("distill", t, &c);
        if (!json && par.rank == 0 && recipe.n_buckets) {
            fprintf(stderr, "tern distill: length buckets (Dirichlet alpha %g):", recipe.bucket_alpha);
            for (int b = 0; b < recipe.n_buckets; b++)
                fprintf(stderr, " <=%d x %.3f", recipe.bucket_len[b], recipe.bucket_weight[b]);
            fputc('\n', stderr);
        }
        const struct cli_train_run run = {.cmd = "distill", .t = t, .c = &c, .d = d, .vd = vd,
                                          .kd = kd, .vkd = vkd, .ckdir = ckdir, .out = out,
                                          .json = json, .resumed = resume != NULL, .last = last,
                                          .val_every = val_every, .rank = par.rank,
                                          .speed = speed, .length = length,
                                          .latency = recipe.early_tool_weight > 0.0f || length_kd,
                                          .recipe = &recipe};
        rc = cli_train_loop(&run);
    } else {
        rc = peer_failed ? (rc ? rc : CLI_EXIT_FAIL) : cli_report("distill", st);
    }
    cli_distill_length_free(length);
    free(doc_lines);
    cli_distill_speed_free(speed);
    tern_distill_cache_free(kd);
    tern_distill_cache_free(vkd);
    tern_trainer_free(t);
    tern_train_data_free(d);
    tern_train_data_free(vd);
    /* a failed process exits without MPI_Finalize: mpirun then stops the others */
    if (rc == 0) cli_par_finish();
    return rc;
}
