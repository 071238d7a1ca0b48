/* test_distill_cli.c — `tern distill` as a user runs it (build/bin/tern), with a tiny teacher
 * made by `tern train` on documents of a Markov chain (tokens 260..299 of the tiny synthetic
 * vocabulary):
 * - a run prints one JSON line per step with kl, ce, agree and qat (true in the recipe's last
 *   half), validation lines with val_kl / val_agree, and writes an F32 GGUF that loads;
 * - the same run split with --until + --resume writes a byte-identical student, and the resumed
 *   half reads the teacher's signal from its cache instead of running the teacher;
 * - a student started from the teacher's own Q8_0 file (--student S.gguf: import of quantized
 *   weights) agrees with the teacher from the first step (KL near 0);
 * - refused with a message naming what is wrong: a student tokenizer other than the teacher's
 *   (both fingerprints printed), an unknown recipe key, a student architecture the trainer does
 *   not model;
 * - a run resumed from a checkpoint whose weights hold a NaN stops at the next step, naming it
 *   and the last good checkpoint, which is left as it was;
 * - length-aware KD with the shipped model as teacher and its drafter as student: answer lengths
 *   as tern eval measures them, weights as the recipe's formula gives them (test_length_kd);
 * - sequence-level KD: the teacher's answers equal tern eval's with the same teacher, the file is
 *   reused while teacher and data match (test_sequence_kd);
 * - a LoRA adapter as the student (--lora-base) learns the teacher's distribution on a base that
 *   learned another one (test_lora_student). */
#include "test_support.h"
#include "tern_train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

static char dir[512], tok[600], data[600], val[600], scfg[600], recipe[600], teacher[600];

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Documents of a Markov chain over tokens 260..299 whose likely step is x -> (mul x + add) mod 40. */
static void markov_rule(const char *path, uint64_t s, int n_docs, int mul, int add)
{
    struct tern_train_data_writer *w;
    assert_tern_ok(tern_train_data_writer_create(&w));
    for (int d = 0; d < n_docs; d++) {
        int32_t t[48];
        uint8_t m[48];
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const int len = 8 + (int)((s >> 33) % 40);
        int x = (int)((s >> 40) % 40);
        for (int i = 0; i < len; i++) {
            t[i] = 260 + x, m[i] = i >= 2;
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            x = (s >> 33) % 10 < 8 ? (mul * x + add) % 40 : (int)((s >> 40) % 40);
        }
        assert_tern_ok(tern_train_data_add(w, t, m, len));
    }
    assert_tern_ok(tern_train_data_write(w, path));
    tern_train_data_writer_free(w);
}

static void markov(const char *path, uint64_t s, int n_docs) { markov_rule(path, s, n_docs, 3, 7); }

/* Trains a model of the teacher's shape (llama, 48 x 2 layers) on `docs` into `out` with
 * tern train: `steps` steps from `seed`, its config written as `name`.json in the test dir. */
static void train_tiny(const char *name, const char *docs, int steps, int seed, const char *out)
{
    char cfg[700], json[2048], cmd[8192], log[65536];
    snprintf(cfg, sizeof cfg, "%s/%s.json", dir, name);
    snprintf(json, sizeof json,
             "{\"arch\": \"llama\", \"n_embd\": 48, \"n_layer\": 2, \"n_head\": 4, \"n_head_kv\": 2,"
             " \"n_ff\": 96, \"n_ctx\": 32, \"tokenizer\": \"%s\", \"lr\": 0.003, \"warmup\": 10,"
             " \"steps\": %d, \"batch_tokens\": 256, \"seed\": %d, \"threads\": 2}", tok, steps, seed);
    write_text(cfg, json);
    snprintf(cmd, sizeof cmd, "%s train --config %s --data %s -o %s --json >/dev/null 2>&1",
             test_tern_bin(), cfg, docs, out);
    assert_int_equal(test_run_cmd(cmd, log, sizeof log), 0);
}

static void setup_files(void)
{
    if (dir[0]) return;
    snprintf(dir, sizeof dir, "%s", test_tmpdir());
    snprintf(tok, sizeof tok, "%s/tok.gguf", dir);
    assert_tern_ok(tern_synth_model_write("tiny", "f32", 3, tok, NULL));
    snprintf(data, sizeof data, "%s/d.tdat", dir);
    snprintf(val, sizeof val, "%s/v.tdat", dir);
    markov(data, 1, 200);
    markov(val, 2, 20);
    char json[2048];
    snprintf(teacher, sizeof teacher, "%s/teacher.gguf", dir);
    train_tiny("teacher", data, 80, 5, teacher);
    snprintf(scfg, sizeof scfg, "%s/student.json", dir);
    snprintf(json, sizeof json,
             "{\"arch\": \"llama\", \"n_embd\": 32, \"n_layer\": 1, \"n_head\": 2, \"n_ff\": 64,"
             " \"n_ctx\": 32, \"tokenizer\": \"%s\", \"lr\": 0.003, \"warmup\": 2, \"steps\": 8,"
             " \"batch_tokens\": 128, \"seed\": 7, \"threads\": 2, \"ckpt_every\": 2}", tok);
    write_text(scfg, json);
    snprintf(recipe, sizeof recipe, "%s/recipe.json", dir);
    write_text(recipe, "{\"top_k\": 8, \"temperature\": 2, \"kd_weight\": 1, \"ce_weight\": 0.2,"
                       " \"qat_start\": 0.5, \"qat_type\": \"q8_0\"}");
}

static void test_run_json(void **state)
{
    (void)state;
    setup_files();
    char cmd[8192], out[65536];
    snprintf(cmd, sizeof cmd, "%s distill --teacher %s --student-config %s --recipe %s --data %s "
             "--val %s --val-every 4 -o %s/a.gguf --json 2>/dev/null", test_tern_bin(), teacher,
             scfg, recipe, data, val, dir);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    int steps = 0, vals = 0, qat = 0;
    for (char *l = strtok(out, "\n"); l; l = strtok(NULL, "\n")) {
        if (strstr(l, "\"val_kl\":")) {
            assert_non_null(strstr(l, "\"val_agree\":"));
            assert_non_null(strstr(l, "\"val_ce\":"));
            vals++;
            continue;
        }
        assert_non_null(strstr(l, "\"kl\":"));
        assert_non_null(strstr(l, "\"ce\":"));
        assert_non_null(strstr(l, "\"agree\":"));
        qat += strstr(l, "\"qat\":true") != NULL;
        steps++;
    }
    assert_int_equal(steps, 8);
    assert_int_equal(vals, 2);
    assert_int_equal(qat, 4);
    char path[700];
    snprintf(path, sizeof path, "%s/a.gguf", dir);
    struct tern_model *m;
    assert_tern_ok(tern_model_load(path, NULL, &m));
    tern_model_free(m);
    /* the student records its making: the teacher's fingerprint (as tern computes it), the
     * data's, the recipe */
    struct tern_model *tm;
    assert_tern_ok(tern_model_load(teacher, NULL, &tm));
    uint8_t fp[32];
    assert_tern_ok(tern_model_fingerprint(tm, fp));
    tern_model_free(tm);
    char hx[65];
    for (int i = 0; i < 32; i++) snprintf(hx + 2 * i, 3, "%02x", fp[i]);
    struct tern_gguf *g;
    assert_tern_ok(tern_gguf_open(path, &g));
    struct tern_str v;
    assert_tern_ok(tern_gguf_get_str(g, "tern.distill.teacher_fingerprint", &v));
    assert_int_equal(v.len, 64);
    assert_memory_equal(v.ptr, hx, 64);
    assert_tern_ok(tern_gguf_get_str(g, "tern.distill.data_fingerprint", &v));
    assert_int_equal(v.len, 64);
    assert_tern_ok(tern_gguf_get_str(g, "tern.distill.recipe", &v));
    assert_non_null(memmem(v.ptr, v.len, "\"top_k\":8", 9));
    assert_tern_ok(tern_gguf_get_str(g, "tern.distill.binary", &v));
    tern_gguf_close(g);
}

static void test_split_run_identical(void **state)
{
    (void)state;
    setup_files();
    char cmd[8192], out[65536], brec[700];
    /* the recipe as it is, and with length buckets (their sampler keeps no state to save) */
    snprintf(brec, sizeof brec, "%s/recipe-buckets.json", dir);
    write_text(brec, "{\"top_k\": 8, \"temperature\": 2, \"kd_weight\": 1, \"ce_weight\": 0.2,"
                     " \"qat_start\": 0.5, \"qat_type\": \"q8_0\", \"shape_buckets\": [16, 32, 48]}");
    for (int k = 0; k < 2; k++) {
        const char *rec = k ? brec : recipe;
        snprintf(cmd, sizeof cmd, "%s distill --teacher %s --student-config %s --recipe %s --data %s "
                 "-o %s/full.gguf --json >/dev/null 2>&1", test_tern_bin(), teacher, scfg, rec, data,
                 dir);
        assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
        snprintf(cmd, sizeof cmd, "%s distill --teacher %s --student-config %s --recipe %s --data %s "
                 "-o %s/half.gguf --checkpoint-dir %s/split%d.ckpt --until 5 --json >/dev/null 2>&1",
                 test_tern_bin(), teacher, scfg, rec, data, dir, dir, k);
        assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
        snprintf(cmd, sizeof cmd, "%s distill --teacher %s --student-config %s --recipe %s --data %s "
                 "-o %s/resumed.gguf --resume %s/split%d.ckpt --json 2>&1", test_tern_bin(), teacher, scfg,
                 rec, data, dir, dir, k);
        assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
        assert_non_null(strstr(out, "read from"));     /* the teacher did not run again */
        assert_null(strstr(out, "computed into"));
        assert_non_null(strstr(out, "\"step\":6,"));
        assert_null(strstr(out, "\"step\":5,"));
        char a[700], b[700];
        snprintf(a, sizeof a, "%s/full.gguf", dir);
        snprintf(b, sizeof b, "%s/resumed.gguf", dir);
        size_t na, nb;
        char *fa = test_read_file(a, &na), *fb = test_read_file(b, &nb);
        assert_non_null(fa);
        assert_non_null(fb);
        assert_int_equal(na, nb);
        assert_memory_equal(fa, fb, na);
        free(fa);
        free(fb);
    }
    /* with buckets, each validation is also reported per bucket, with the drift across them */
    snprintf(cmd, sizeof cmd, "%s distill --teacher %s --student-config %s --recipe %s --data %s "
             "--val %s --val-every 4 --until 4 -o %s/vb.gguf --json 2>/dev/null", test_tern_bin(),
             teacher, scfg, brec, data, val, dir);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    const char *vb = strstr(out, "\"val_buckets\":[");
    assert_non_null(vb);
    assert_non_null(strstr(vb, "{\"len\":16,"));
    assert_non_null(strstr(vb, "{\"len\":48,"));
    assert_non_null(strstr(vb, "\"agree_drift\":"));
}

static void test_student_from_gguf(void **state)
{
    (void)state;
    setup_files();
    char cmd[8192], out[65536], q8[700];
    snprintf(q8, sizeof q8, "%s/teacher-q8.gguf", dir);
    snprintf(cmd, sizeof cmd, "%s quantize %s %s q8_0 2>&1", test_tern_bin(), teacher, q8);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    char r[700];
    snprintf(r, sizeof r, "%s/r-gguf.json", dir);
    write_text(r, "{\"top_k\": 8, \"steps\": 2, \"lr\": 0.0001, \"n_ctx\": 32, \"batch_tokens\": 128}");
    snprintf(cmd, sizeof cmd, "%s distill --teacher %s --student %s --recipe %s --data %s -o %s/g.gguf "
             "--json 2>/dev/null", test_tern_bin(), teacher, q8, r, data, dir);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    const char *kl = strstr(out, "\"kl\":");
    assert_non_null(kl);
    const double v = strtod(kl + 5, NULL);
    const char *ag = strstr(out, "\"agree\":");
    assert_non_null(ag);
    const double agree = strtod(ag + 8, NULL);
    print_message("student = the teacher's Q8_0 file: step 1 KL %.2e, top-1 agreement %.3f\n", v, agree);
    assert_true(v < 1e-3);
    assert_true(agree > 0.97);
}

/* The max |difference| between tensor a of file fa and tensor b of file fb (F32 both). */
static double tensor_diff(const char *fa, const char *a, const char *fb, const char *b)
{
    struct tern_gguf *ga, *gb;
    assert_tern_ok(tern_gguf_open(fa, &ga));
    assert_tern_ok(tern_gguf_open(fb, &gb));
    const struct tern_gguf_tensor *x = tern_gguf_find_tensor(ga, a), *y = tern_gguf_find_tensor(gb, b);
    assert_non_null(x);
    assert_non_null(y);
    assert_int_equal(x->type, TERN_TYPE_F32);
    assert_int_equal(y->type, TERN_TYPE_F32);
    assert_int_equal(x->nbytes, y->nbytes);
    double worst = 0;
    for (size_t i = 0; i < x->nbytes / 4; i++) {
        const double d = fabs((double)((const float *)x->data)[i] - ((const float *)y->data)[i]);
        if (d > worst) worst = d;
    }
    tern_gguf_close(ga);
    tern_gguf_close(gb);
    return worst;
}

/* --student-layers: a student keeping some of the file's blocks starts as exactly those blocks
 * (one step at lr 1e-7 moves a weight by at most ~1e-7), renumbered; the rest is the file's. */
static void test_student_layers(void **state)
{
    (void)state;
    setup_files();
    char cmd[8192], out[65536], r[700], s1[700];
    snprintf(r, sizeof r, "%s/r-layers.json", dir);
    write_text(r, "{\"top_k\": 8, \"steps\": 1, \"warmup\": 0, \"lr\": 1e-7, \"lr_min\": 1e-7, "
                  "\"n_ctx\": 32, \"batch_tokens\": 128}");
    snprintf(s1, sizeof s1, "%s/l1.gguf", dir);
    snprintf(cmd, sizeof cmd, "%s distill --teacher %s --student %s --student-layers 1 --recipe %s "
             "--data %s -o %s --json 2>&1", test_tern_bin(), teacher, teacher, r, data, s1);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    assert_non_null(strstr(out, "\"kl\":"));
    const char *names[] = {"attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
                           "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight", "attn_norm.weight",
                           "ffn_norm.weight"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char a[64], b[64];
        snprintf(a, sizeof a, "blk.0.%s", names[i]);
        snprintf(b, sizeof b, "blk.1.%s", names[i]);
        const double same = tensor_diff(s1, a, teacher, b), other = tensor_diff(s1, a, teacher, a);
        assert_true(same < 1e-5);
        if (!strstr(names[i], "norm")) assert_true(other > 1e-3); /* and not block 0 */
    }
    assert_true(tensor_diff(s1, "token_embd.weight", teacher, "token_embd.weight") < 1e-5);
    struct tern_gguf *g;
    assert_tern_ok(tern_gguf_open(s1, &g));
    struct tern_str v;
    assert_tern_ok(tern_gguf_get_str(g, "tern.distill.student_layers", &v));
    assert_int_equal(v.len, 1);
    assert_null(tern_gguf_find_tensor(g, "blk.1.attn_q.weight"));
    tern_gguf_close(g);
    /* both blocks in order: the student is the teacher (KL ~0); swapped: it is not */
    snprintf(cmd, sizeof cmd, "%s distill --teacher %s --student %s --student-layers 0,1 --recipe %s "
             "--data %s -o %s/l01.gguf --json 2>&1", test_tern_bin(), teacher, teacher, r, data, dir);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    const double kl_same = strtod(strstr(out, "\"kl\":") + 5, NULL);
    snprintf(cmd, sizeof cmd, "%s distill --teacher %s --student %s --student-layers 1,0 --recipe %s "
             "--data %s -o %s/l10.gguf --json 2>&1", test_tern_bin(), teacher, teacher, r, data, dir);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    const double kl_swapped = strtod(strstr(out, "\"kl\":") + 5, NULL);
    print_message("--student-layers 0,1: KL %.2e; 1,0: KL %.3f\n", kl_same, kl_swapped);
    assert_true(kl_same < 1e-4);
    assert_true(kl_swapped > 100 * kl_same + 1e-3);
    /* refusals: out of range, twice, empty, without --student */
    const char *bad[] = {"2", "0,0", "", "0,", "x", "-1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(cmd, sizeof cmd, "%s distill --teacher %s --student %s --student-layers '%s' "
                 "--data %s -o %s/x.gguf 2>&1", test_tern_bin(), teacher, teacher, bad[i], data, dir);
        assert_int_equal(test_run_cmd(cmd, out, sizeof out), 2);
        assert_non_null(strstr(out, "--student-layers"));
    }
    snprintf(cmd, sizeof cmd, "%s distill --teacher %s --student-config %s --student-layers 0 "
             "--data %s -o %s/x.gguf 2>&1", test_tern_bin(), teacher, scfg, data, dir);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "needs --student"));
}

/* --speed-cases: the teacher's line first (step 0), then one student line after each
 * validation, with the eval and suite figures filled in. The tiny models' context is 32
 * tokens, so the cases and the suite are short requests without tools. */
static void test_speed_proxies(void **state)
{
    (void)state;
    setup_files();
    char cases[700], suite[700], cmd[8192], out[65536];
    snprintf(cases, sizeof cases, "%s/speed-cases.jsonl", dir);
    write_text(cases, "{\"id\":\"a\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"expected\":[]}\n"
                      "{\"id\":\"b\",\"messages\":[{\"role\":\"user\",\"content\":\"ok\"}],\"expected\":[]}\n"
                      "{\"id\":\"c\",\"messages\":[{\"role\":\"user\",\"content\":\"no\"}],\"expected\":[]}\n");
    snprintf(suite, sizeof suite, "%s/speed-suite.jsonl", dir);
    write_text(suite, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}\n");
    snprintf(cmd, sizeof cmd, "TERN_PROFILES=%s/configs/hardware_profiles.yaml %s distill --teacher %s "
             "--student-config %s --recipe %s --data %s --val %s --val-every 4 -o %s/sp.gguf "
             "--speed-cases %s --speed-suite %s --speed-max 2 --json 2>&1", test_source_dir(),
             test_tern_bin(), teacher, scfg, recipe, data, val, dir, cases, suite);
    if (test_run_cmd(cmd, out, sizeof out) != 0) fail_msg("%s", out);
    int lines = 0, last_step = -1;
    for (char *l = strtok(out, "\n"); l; l = strtok(NULL, "\n")) {
        if (!strstr(l, "\"speed\":")) continue;
        const int step = atoi(strstr(l, "\"step\":") + 7);
        assert_non_null(strstr(l, step ? "\"who\":\"student\"" : "\"who\":\"teacher\""));
        assert_true(step > last_step);
        last_step = step;
        assert_non_null(strstr(l, "\"cases\":2,"));
        assert_non_null(strstr(l, "\"type\":\"q8_0\""));
        assert_true(strtod(strstr(l, "\"decode_tps\":") + 13, NULL) > 0);
        assert_true(strtod(strstr(l, "\"tokens_per_answer_p50\":") + 24, NULL) >= 1);
        if (!step) assert_true(fabs(strtod(strstr(l, "\"decode_speedup\":") + 17, NULL) - 1) < 1e-9);
        lines++;
    }
    assert_int_equal(lines, 3); /* the teacher, steps 4 and 8 */
    assert_int_equal(last_step, 8);
    /* without --val there is no validation to measure at */
    snprintf(cmd, sizeof cmd, "%s distill --teacher %s --student-config %s --data %s -o %s/x.gguf "
             "--speed-cases %s 2>&1", test_tern_bin(), teacher, scfg, data, dir, cases);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "give --val"));
}

/* The shipped model (teacher) and its drafter (student), and a small tool-calling corpus made
 * by tern corpus in DIR/name: what the distillation tests below distill with. Under the
 * sanitizers (test_sanitized) the KD tests answer fewer conversations: the same code, a tenth
 * of the constrained answers that take seconds each there. */
static void shipped_pair(const char *name, int seed, int size, char *corpus, char *model, char *drafter)
{
    char cmd[2048], out[4096];
    snprintf(corpus, 700, "%s/%s", dir, name);
    snprintf(model, 700, "%s/models/tern-tool.gguf", test_source_dir());
    snprintf(drafter, 700, "%s/models/tern-tool-draft.gguf", test_source_dir());
    snprintf(cmd, sizeof cmd, "%s corpus toolcalls -o %s --seed %d --size %d 2>&1", test_tern_bin(),
             corpus, seed, size);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
}

/* Length-aware KD as a user runs it: the shipped model teaches, its 2-block
 * drafter is the student, on a small tool-calling corpus. Each mining's JSON line lists the
 * answers it judged; their token counts are checked against `tern eval` answering the same cases
 * with the teacher's and the student's files (the student at step 0 is the drafter), and each
 * weight against the recipe's formula. Refused: .tdat data, data without tool calls. */
static int eval_tokens(const char *outputs, const char *id)
{
    char key[64];
    snprintf(key, sizeof key, "{\"id\":\"%s\",", id);
    const char *l = strstr(outputs, key);
    assert_non_null(l);
    const char *t = strstr(l, "\"tokens\":");
    assert_non_null(t);
    return atoi(t + 9);
}

static void test_length_kd(void **state)
{
    (void)state;
    setup_files();
    char corpus[700], rec[700], model[700], drafter[700], cmd[8192], ref_t[700], ref_s[700];
    static char out[1 << 20];
    shipped_pair("lkc", 3, 40, corpus, model, drafter);
    /* under the sanitizers each constrained answer costs seconds: 2 answers a mining, not 6 */
    const int docs = test_sanitized() ? 2 : 6;
    snprintf(rec, sizeof rec, "%s/lk-recipe.json", dir);
    char rj[512];
    snprintf(rj, sizeof rj, "{\"steps\": 2, \"length_kd_weight\": 0.5, \"length_kd_slope\": 2, \"length_kd_hinge\": 0.1,"
             " \"length_kd_every\": 1, \"length_kd_docs\": %d, \"batch_tokens\": 1536, \"accum\": 2,"
             " \"ckpt_every\": 0}", docs);
    write_text(rec, rj);
    snprintf(cmd, sizeof cmd, "%s distill --teacher %s --student %s --data %s/train.jsonl --recipe %s "
             "-o %s/lk.gguf -t 1 --json 2>&1", test_tern_bin(), model, drafter, corpus, rec, dir);
    if (test_run_cmd(cmd, out, sizeof out) != 0) fail_msg("%s", out);
    cJSON *first = NULL;
    int minings = 0;
    for (char *l = strtok(out, "\n"); l; l = strtok(NULL, "\n")) {
        if (!strstr(l, "\"length_kd\":")) continue;
        assert_int_equal(atoi(strstr(l, "\"step\":") + 7), minings); /* before steps 1 and 2 */
        if (!minings) first = cJSON_Parse(l);
        minings++;
    }
    assert_int_equal(minings, 2);
    assert_non_null(first);
    const cJSON *lk = cJSON_GetObjectItemCaseSensitive(first, "length_kd");
    const cJSON *answers = cJSON_GetObjectItemCaseSensitive(lk, "answers");
    /* the documents of the next step (2 x 1536 tokens: about 5 conversations), at most docs answers */
    assert_true(cJSON_GetArraySize(answers) >= 2 && cJSON_GetArraySize(answers) <= docs);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(lk, "cases")->valueint, cJSON_GetArraySize(answers));
    /* the same cases answered by tern eval with the teacher's and the student's own files */
    snprintf(ref_t, sizeof ref_t, "%s/lk-teacher.jsonl", dir);
    snprintf(ref_s, sizeof ref_s, "%s/lk-student.jsonl", dir);
    for (int k = 0; k < 2; k++) {
        snprintf(cmd, sizeof cmd, "%s eval --data %s/lk.gguf.ckpt/length-cases.jsonl -m %s --constrained "
                 "-t 1 --outputs %s >/dev/null 2>&1", test_tern_bin(), dir, k ? drafter : model,
                 k ? ref_s : ref_t);
        assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    }
    char *tout = test_read_file(ref_t, NULL), *sout = test_read_file(ref_s, NULL);
    int weighted = 0, longer = 0, uncovered = 0;
    const cJSON *a;
    cJSON_ArrayForEach(a, answers) {
        const char *id = cJSON_GetObjectItemCaseSensitive(a, "id")->valuestring;
        const int s = cJSON_GetObjectItemCaseSensitive(a, "student")->valueint;
        const int t = cJSON_GetObjectItemCaseSensitive(a, "teacher")->valueint;
        const bool covered = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(a, "covered"));
        const double w = cJSON_GetObjectItemCaseSensitive(a, "weight")->valuedouble;
        assert_int_equal(t, eval_tokens(tout, id));
        assert_int_equal(s, eval_tokens(sout, id));
        const double excess = (double)(s - t) / t - 0.1;
        const double want = !covered && excess > 0 ? 1.0 + 0.5 * 2.0 * excess : 1.0;
        print_message("case %s: student %d tokens, teacher %d, covered %d: weight %g (want %g)\n",
                      id, s, t, covered, w, want);
        assert_true(fabs(w - want) < 1e-4 * want);
        weighted += w > 1.0;
        longer += excess > 0;
        uncovered += !covered;
    }
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(lk, "weighted")->valueint, weighted);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(lk, "longer")->valueint, longer);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(lk, "uncovered")->valueint, uncovered);
    free(tout);
    free(sout);
    cJSON_Delete(first);
    /* refused: documents without conversations, and conversations without a tool call */
    snprintf(cmd, sizeof cmd, "%s distill --teacher %s --student-config %s --recipe %s --data %s "
             "-o %s/x.gguf 2>&1", test_tern_bin(), teacher, scfg, rec, data, dir);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "needs --data as .jsonl"));
    char plain[700];
    snprintf(plain, sizeof plain, "%s/lk-plain.jsonl", dir);
    snprintf(cmd, sizeof cmd, "grep -v tool_calls %s/train.jsonl > %s", corpus, plain);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    snprintf(cmd, sizeof cmd, "%s distill --teacher %s --student %s --data %s --recipe %s "
             "-o %s/x.gguf -t 1 2>&1", test_tern_bin(), model, drafter, plain, rec, dir);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "no assistant answer that calls a tool"));
}

/* Sequence-level KD: `--sequence-kd` trains on the teacher's own answers. The answers file holds,
 * for every assistant message of the corpus, the conversation before it and the teacher's answer;
 * its calls equal those `tern eval` gets from the same teacher on the same cases (the reference),
 * answers eval counts as cut or malformed are left out, a second run reuses the file, and changed
 * data rebuilds it. */
static void test_sequence_kd(void **state)
{
    (void)state;
    setup_files();
    char corpus[700], rec[700], model[700], drafter[700], cmd[8192], cases[700], ref[700], ans[800];
    static char out[1 << 20];
    shipped_pair("sqc", 5, test_sanitized() ? 6 : 30, corpus, model, drafter); /* as in test_length_kd */
    snprintf(rec, sizeof rec, "%s/sq-recipe.json", dir);
    write_text(rec, "{\"steps\": 1, \"batch_tokens\": 1536, \"accum\": 1, \"ckpt_every\": 0}");
    snprintf(cmd, sizeof cmd, "%s distill --teacher %s --student %s --data %s/train.jsonl --recipe %s "
             "-o %s/sq.gguf -t 1 --sequence-kd 2>&1", test_tern_bin(), model, drafter, corpus, rec, dir);
    if (test_run_cmd(cmd, out, sizeof out) != 0) fail_msg("%s", out);
    assert_non_null(strstr(out, "training conversations in"));
    /* the reference: tern eval's answers of the teacher on the corpus's cases */
    snprintf(cases, sizeof cases, "%s/sq-cases.jsonl", dir);
    snprintf(ref, sizeof ref, "%s/sq-ref.jsonl", dir);
    snprintf(cmd, sizeof cmd, "%s eval cases %s/train.jsonl -o %s >/dev/null 2>&1 && %s eval --data %s "
             "-m %s --constrained -t 1 --outputs %s >/dev/null 2>&1", test_tern_bin(), corpus, cases,
             test_tern_bin(), cases, model, ref);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    snprintf(ans, sizeof ans, "%s/sq.gguf.ckpt/teacher-answers.jsonl", dir);
    char *answers = test_read_file(ans, NULL), *refs = test_read_file(ref, NULL);
    char *sa = NULL, *sr = NULL;
    char *la = strtok_r(answers, "\n", &sa);
    int kept = 0, left = 0, with_calls = 0;
    for (char *lr = strtok_r(refs, "\n", &sr); lr; lr = strtok_r(NULL, "\n", &sr)) {
        cJSON *r = cJSON_Parse(lr);
        const cJSON *calls = cJSON_GetObjectItemCaseSensitive(r, "tool_calls");
        if (cJSON_GetObjectItemCaseSensitive(r, "error") ||
            cJSON_GetObjectItemCaseSensitive(r, "malformed_calls")->valueint > 0 ||
            cJSON_GetObjectItemCaseSensitive(r, "tokens")->valueint >= 512) {
            left++;
            cJSON_Delete(r);
            continue;
        }
        assert_non_null(la);
        cJSON *a = cJSON_Parse(la);
        const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(a, "messages");
        const cJSON *last = cJSON_GetArrayItem(msgs, cJSON_GetArraySize(msgs) - 1);
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(last, "role")->valuestring, "assistant");
        const cJSON *tc = cJSON_GetObjectItemCaseSensitive(last, "tool_calls");
        assert_int_equal(cJSON_GetArraySize(tc), cJSON_GetArraySize(calls));
        for (int k = 0; k < cJSON_GetArraySize(calls); k++) {
            const cJSON *want = cJSON_GetArrayItem(calls, k);
            const cJSON *fn = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(tc, k), "function");
            assert_string_equal(cJSON_GetObjectItemCaseSensitive(fn, "name")->valuestring,
                                cJSON_GetObjectItemCaseSensitive(want, "name")->valuestring);
            assert_string_equal(cJSON_GetObjectItemCaseSensitive(fn, "arguments")->valuestring,
                                cJSON_GetObjectItemCaseSensitive(want, "arguments")->valuestring);
        }
        if (!cJSON_GetArraySize(calls)) /* a text answer is the teacher's text as it is */
            assert_string_equal(cJSON_GetObjectItemCaseSensitive(last, "content")->valuestring,
                                cJSON_GetObjectItemCaseSensitive(r, "content")->valuestring);
        with_calls += cJSON_GetArraySize(calls) > 0;
        kept++;
        cJSON_Delete(a);
        cJSON_Delete(r);
        la = strtok_r(NULL, "\n", &sa);
    }
    assert_null(la); /* no answer more than the reference's */
    print_message("sequence-level KD: %d answers kept (%d with calls), %d left out\n", kept, with_calls, left);
    assert_true(kept > 0 && with_calls > 0);
    free(answers);
    free(refs);
    /* a second run reads the file; changed data makes it again */
    snprintf(cmd, sizeof cmd, "%s distill --teacher %s --student %s --data %s/train.jsonl --recipe %s "
             "-o %s/sq.gguf -t 1 --sequence-kd 2>&1", test_tern_bin(), model, drafter, corpus, rec, dir);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    assert_non_null(strstr(out, "the teacher's answers read from"));
    snprintf(cmd, sizeof cmd, "head -3 %s/train.jsonl > %s/sq5.jsonl && %s distill --teacher %s --student %s "
             "--data %s/sq5.jsonl --recipe %s -o %s/sq.gguf -t 1 --sequence-kd --rebuild-cache 2>&1", corpus, dir,
             test_tern_bin(), model, drafter, dir, rec, dir);
    if (test_run_cmd(cmd, out, sizeof out) != 0) fail_msg("%s", out);
    assert_null(strstr(out, "answers read from"));
    assert_non_null(strstr(out, "training conversations in"));
    /* refused: documents (.tdat) have no prompts to answer */
    snprintf(cmd, sizeof cmd, "%s distill --teacher %s --student-config %s --data %s -o %s/x.gguf "
             "--sequence-kd 2>&1", test_tern_bin(), teacher, scfg, data, dir);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "--sequence-kd needs --data as .jsonl"));
}

static void test_refusals(void **state)
{
    (void)state;
    setup_files();
    char cmd[8192], out[65536], path[700], other[700], cfg2[700], json[2048];
    /* another tokenizer */
    snprintf(path, sizeof path, "%s/t.txt", dir);
    write_text(path, "the quick brown fox jumps over the lazy dog\nthe lazy dog sleeps\n");
    snprintf(other, sizeof other, "%s/other.gguf", dir);
    snprintf(cmd, sizeof cmd, "%s tokenizer train --data %s --vocab-size 300 -o %s 2>&1",
             test_tern_bin(), path, other);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    snprintf(cfg2, sizeof cfg2, "%s/student-other.json", dir);
    snprintf(json, sizeof json, "{\"n_embd\": 32, \"n_layer\": 1, \"n_head\": 2, \"n_ff\": 64, "
             "\"n_ctx\": 32, \"tokenizer\": \"%s\"}", other);
    write_text(cfg2, json);
    snprintf(cmd, sizeof cmd, "%s distill --teacher %s --student-config %s --data %s -o %s/x.gguf 2>&1",
             test_tern_bin(), teacher, cfg2, data, dir);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 1);
    print_message("%s", out);
    assert_non_null(strstr(out, "different tokenizers"));
    assert_non_null(strstr(out, teacher));
    assert_non_null(strstr(out, other));
    int hex64 = 0; /* both fingerprints, in full */
    for (const char *p = out; *p; p++) {
        int n = 0;
        while (strchr("0123456789abcdef", p[n]) && p[n]) n++;
        if (n == 64) hex64++;
        p += n ? n - 1 : 0;
    }
    assert_int_equal(hex64, 2);
    /* a recipe with a typo */
    snprintf(path, sizeof path, "%s/typo.json", dir);
    write_text(path, "{\"top_k\": 8, \"temprature\": 2}");
    snprintf(cmd, sizeof cmd, "%s distill --teacher %s --student-config %s --recipe %s --data %s "
             "-o %s/x.gguf 2>&1", test_tern_bin(), teacher, scfg, path, data, dir);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 1);
    assert_non_null(strstr(out, "unknown key 'temprature'"));
    /* a student the trainer cannot model */
    snprintf(path, sizeof path, "%s/q3.gguf", dir);
    assert_tern_ok(tern_synth_model_write("qwen3-tiny", "f32", 1, path, NULL));
    snprintf(cmd, sizeof cmd, "%s distill --teacher %s --student %s --data %s -o %s/x.gguf 2>&1",
             test_tern_bin(), teacher, path, data, dir);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 1);
    assert_non_null(strstr(out, "qwen3"));
    /* flags */
    snprintf(cmd, sizeof cmd, "%s distill --teacher %s --data %s -o %s/x.gguf 2>&1", test_tern_bin(),
             teacher, data, dir);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 2);
}

/* The first "val_kl" after "step":N in a --json run's output (-1 if none). */
static double val_kl_at(const char *out, int step)
{
    char key[64];
    snprintf(key, sizeof key, "{\"step\":%d,\"val_loss\"", step);
    const char *l = strstr(out, key);
    const char *v = l ? strstr(l, "\"val_kl\":") : NULL;
    return v ? strtod(v + 9, NULL) : -1;
}

/* tern distill of a rank-8 adapter on base toward the teacher, `steps` steps with the recipe keys
 * `keys` (the learning rate) over KL-only KD; the adapter into ad (the test dir's `name`.gguf);
 * returns the validation KL after the last step. */
static double lora_distill(const char *base, const char *name, int steps, const char *keys, char ad[700])
{
    char r[700], json[1024], cmd[8192], out[65536];
    snprintf(r, sizeof r, "%s/%s-recipe.json", dir, name);
    snprintf(json, sizeof json, "{\"top_k\": 8, \"kd_weight\": 1, \"ce_weight\": 0, \"steps\": %d, %s, "
             "\"n_ctx\": 32, \"batch_tokens\": 128, \"ckpt_every\": %d}", steps, keys, steps);
    write_text(r, json);
    snprintf(ad, 700, "%s/%s.gguf", dir, name);
    snprintf(cmd, sizeof cmd, "%s distill --teacher %s --lora-base %s --lora-rank 8 --recipe %s --data %s "
             "--val %s --val-every %d -o %s --json 2>/dev/null", test_tern_bin(), teacher, base, r, data,
             val, steps, ad);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    return val_kl_at(out, steps);
}

/* A LoRA adapter as the student (--lora-base): on a base that learned another chain (x -> 7x + 1
 * instead of the teacher's 3x + 7), KD moves it to the teacher: the validation KL at the end is
 * well under the base's own (measured at step 1 of a run at a learning rate of 1e-9), and the
 * adapter file is llama.cpp's LoRA GGUF, records its making and loads on its base. */
static void test_lora_student(void **state)
{
    (void)state;
    setup_files();
    char cmd[8192], out[65536], other_data[700], base[700], ad[700];
    snprintf(other_data, sizeof other_data, "%s/other-chain.tdat", dir);
    markov_rule(other_data, 11, 200, 7, 1);
    snprintf(base, sizeof base, "%s/lora-base.gguf", dir);
    train_tiny("lora-base", other_data, 60, 9, base);
    /* the base alone: one step at a learning rate too small to move the adapter (B starts at 0) */
    const double kl0 = lora_distill(base, "lora0", 1, "\"lr\": 1e-9, \"lr_min\": 1e-9, \"warmup\": 0", ad);
    const double kl = lora_distill(base, "lora", 60, "\"lr\": 0.01, \"warmup\": 2", ad);
    print_message("LoRA student (rank 8) on a base of another chain: validation KL %.3f -> %.3f\n", kl0, kl);
    assert_true(kl0 > 0 && kl >= 0);
    assert_true(kl < 0.6 * kl0); /* measured 0.621 -> 0.287 on Zen 3 */
    struct tern_gguf *g;
    assert_tern_ok(tern_gguf_open(ad, &g));
    struct tern_str v;
    assert_tern_ok(tern_gguf_get_str(g, "general.type", &v));
    assert_int_equal(v.len, 7);
    assert_memory_equal(v.ptr, "adapter", 7);
    assert_tern_ok(tern_gguf_get_str(g, "tern.distill.student_init", &v));
    assert_true(v.len > 5 && !memcmp(v.ptr, "lora:", 5));
    assert_tern_ok(tern_gguf_get_str(g, "tern.distill.teacher_fingerprint", &v));
    assert_int_equal(v.len, 64);
    tern_gguf_close(g);
    struct tern_model *m;
    assert_tern_ok(tern_model_load(base, NULL, &m));
    struct tern_lora *a;
    assert_tern_ok(tern_lora_load(m, ad, &a));
    tern_lora_free(a);
    tern_model_free(m);
    /* refused before any work: the proxies and length-aware KD run the student as a model */
    snprintf(cmd, sizeof cmd, "%s distill --teacher %s --lora-base %s --data %s --val %s --speed-cases %s "
             "-o %s/x.gguf 2>&1", test_tern_bin(), teacher, base, data, val, data, dir);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "--speed-cases"));
    snprintf(cmd, sizeof cmd, "%s distill --teacher %s --student %s --lora-base %s --data %s -o %s/x.gguf 2>&1",
             test_tern_bin(), teacher, base, base, data, dir);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "one of --student / --student-config / --lora-base"));
}

/* FNV-1a 64, as the checkpoint's trailer */
static uint64_t fnv(const unsigned char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static void test_nan_stops_run(void **state)
{
    (void)state;
    setup_files();
    char cmd[8192], out[65536];
    snprintf(cmd, sizeof cmd, "%s distill --teacher %s --student-config %s --recipe %s --data %s "
             "-o %s/n.gguf --checkpoint-dir %s/nan.ckpt --until 2 --json >/dev/null 2>&1",
             test_tern_bin(), teacher, scfg, recipe, data, dir, dir);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 0);
    /* poison token_embd[0][0] (the tied output's row 0: every logit row) and re-seal */
    char path[700];
    snprintf(path, sizeof path, "%s/nan.ckpt/checkpoint.bin", dir);
    size_t n;
    unsigned char *buf = (unsigned char *)test_read_file(path, &n);
    assert_non_null(buf);
    const size_t head = 4 + 4 + 13 * 4 + 4 + 8 + 4 * 8 + 8; /* version 2: 13 shape fields */
    const float nan = __builtin_nanf("");
    memcpy(buf + head, &nan, 4);
    const uint64_t h = fnv(buf, n - 8);
    memcpy(buf + n - 8, &h, 8);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, n, f), n);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s distill --teacher %s --student-config %s --recipe %s --data %s "
             "-o %s/n2.gguf --resume %s/nan.ckpt 2>&1", test_tern_bin(), teacher, scfg, recipe, data,
             dir, dir);
    assert_int_equal(test_run_cmd(cmd, out, sizeof out), 1);
    assert_non_null(strstr(out, "step 3: the loss is NaN"));
    assert_non_null(strstr(out, "last good checkpoint (step 2)"));
    size_t n2;
    unsigned char *after = (unsigned char *)test_read_file(path, &n2);
    assert_int_equal(n, n2);
    assert_memory_equal(buf, after, n);
    free(buf);
    free(after);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_json),
        cmocka_unit_test(test_split_run_identical),
        cmocka_unit_test(test_student_from_gguf),
        cmocka_unit_test(test_student_layers),
        cmocka_unit_test(test_speed_proxies),
        cmocka_unit_test(test_length_kd),
        cmocka_unit_test(test_sequence_kd),
        cmocka_unit_test(test_lora_student),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_nan_stops_run),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}
