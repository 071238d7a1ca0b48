/* cmd_template.c — `tern template`: render a conversation with a chat template (a model's own
 * or a file) and print exactly the prompt, nothing added. See include/tern.h "chat templates". */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tern_gguf.h"

static void help(void)
{
    printf("usage: tern template (-m MODEL | --template FILE) --messages CONV.json [options]\n"
           "\n"
           "Renders the conversation with the chat template and prints the prompt exactly\n"
           "(no newline is added). CONV.json is an array of OpenAI-style messages, or an object\n"
           "with \"messages\" (and optionally \"tools\", \"add_generation_prompt\").\n"
           "\n"
           "  -m, --model FILE        use the GGUF's tokenizer.chat_template and its bos/eos text\n"
           "                          (ChatML with a warning if it has none)\n"
           "  --template FILE         a Jinja chat template file\n"
           "  --bos-token TEXT        bos_token text (default: the model's, or \"\")\n"
           "  --eos-token TEXT        eos_token text (default: the model's, or \"\")\n"
           "  --messages FILE         the conversation (required)\n"
           "  --tools FILE            an array of OpenAI function tools (not with a \"tools\" key in\n"
           "                          the messages file)\n"
           "  --template-vars JSON    a JSON object of extra template variables, e.g.\n"
           "                          '{\"enable_thinking\": false}' (Qwen3, SmolLM3, Gemma 4) or\n"
           "                          '{\"reasoning_effort\": \"low\"}' (gpt-oss)\n"
           "  --no-generation-prompt  add_generation_prompt = false (default true)\n"
           "  --now UNIX_SECONDS      the time strftime_now() formats, in UTC (default: the clock)\n"
           "  --tool-format           print the detected tool-call format instead of rendering\n");
}

/* Read a whole file for the API, which parses it and names any problem's byte and line:col. */
static char *load_text(const char *what, const char *path, size_t *len)
{
    char *txt = cli_read_file(path, len);
    if (!txt) fprintf(stderr, "tern template: cannot read %s file %s\n", what, path);
    return txt;
}

int cmd_template(int argc, char **argv)
{
    const char *model = NULL, *tmpl_path = NULL, *bos = NULL, *eos = NULL, *msgs_path = NULL,
               *tools_path = NULL, *now_s = NULL, *vars = NULL, *v;
    bool gen_prompt = true, gen_prompt_set = false, show_format = false;
    for (int i = 1; i < argc; i++) {
        int r;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            help();
            return CLI_EXIT_OK;
        }
        if (!strcmp(argv[i], "--no-generation-prompt")) {
            gen_prompt = false;
            gen_prompt_set = true;
            continue;
        }
        if (!strcmp(argv[i], "--tool-format")) {
            show_format = true;
            continue;
        }
        if ((r = cli_opt(argc, argv, &i, "--model", "-m", &v))) { if (r < 0) return CLI_EXIT_USAGE; model = v; continue; }
        if ((r = cli_opt(argc, argv, &i, "--template", NULL, &v))) { if (r < 0) return CLI_EXIT_USAGE; tmpl_path = v; continue; }
        if ((r = cli_opt(argc, argv, &i, "--bos-token", NULL, &v))) { if (r < 0) return CLI_EXIT_USAGE; bos = v; continue; }
        if ((r = cli_opt(argc, argv, &i, "--eos-token", NULL, &v))) { if (r < 0) return CLI_EXIT_USAGE; eos = v; continue; }
        if ((r = cli_opt(argc, argv, &i, "--messages", NULL, &v))) { if (r < 0) return CLI_EXIT_USAGE; msgs_path = v; continue; }
        if ((r = cli_opt(argc, argv, &i, "--tools", NULL, &v))) { if (r < 0) return CLI_EXIT_USAGE; tools_path = v; continue; }
        if ((r = cli_opt(argc, argv, &i, "--now", NULL, &v))) { if (r < 0) return CLI_EXIT_USAGE; now_s = v; continue; }
        if ((r = cli_opt(argc, argv, &i, "--template-vars", NULL, &v))) { if (r < 0) return CLI_EXIT_USAGE; vars = v; continue; }
        return cli_usage_error("template", "unknown option '%s'", argv[i]);
    }
    if (!!model == !!tmpl_path) return cli_usage_error("template", "give exactly one of -m MODEL or --template FILE");
    if (!msgs_path && !show_format) return cli_usage_error("template", "--messages FILE is required");
    /* Any second of the years 1..9999 UTC, 0 and earlier included (strftime's %Y range). */
    long long now = TERN_CHAT_NOW_CLOCK;
    if (now_s && !cli_flag_int("template", "--now", now_s, -62135596800LL, 253402300799LL, &now))
        return CLI_EXIT_USAGE;
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
    if (gen_prompt_set) p.add_generation_prompt = gen_prompt;
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
