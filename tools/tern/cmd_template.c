/* cmd_template.c — `tern template`: render a conversation with a chat template (a model's own
 * or a file) and print exactly the prompt, nothing added. See include/tern.h "chat templates". */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tern_gguf.h"

struct template_opts {
    const char *model, *tmpl, *bos, *eos, *messages, *tools, *vars;
    long long now;
    bool no_gen_prompt, show_format;
};

static void template_init(void *p)
{
    *(struct template_opts *)p = (struct template_opts){.now = TERN_CHAT_NOW_CLOCK};
}

#define T struct template_opts
static const struct cli_option template_table[] = {
    {"-m", "--model", CLI_PATH, "FILE", CLI_AT(T, model),
     .help = "use the GGUF's tokenizer.chat_template and its bos/eos text (ChatML with a warning if it "
             "has none)"},
    {NULL, "--template", CLI_PATH, "FILE", CLI_AT(T, tmpl), .help = "a Jinja chat template file"},
    {NULL, "--bos-token", CLI_STRING, "TEXT", CLI_AT(T, bos), .def = "the model's, or \"\"",
     .help = "bos_token text"},
    {NULL, "--eos-token", CLI_STRING, "TEXT", CLI_AT(T, eos), .def = "the model's, or \"\"",
     .help = "eos_token text"},
    {NULL, "--messages", CLI_PATH, "FILE", CLI_AT(T, messages),
     .help = "the conversation (required, except with --tool-format)"},
    {NULL, "--tools", CLI_PATH, "FILE", CLI_AT(T, tools),
     .help = "an array of OpenAI function tools (not with a \"tools\" key in the messages file)"},
    {NULL, "--template-vars", CLI_STRING, "JSON", CLI_AT(T, vars),
     .help = "a JSON object of extra template variables, e.g. '{\"enable_thinking\": false}' (Qwen3, "
             "SmolLM3, Gemma 4) or '{\"reasoning_effort\": \"low\"}' (gpt-oss)"},
    {NULL, "--no-generation-prompt", CLI_FLAG, NULL, CLI_AT(T, no_gen_prompt),
     .help = "add_generation_prompt = false (default true, or the messages file's "
             "\"add_generation_prompt\")"},
    /* any second of the years 1..9999 UTC, 0 and earlier included (strftime's %Y range) */
    {NULL, "--now", CLI_INT, "UNIX_SECONDS", CLI_AT(T, now), CLI_RANGE(-62135596800LL, 253402300799LL),
     .def = "the clock", .help = "the time strftime_now() formats, in UTC"},
    {NULL, "--tool-format", CLI_FLAG, NULL, CLI_AT(T, show_format),
     .help = "print the detected tool-call format instead of rendering"},
    {0},
};
#undef T

const struct cli_command cli_spec_template = {
    "template", "(-m MODEL | --template FILE) --messages CONV.json [options]",
    "Renders the conversation with the chat template and prints the prompt exactly\n"
    "(no newline is added). CONV.json is an array of OpenAI-style messages, or an object\n"
    "with \"messages\" (and optionally \"tools\", \"add_generation_prompt\").\n",
    template_table, CLI_OPTS(struct template_opts, template_init), NULL,
};

/* Read a whole file for the API, which parses it and names any problem's byte and line:col. */
static char *load_text(const char *what, const char *path, size_t *len)
{
    char *txt = cli_read_file(path, len);
    if (!txt) fprintf(stderr, "tern template: cannot read %s file %s\n", what, path);
    return txt;
}

int cmd_template(int argc, char **argv)
{
    struct template_opts o;
    template_init(&o);
    const int pr = cli_parse(&cli_spec_template, argc, argv, &o);
    if (pr != CLI_PARSED) return pr;
    const char *model = o.model, *tmpl_path = o.tmpl, *bos = o.bos, *eos = o.eos,
               *msgs_path = o.messages, *tools_path = o.tools, *vars = o.vars;
    const bool show_format = o.show_format;
    const long long now = o.now;
    if (!!model == !!tmpl_path) return cli_usage_error("template", "give exactly one of -m MODEL or --template FILE");
    if (!msgs_path && !show_format) return cli_usage_error("template", "--messages FILE is required");
    if (vars && cli_check_template_vars("template", vars)) return CLI_EXIT_USAGE;

    struct tern_chat_template *t = NULL;
    tern_status st;
    if (model) {
        struct tern_gguf *g;
        st = tern_gguf_open(model, &g);
        if (st) return cli_report("template", st);
        st = tern_chat_template_from_gguf(g, &t);
        tern_gguf_close(g);
        if (st) return cli_report("template", st);
        if (tern_chat_template_warning(t)) fprintf(stderr, "tern template: warning: %s\n", tern_chat_template_warning(t));
    } else {
        size_t len;
        char *src = cli_read_file(tmpl_path, &len);
        if (!src) {
            fprintf(stderr, "tern template: cannot read template file %s\n", tmpl_path);
            return CLI_EXIT_FAIL;
        }
        st = tern_chat_template_create(src, len, &t);
        free(src);
        if (st) return cli_report("template", st);
    }
    if (show_format) {
        printf("%s\n", tern_toolcall_format_name(tern_toolcall_detect(tern_chat_template_source(t))));
        tern_chat_template_free(t);
        return CLI_EXIT_OK;
    }

    int rc = CLI_EXIT_FAIL;
    size_t conv_len, tools_len;
    char *conv = load_text("messages", msgs_path, &conv_len), *tools = NULL;
    if (!conv) goto out;
    struct tern_chat_params p = tern_chat_default_params();
    p.messages_json = conv; /* an array, or {"messages": [...], "tools": [...], ...} */
    p.messages_len = conv_len; /* cli_read_file NUL-terminates, so 0 (empty file) is fine too */
    cJSON *obj = cJSON_Parse(conv); /* only for this CLI's own "add_generation_prompt" key */
    const cJSON *agp = cJSON_GetObjectItemCaseSensitive(obj, "add_generation_prompt");
    if (cJSON_IsBool(agp)) p.add_generation_prompt = cJSON_IsTrue(agp);
    cJSON_Delete(obj);
    if (o.no_gen_prompt) p.add_generation_prompt = false;
    if (tools_path) {
        if (!(tools = load_text("tools", tools_path, &tools_len))) goto out;
        p.tools_json = tools;
        p.tools_len = tools_len;
    }
    p.bos_token = bos;
    p.eos_token = eos;
    p.now_unix = now;
    p.extra_vars_json = vars;
    char *prompt;
    size_t n;
    st = tern_chat_render(t, &p, &prompt, &n);
    if (st) {
        rc = cli_report("template", st);
        goto out;
    }
    rc = fwrite(prompt, 1, n, stdout) == n && fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
    free(prompt);
out:
    free(conv);
    free(tools);
    tern_chat_template_free(t);
    return rc;
}
