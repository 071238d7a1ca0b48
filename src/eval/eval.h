/* eval.h — the evaluation room's shared state (read first): cases, answers and scores of
 * `tern eval` (API in tern_bench.h, "evaluation").
 *
 * A set holds the cases of a dataset file, each parsed once: its conversation and tools as JSON
 * text (what a runner sends), its expected calls, private strings and slice. A run holds one
 * answer per case, recorded by any runner (the local model, an HTTP endpoint, a test's stub);
 * scoring reads only the set and the answers, so the rules are checked exactly with answers a
 * test writes by hand. Files: eval_cases.c (dataset and the corpus conversion), eval_json.c
 * (strict and lax comparison of arguments), eval_schema.c (validation against the tool's
 * schema), eval_score.c (scores and the report), eval_local.c (the local runner), eval_http.c
 * (an OpenAI-compatible endpoint), eval_merge.c (shards), eval_gate.c (two reports compared:
 * the quality half of `tern gate`). */
#ifndef TERN_EVAL_EVAL_H
#define TERN_EVAL_EVAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "tern_bench.h"

struct eval_call {
    char *name;
    char *arguments; /* JSON text */
};

struct eval_case {
    char *id;
    char *slice;          /* "" when the dataset names none */
    char *request_json;   /* {"messages": [...], "tools": [...]} as a runner sends it */
    char *tools_json;     /* the tools array, or NULL */
    cJSON *tools;         /* parsed, for schema lookup */
    struct eval_call *expected;
    int n_expected;
    char **private_strings;
    int n_private;
};

struct tern_eval_set {
    struct eval_case *cases;
    int n;
    char *path;
    char sha256[65];      /* of the dataset file: reports of different data are not compared */
};

struct eval_answer {
    bool recorded;
    char *content;
    struct eval_call *calls;
    int n_calls;
    int n_malformed;      /* tool-call attempts that did not parse */
    int n_tokens;
    int n_prompt;         /* prompt tokens, 0 = unknown */
    double ms;
    int ttfa_tokens;      /* -1: no valid call */
    double ttfa_ms;
    char *error;          /* the runner failed on this case (NULL = answered) */
    char *request_id;
};

struct tern_eval_run {
    const struct tern_eval_set *set;
    struct eval_answer *answers;
};

/* eval_cases.c: the dataset from an open stream (path names it in errors). */
TERN_NODISCARD tern_status eval_set_read(FILE *f, const char *path, struct tern_eval_set **out);

/* eval_json.c */
/* Strict: the same JSON tokens in the same order (whitespace between tokens ignored; key
 * order, number spelling and string escapes as written). */
bool eval_json_strict_equal(const char *a, const char *b);
/* Lax: the same JSON value: objects as unordered key sets, numbers by value (1 == 1.0 ==
 * 1e0), strings after unescaping. Unparsable text equals nothing. */
bool eval_json_lax_equal(const char *a, const char *b);
/* eval_schema.c */
/* Does args (JSON text) validate against the parameters schema of the tool named name in
 * tools? why gets the reason ("no tool named ...", "$.city: wrong type") when not. */
bool eval_call_valid(const cJSON *tools, const char *name, const char *args, char *why, size_t n);

#endif
