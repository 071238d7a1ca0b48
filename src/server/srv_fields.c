/* srv_fields.c — every request field tern knows, and what it does with each: OpenAI's documented
 * Chat Completions and Completions fields and llama-server's extensions, OpenAI's Responses
 * fields and Anthropic's Messages fields (their translators, srv_responses.c and srv_messages.c,
 * read the honoured ones). docs/serve.md "Request fields" and docs/agents-apis.md have the same
 * tables for users; keep them in step.
 *
 * A field is one of
 *   honoured  read by srv_request.c (its type and range are checked there);
 *   ignored   accepted with its JSON type checked, no effect here (metadata, store, user, ...:
 *             they mean something to OpenAI's platform, nothing to a local server);
 *   neutral   a sampler knob tern's sampler lacks (typical_p, mirostat, ...): accepted at the
 *             value that switches it off, refused otherwise (silently sampling differently from
 *             what was asked is the bug users hate);
 *   refused   cannot be honoured (deprecated functions, audio output): a 400 saying why.
 * A name in no list is refused as OpenAI does ("Unrecognized request argument supplied"), so a
 * typo does not pass unnoticed. */
#include <stdio.h>
#include <string.h>

#include "server/server.h"

enum { CHAT = 1, COMPL = 2, BOTH = 3, RESP = 4, MSGS = 8 };
enum { HONOURED, IGNORED, NEUTRAL, REFUSED };
/* JSON types a field may have (null always may: it means "absent") */
enum { J_NUM = 1, J_BOOL = 2, J_STR = 4, J_ARR = 8, J_OBJ = 16, J_ANY = 31 };

struct field {
    const char *name;
    unsigned char kinds, what, types;
    double off_lo, off_hi; /* NEUTRAL: numbers in [off_lo, off_hi] switch the knob off */
    const char *why;       /* REFUSED / NEUTRAL: the reason given */
};

static const struct field FIELDS[] = {
    /* OpenAI, honoured (srv_request.c) */
    {"model", BOTH, HONOURED, 0, 0, 0, NULL},
    {"messages", CHAT, HONOURED, 0, 0, 0, NULL},
    {"prompt", COMPL, HONOURED, 0, 0, 0, NULL},
    {"tools", CHAT, HONOURED, 0, 0, 0, NULL},
    {"tool_choice", CHAT, HONOURED, 0, 0, 0, NULL},
    {"parallel_tool_calls", CHAT, HONOURED, 0, 0, 0, NULL},
    {"response_format", CHAT, HONOURED, 0, 0, 0, NULL},
    {"stream", BOTH, HONOURED, 0, 0, 0, NULL},
    {"stream_options", BOTH, HONOURED, 0, 0, 0, NULL},
    {"temperature", BOTH, HONOURED, 0, 0, 0, NULL},
    {"top_p", BOTH, HONOURED, 0, 0, 0, NULL},
    {"seed", BOTH, HONOURED, 0, 0, 0, NULL},
    {"max_tokens", BOTH, HONOURED, 0, 0, 0, NULL},
    {"max_completion_tokens", CHAT, HONOURED, 0, 0, 0, NULL},
    {"stop", BOTH, HONOURED, 0, 0, 0, NULL},
    {"n", BOTH, HONOURED, 0, 0, 0, NULL},
    {"logprobs", BOTH, HONOURED, 0, 0, 0, NULL},
    {"top_logprobs", CHAT, HONOURED, 0, 0, 0, NULL},
    {"prompt_cache_key", BOTH, HONOURED, 0, 0, 0, NULL},
    {"frequency_penalty", BOTH, HONOURED, 0, 0, 0, NULL}, /* 0 only: srv_request.c says so */
    {"presence_penalty", BOTH, HONOURED, 0, 0, 0, NULL},
    {"logit_bias", BOTH, HONOURED, 0, 0, 0, NULL},        /* {} only */
    {"echo", COMPL, HONOURED, 0, 0, 0, NULL},             /* false only */
    {"best_of", COMPL, HONOURED, 0, 0, 0, NULL},          /* 1 only */
    {"suffix", COMPL, HONOURED, 0, 0, 0, NULL},           /* null only */
    {"modalities", CHAT, HONOURED, 0, 0, 0, NULL},        /* ["text"] only */
    {"reasoning_effort", CHAT, HONOURED, 0, 0, 0, NULL},  /* a thinking budget (srv_reasoning.c) */
    {"thinking_budget_tokens", CHAT, HONOURED, 0, 0, 0, NULL}, /* llama.cpp's: the same in tokens */
    /* OpenAI, ignored: platform bookkeeping, or a hint with no meaning for a local model */
    {"user", BOTH, IGNORED, J_STR, 0, 0, NULL},
    {"metadata", CHAT, IGNORED, J_OBJ, 0, 0, NULL},
    {"store", CHAT, IGNORED, J_BOOL, 0, 0, NULL},
    {"service_tier", CHAT, IGNORED, J_STR, 0, 0, NULL},
    {"safety_identifier", CHAT, IGNORED, J_STR, 0, 0, NULL},
    {"verbosity", CHAT, IGNORED, J_STR, 0, 0, NULL},
    {"prediction", CHAT, IGNORED, J_OBJ, 0, 0, NULL},
    {"web_search_options", CHAT, IGNORED, J_OBJ, 0, 0, NULL},
    /* OpenAI, refused */
    {"audio", CHAT, REFUSED, J_OBJ, 0, 0, "audio output is not supported by tern (text only)"},
    {"functions", CHAT, REFUSED, J_ARR, 0, 0, "'functions' is deprecated and not supported by tern: send 'tools'"},
    {"function_call", CHAT, REFUSED, J_STR | J_OBJ, 0, 0,
     "'function_call' is deprecated and not supported by tern: send 'tool_choice'"},
    /* llama-server, honoured */
    {"n_predict", BOTH, HONOURED, 0, 0, 0, NULL},
    {"json_schema", BOTH, HONOURED, 0, 0, 0, NULL},
    {"grammar", BOTH, HONOURED, 0, 0, 0, NULL},
    {"top_k", BOTH, HONOURED, 0, 0, 0, NULL},
    {"min_p", BOTH, HONOURED, 0, 0, 0, NULL},
    {"repeat_penalty", BOTH, HONOURED, 0, 0, 0, NULL},
    {"repeat_last_n", BOTH, HONOURED, 0, 0, 0, NULL},
    {"ignore_eos", BOTH, HONOURED, 0, 0, 0, NULL},
    {"chat_template_kwargs", CHAT, HONOURED, 0, 0, 0, NULL},
    /* llama-server, ignored: tern reuses KV by itself and has no slots to pick */
    {"cache_prompt", BOTH, IGNORED, J_BOOL, 0, 0, NULL},
    {"id_slot", BOTH, IGNORED, J_NUM, 0, 0, NULL},
    {"n_keep", BOTH, IGNORED, J_NUM, 0, 0, NULL},
    {"n_probs", BOTH, IGNORED, J_NUM, 0, 0, NULL},
    {"min_keep", BOTH, IGNORED, J_NUM, 0, 0, NULL},
    {"samplers", BOTH, IGNORED, J_ARR | J_STR, 0, 0, NULL},
    {"penalize_nl", BOTH, IGNORED, J_BOOL, 0, 0, NULL},
    {"timings_per_token", BOTH, IGNORED, J_BOOL, 0, 0, NULL},
    {"return_tokens", BOTH, IGNORED, J_BOOL, 0, 0, NULL},
    {"post_sampling_probs", BOTH, IGNORED, J_BOOL, 0, 0, NULL},
    {"reasoning_format", CHAT, IGNORED, J_STR, 0, 0, NULL},
    {"t_max_predict_ms", BOTH, IGNORED, J_NUM, 0, 0, NULL},
    {"mirostat_tau", BOTH, IGNORED, J_NUM, 0, 0, NULL},  /* only with mirostat (neutral below) */
    {"mirostat_eta", BOTH, IGNORED, J_NUM, 0, 0, NULL},
    {"xtc_threshold", BOTH, IGNORED, J_NUM, 0, 0, NULL}, /* only with xtc_probability */
    {"dry_base", BOTH, IGNORED, J_NUM, 0, 0, NULL},      /* only with dry_multiplier */
    {"dry_allowed_length", BOTH, IGNORED, J_NUM, 0, 0, NULL},
    {"dry_penalty_last_n", BOTH, IGNORED, J_NUM, 0, 0, NULL},
    {"dry_sequence_breakers", BOTH, IGNORED, J_ARR, 0, 0, NULL},
    {"dynatemp_exponent", BOTH, IGNORED, J_NUM, 0, 0, NULL}, /* only with dynatemp_range */
    /* llama-server sampler knobs tern's sampler lacks: off only */
    {"typical_p", BOTH, NEUTRAL, J_NUM, 1, 1, "typical sampling"},
    {"tfs_z", BOTH, NEUTRAL, J_NUM, 1, 1, "tail-free sampling"},
    {"mirostat", BOTH, NEUTRAL, J_NUM, 0, 0, "mirostat sampling"},
    {"xtc_probability", BOTH, NEUTRAL, J_NUM, 0, 0, "XTC sampling"},
    {"dry_multiplier", BOTH, NEUTRAL, J_NUM, 0, 0, "DRY repetition penalty"},
    {"dynatemp_range", BOTH, NEUTRAL, J_NUM, 0, 0, "dynamic temperature"},
    {"top_n_sigma", BOTH, NEUTRAL, J_NUM, -1e300, 0, "top-n-sigma sampling"},
    {"lora", BOTH, NEUTRAL, J_ARR, 0, 0, "per-request LoRA scales (pick an adapter by \"model\")"},

    /* OpenAI Responses (srv_responses.c) */
    {"model", RESP, HONOURED, 0, 0, 0, NULL},
    {"input", RESP, HONOURED, 0, 0, 0, NULL},
    {"instructions", RESP, HONOURED, 0, 0, 0, NULL},
    {"tools", RESP, HONOURED, 0, 0, 0, NULL},
    {"tool_choice", RESP, HONOURED, 0, 0, 0, NULL},
    {"parallel_tool_calls", RESP, HONOURED, 0, 0, 0, NULL},
    {"text", RESP, HONOURED, 0, 0, 0, NULL},
    {"max_output_tokens", RESP, HONOURED, 0, 0, 0, NULL},
    {"temperature", RESP, HONOURED, 0, 0, 0, NULL},
    {"top_p", RESP, HONOURED, 0, 0, 0, NULL},
    {"stream", RESP, HONOURED, 0, 0, 0, NULL},
    {"store", RESP, HONOURED, 0, 0, 0, NULL},
    {"previous_response_id", RESP, HONOURED, 0, 0, 0, NULL},
    {"prompt_cache_key", RESP, HONOURED, 0, 0, 0, NULL},
    {"truncation", RESP, HONOURED, 0, 0, 0, NULL},  /* "disabled" only */
    {"background", RESP, HONOURED, 0, 0, 0, NULL},  /* false only */
    {"top_logprobs", RESP, HONOURED, 0, 0, 0, NULL}, /* 0 only */
    {"metadata", RESP, IGNORED, J_OBJ, 0, 0, NULL},    /* repeated in the response */
    {"user", RESP, IGNORED, J_STR, 0, 0, NULL},
    {"safety_identifier", RESP, IGNORED, J_STR, 0, 0, NULL},
    {"service_tier", RESP, IGNORED, J_STR, 0, 0, NULL},
    {"reasoning", RESP, HONOURED, 0, 0, 0, NULL},      /* effort: a thinking budget; summary: none given */
    {"include", RESP, IGNORED, J_ARR, 0, 0, NULL},     /* extra data of built-in tools and reasoning */
    {"max_tool_calls", RESP, IGNORED, J_NUM, 0, 0, NULL}, /* built-in tools' calls: none here */
    {"stream_options", RESP, IGNORED, J_OBJ, 0, 0, NULL}, /* include_obfuscation: nothing to pad */
    {"conversation", RESP, REFUSED, J_STR | J_OBJ, 0, 0,
     "'conversation' objects are not supported by tern: send 'previous_response_id' or the whole 'input'"},
    {"prompt", RESP, REFUSED, J_OBJ, 0, 0, "reusable prompts ('prompt') are not supported by tern: send 'instructions' and 'input'"},

    /* Anthropic Messages (srv_messages.c) */
    {"model", MSGS, HONOURED, 0, 0, 0, NULL},
    {"messages", MSGS, HONOURED, 0, 0, 0, NULL},
    {"system", MSGS, HONOURED, 0, 0, 0, NULL},
    {"max_tokens", MSGS, HONOURED, 0, 0, 0, NULL},
    {"stop_sequences", MSGS, HONOURED, 0, 0, 0, NULL},
    {"temperature", MSGS, HONOURED, 0, 0, 0, NULL},
    {"top_p", MSGS, HONOURED, 0, 0, 0, NULL},
    {"top_k", MSGS, HONOURED, 0, 0, 0, NULL},
    {"stream", MSGS, HONOURED, 0, 0, 0, NULL},
    {"tools", MSGS, HONOURED, 0, 0, 0, NULL},
    {"tool_choice", MSGS, HONOURED, 0, 0, 0, NULL},
    {"thinking", MSGS, HONOURED, 0, 0, 0, NULL},       /* enabled (a budget), adaptive, disabled */
    {"metadata", MSGS, IGNORED, J_OBJ, 0, 0, NULL},
    {"service_tier", MSGS, IGNORED, J_STR, 0, 0, NULL},
    {"container", MSGS, REFUSED, J_STR | J_OBJ, 0, 0, "'container' (code execution) is not supported by tern"},
    {"mcp_servers", MSGS, REFUSED, J_ARR, 0, 0, "'mcp_servers' is not supported by tern: run the MCP client "
     "yourself and send its tools as 'tools'"},
    {"context_management", MSGS, REFUSED, J_OBJ, 0, 0, "'context_management' is not supported by tern"},
};

static const char *type_names(unsigned t, char *buf, size_t cap)
{
    static const char *const names[] = {"a number", "a boolean", "a string", "an array", "an object"};
    size_t k = 0;
    buf[0] = 0;
    int n = 0;
    for (int i = 0; i < 5; i++) n += (t >> i) & 1;
    for (int i = 0, seen = 0; i < 5; i++) {
        if (!((t >> i) & 1)) continue;
        int w = snprintf(buf + k, cap - k, "%s%s", seen ? (seen == n - 1 ? " or " : ", ") : "", names[i]);
        if (w < 0 || (size_t)w >= cap - k) break;
        k += (size_t)w;
        seen++;
    }
    return buf;
}

static unsigned jtype_bit(const cJSON *v)
{
    if (cJSON_IsNumber(v)) return J_NUM;
    if (cJSON_IsBool(v)) return J_BOOL;
    if (cJSON_IsString(v)) return J_STR;
    if (cJSON_IsArray(v)) return J_ARR;
    return J_OBJ;
}

static const char *jname(unsigned bit)
{
    return bit == J_NUM ? "a number" : bit == J_BOOL ? "a boolean" : bit == J_STR ? "a string"
           : bit == J_ARR ? "an array" : "an object";
}

bool srv_fields_check(const cJSON *body, enum srv_api api, struct srv_err *e)
{
    static const unsigned char WANT[] = {CHAT, COMPL, RESP, MSGS};
    const unsigned want = WANT[api];
    for (const cJSON *k = body->child; k; k = k->next) {
        const struct field *f = NULL;
        for (size_t i = 0; i < sizeof FIELDS / sizeof FIELDS[0] && !f; i++)
            if ((FIELDS[i].kinds & want) && !strcmp(FIELDS[i].name, k->string)) f = &FIELDS[i];
        if (!f) {
            if (api == SRV_API_MESSAGES)
                srv_err_set(e, 400, "invalid_request_error", k->string, NULL, "%s: Extra inputs are not "
                            "permitted", k->string);
            else
                srv_err_set(e, 400, "invalid_request_error", k->string, NULL,
                            "Unrecognized request argument supplied: %s", k->string);
            return false;
        }
        if (f->what == HONOURED || cJSON_IsNull(k)) continue;
        const unsigned t = jtype_bit(k);
        if (!(t & f->types)) {
            char buf[96];
            srv_err_set(e, 400, "invalid_request_error", k->string, NULL, "'%s' must be %s, got %s",
                        k->string, type_names(f->types, buf, sizeof buf), jname(t));
            return false;
        }
        if (f->what == REFUSED) {
            srv_err_set(e, 400, "invalid_request_error", k->string, "unsupported_parameter", "%s", f->why);
            return false;
        }
        if (f->what == NEUTRAL) {
            const bool off = t == J_NUM ? k->valuedouble >= f->off_lo && k->valuedouble <= f->off_hi
                                        : !k->child; /* an empty list */
            if (!off) {
                srv_err_set(e, 400, "invalid_request_error", k->string, "unsupported_parameter",
                            "'%s': %s is not supported by tern; leave it out (or at its off value)",
                            k->string, f->why);
                return false;
            }
        }
    }
    return true;
}
