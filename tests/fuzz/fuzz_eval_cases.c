/* fuzz_eval_cases.c — fuzz target for `tern eval`'s dataset reader and scoring (scripts/fuzz.sh;
 * replayed by ctest).
 *
 * The input is a dataset file. A refusal must name the file and a line (or say it holds no
 * cases). An accepted set is scored with answers made from the cases themselves (each case
 * answered with its own expected calls, its private strings as content, and once more with the
 * calls' arguments swapped between cases), which runs the strict and lax comparisons and the
 * schema validator on the fuzzed tools; the report must be JSON. Seeds: tests/fuzz/corpus/
 * eval_cases (cases from the corpus generator and hand-written edge cases). */
#include "eval/eval.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0 || size > 1 << 16) return 0;
    FILE *f = fmemopen((void *)data, size, "rb");
    if (!f) return 0;
    struct tern_eval_set *s = NULL;
    tern_status st = eval_set_read(f, "fuzz.jsonl", &s);
    fclose(f);
    if (st) {
        const char *e = tern_last_error();
        if (st != TERN_ERR_NOMEM && !strstr(e, "fuzz.jsonl")) abort();
        return 0;
    }
    struct tern_eval_run *r = NULL;
    if (tern_eval_run_create(s, &r) == TERN_OK) {
        for (int pass = 0; pass < 2; pass++) {
            for (int i = 0; i < s->n; i++) {
                const struct eval_case *c = &s->cases[i];
                const struct eval_case *o = &s->cases[(i + pass) % s->n];
                struct tern_eval_call_in calls[8];
                int n = 0;
                for (int k = 0; k < c->n_expected && n < 8; k++, n++) {
                    calls[n].name = c->expected[k].name;
                    calls[n].arguments = o->n_expected ? o->expected[k % o->n_expected].arguments
                                                       : c->expected[k].arguments;
                }
                struct tern_eval_answer a = {.content = c->n_private ? c->private_strings[0] : "x",
                                             .calls = calls, .n_calls = n, .ttfa_tokens = i % 3 - 1,
                                             .n_tokens = i};
                if (tern_eval_record(r, i, &a)) break;
            }
            char *json = NULL;
            if (tern_eval_report_json(r, &json) == TERN_OK) {
                cJSON *j = cJSON_Parse(json);
                if (!j) abort();
                cJSON_Delete(j);
                free(json);
            }
        }
        tern_eval_run_free(r);
    }
    tern_eval_set_free(s);
    return 0;
}
