/* cli_mcp.c — one MCP server as a child process: starting it, JSON-RPC 2.0 over its stdin and
 * stdout (one message per line), its stderr passed through, and stopping it.
 *
 * Read cli_mcp.h first. Everything here is single-threaded and bounded in time: each request
 * has a deadline, and while waiting for its answer the client poll()s the server's stdout and
 * stderr together, so a server that logs a lot cannot block on a full stderr pipe while the
 * client waits on stdout. Writes to stdin are non-blocking for the same reason (a server that
 * stops reading). Messages from the server that are not the awaited answer are handled in
 * passing: its pings are answered, other requests refused (tern offers no client capability),
 * notifications and stale answers (to a request that timed out earlier) dropped. A line that is
 * not JSON breaks the stdio transport's contract (stdout carries only MCP messages): the server
 * is marked broken and every later request fails at once. */
#include "cli_mcp.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <wordexp.h>

#include "cli.h"

extern char **environ;

/* A line longer than this is refused (a server gone wrong, not a message). */
#define MCP_MAX_LINE (64u << 20)

struct cli_mcp {
    pid_t pid;            /* 0 once reaped */
    int in_fd;            /* its stdin (we write; non-blocking), -1 when closed */
    int out_fd;           /* its stdout (we read), -1 at EOF */
    int err_fd;           /* its stderr (we read and pass through), -1 at EOF */
    int timeout_ms;
    long long next_id;
    bool broken;          /* garbage on stdout, a dead server: later requests fail at once */
    char why[256];        /* why it is broken */
    char name[128];       /* for messages */
    char *buf;            /* stdout bytes not yet split into lines */
    size_t len, cap;
    char ebuf[1024];      /* stderr bytes of an unfinished line */
    size_t elen;
    int status;           /* wait status once reaped */
};

static void fmt_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fmt_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

const char *cli_mcp_name(const struct cli_mcp *m) { return m->name; }

/* Forward the complete stderr lines of ebuf, "tern chat: mcp NAME: line". */
static void err_lines(struct cli_mcp *m, bool flush_all)
{
    size_t start = 0;
    for (size_t i = 0; i < m->elen; i++) {
        if (m->ebuf[i] != '\n') continue;
        fprintf(stderr, "tern chat: mcp %s: %.*s\n", m->name, (int)(i - start), m->ebuf + start);
        start = i + 1;
    }
    if (start == 0 && (m->elen == sizeof m->ebuf || (flush_all && m->elen))) { /* a line too long, or the end */
        fprintf(stderr, "tern chat: mcp %s: %.*s\n", m->name, (int)m->elen, m->ebuf);
        start = m->elen;
    }
    memmove(m->ebuf, m->ebuf + start, m->elen - start);
    m->elen -= start;
}

static void read_stderr(struct cli_mcp *m)
{
    ssize_t k = read(m->err_fd, m->ebuf + m->elen, sizeof m->ebuf - m->elen);
    if (k > 0) {
        m->elen += (size_t)k;
        err_lines(m, false);
    } else if (k == 0 || (errno != EINTR && errno != EAGAIN)) {
        err_lines(m, true);
        close(m->err_fd);
        m->err_fd = -1;
    }
}

/* Reap the child if it has exited, waiting up to wait_ms for it; true when reaped. */
static bool reap(struct cli_mcp *m, int wait_ms)
{
    if (!m->pid) return true;
    const double end = cli_now_ms() + wait_ms;
    for (;;) {
        pid_t r = waitpid(m->pid, &m->status, WNOHANG);
        if (r == m->pid || (r < 0 && errno == ECHILD)) {
            m->pid = 0;
            return true;
        }
        if (cli_now_ms() >= end) return false;
        /* pass its last stderr through while waiting */
        struct pollfd p = {.fd = m->err_fd, .events = POLLIN};
        if (m->err_fd >= 0 && poll(&p, 1, 10) > 0) read_stderr(m);
        else if (m->err_fd < 0) usleep(10000);
    }
}

/* "exited with status 3" / "was killed by signal 9" / "closed its stdout". */
static const char *how_gone(struct cli_mcp *m, char *buf, size_t n)
{
    if (reap(m, 500)) {
        if (WIFEXITED(m->status)) snprintf(buf, n, "exited with status %d", WEXITSTATUS(m->status));
        else if (WIFSIGNALED(m->status)) snprintf(buf, n, "was killed by signal %d (%s)", WTERMSIG(m->status),
                                                  strsignal(WTERMSIG(m->status)));
        else snprintf(buf, n, "ended");
    } else {
        snprintf(buf, n, "closed its stdout");
    }
    return buf;
}

static bool broken(struct cli_mcp *m, char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static bool broken(struct cli_mcp *m, char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->why, sizeof m->why, fmt, ap);
    va_end(ap);
    m->broken = true;
    fmt_err(err, errlen, "mcp server %s: %s", m->name, m->why);
    return false;
}

/* Write one message and its newline, by the deadline. */
static bool send_json(struct cli_mcp *m, const cJSON *msg, double deadline, char *err, size_t errlen)
{
    char *s = cJSON_PrintUnformatted(msg);
    if (!s) {
        fmt_err(err, errlen, "mcp server %s: out of memory", m->name);
        return false;
    }
    size_t n = strlen(s), off = 0;
    s[n] = '\n'; /* cJSON's buffer has room: its NUL; written as n + 1 bytes, never read as a string */
    bool ok = true;
    while (ok && off < n + 1) {
        ssize_t k = write(m->in_fd, s + off, n + 1 - off);
        if (k > 0) { off += (size_t)k; continue; }
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && errno == EAGAIN) {
            const int left = (int)(deadline - cli_now_ms());
            struct pollfd p[2] = {{.fd = m->in_fd, .events = POLLOUT}, {.fd = m->err_fd, .events = POLLIN}};
            if (left <= 0) {
                ok = broken(m, err, errlen, "does not read its stdin (no progress within %d ms)", m->timeout_ms);
                break;
            }
            if (poll(p, m->err_fd >= 0 ? 2 : 1, left) > 0 && (p[1].revents & (POLLIN | POLLHUP))) read_stderr(m);
            continue;
        }
        char how[96];
        ok = broken(m, err, errlen, "cannot be written to (%s): it %s", strerror(errno), how_gone(m, how, sizeof how));
    }
    free(s);
    return ok;
}

/* Answer a request the server sent us: ping gets {}, anything else "method not found". */
static void answer_server(struct cli_mcp *m, const cJSON *id, const char *method, double deadline)
{
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "jsonrpc", "2.0");
    cJSON_AddItemToObject(r, "id", cJSON_Duplicate(id, true));
    if (!strcmp(method, "ping")) {
        cJSON_AddItemToObject(r, "result", cJSON_CreateObject());
    } else {
        cJSON *e = cJSON_AddObjectToObject(r, "error");
        cJSON_AddNumberToObject(e, "code", -32601);
        cJSON_AddStringToObject(e, "message", "tern offers no client capabilities (method not found)");
    }
    char ignored[8];
    (void)send_json(m, r, deadline, ignored, sizeof ignored); /* a failure shows in the next read */
    cJSON_Delete(r);
}

/* Handle one line from stdout. Returns 1 with *result (detached) when it answers `id`, -1 on an
 * error (err set), 0 when it was something else. */
static int take_line(struct cli_mcp *m, const char *line, size_t n, long long id, const char *method,
                     cJSON **result, double deadline, char *err, size_t errlen)
{
    while (n > 0 && (line[n - 1] == '\r' || line[n - 1] == ' ' || line[n - 1] == '\t')) n--;
    if (n == 0) return 0;
    cJSON *j = cJSON_ParseWithLength(line, n);
    if (!j || !cJSON_IsObject(j)) {
        cJSON_Delete(j);
        broken(m, err, errlen, "wrote a line that is not a JSON-RPC message on stdout: \"%.*s%s\"",
               (int)(n > 80 ? 80 : n), line, n > 80 ? "..." : "");
        return -1;
    }
    const cJSON *jid = cJSON_GetObjectItemCaseSensitive(j, "id");
    const cJSON *meth = cJSON_GetObjectItemCaseSensitive(j, "method");
    int rc = 0;
    if (cJSON_IsString(meth)) {
        if (jid) answer_server(m, jid, meth->valuestring, deadline); /* notifications: nothing to do */
    } else if (cJSON_IsNumber(jid) && (long long)jid->valuedouble == id) {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
        cJSON *res = cJSON_DetachItemFromObjectCaseSensitive(j, "result");
        if (e) {
            const cJSON *code = cJSON_GetObjectItemCaseSensitive(e, "code");
            const cJSON *msg = cJSON_GetObjectItemCaseSensitive(e, "message");
            fmt_err(err, errlen, "mcp server %s: %s failed: JSON-RPC error %d: %s", m->name, method,
                    cJSON_IsNumber(code) ? code->valueint : 0, cJSON_IsString(msg) ? msg->valuestring : "(no message)");
            cJSON_Delete(res);
            rc = -1;
        } else if (!res) {
            broken(m, err, errlen, "answered %s with neither \"result\" nor \"error\"", method);
            rc = -1;
        } else {
            *result = res;
            rc = 1;
        }
    } /* else: an answer to a request that timed out before; dropped */
    cJSON_Delete(j);
    return rc;
}

/* Send a request and wait for its answer until the deadline. */
static bool request(struct cli_mcp *m, const char *method, cJSON *params, cJSON **result, char *err, size_t errlen)
{
    *result = NULL;
    if (m->broken) {
        fmt_err(err, errlen, "mcp server %s: not usable: %s", m->name, m->why);
        cJSON_Delete(params);
        return false;
    }
    const long long id = ++m->next_id;
    const double deadline = cli_now_ms() + m->timeout_ms;
    cJSON *msg = cJSON_CreateObject();
    cJSON_AddStringToObject(msg, "jsonrpc", "2.0");
    cJSON_AddNumberToObject(msg, "id", (double)id);
    cJSON_AddStringToObject(msg, "method", method);
    if (params) cJSON_AddItemToObject(msg, "params", params);
    const bool sent = send_json(m, msg, deadline, err, errlen);
    cJSON_Delete(msg);
    if (!sent) return false;
    size_t scan = 0; /* bytes of buf already searched for a newline */
    for (;;) {
        char *nl;
        while (m->len > scan && (nl = memchr(m->buf + scan, '\n', m->len - scan))) { /* buf is NULL before the first read */
            const size_t n = (size_t)(nl - m->buf);
            const int r = take_line(m, m->buf, n, id, method, result, deadline, err, errlen);
            memmove(m->buf, nl + 1, m->len - n - 1);
            m->len -= n + 1;
            scan = 0;
            if (r) return r > 0;
        }
        scan = m->len;
        if (m->out_fd < 0) {
            char how[96];
            return broken(m, err, errlen, "%s without answering %s", how_gone(m, how, sizeof how), method);
        }
        const int left = (int)(deadline - cli_now_ms());
        if (left <= 0) {
            /* the spec's way to give up on a request; its late answer is dropped by id */
            cJSON *c = cJSON_CreateObject(), *p = cJSON_CreateObject();
            cJSON_AddStringToObject(c, "jsonrpc", "2.0");
            cJSON_AddStringToObject(c, "method", "notifications/cancelled");
            cJSON_AddNumberToObject(p, "requestId", (double)id);
            cJSON_AddStringToObject(p, "reason", "timeout");
            cJSON_AddItemToObject(c, "params", p);
            char ignored[8];
            (void)send_json(m, c, cli_now_ms() + 100, ignored, sizeof ignored);
            cJSON_Delete(c);
            fmt_err(err, errlen, "mcp server %s: no answer to %s within %.3g s (--mcp-timeout)", m->name, method,
                    m->timeout_ms / 1e3);
            return false;
        }
        struct pollfd p[2] = {{.fd = m->out_fd, .events = POLLIN}, {.fd = m->err_fd, .events = POLLIN}};
        const int np = m->err_fd >= 0 ? 2 : 1;
        if (poll(p, (nfds_t)np, left) < 0) {
            if (errno == EINTR) continue;
            return broken(m, err, errlen, "poll: %s", strerror(errno));
        }
        if (np == 2 && (p[1].revents & (POLLIN | POLLHUP | POLLERR))) read_stderr(m);
        if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        if (m->cap - m->len < 65536) {
            if (m->cap >= MCP_MAX_LINE) return broken(m, err, errlen, "wrote a line longer than %u MiB", MCP_MAX_LINE >> 20);
            size_t nc = m->cap ? m->cap * 2 : 131072;
            char *nb = realloc(m->buf, nc);
            if (!nb) return broken(m, err, errlen, "out of memory reading its answer");
            m->buf = nb;
            m->cap = nc;
        }
        ssize_t k = read(m->out_fd, m->buf + m->len, m->cap - m->len);
        if (k > 0) m->len += (size_t)k;
        else if (k == 0 || (errno != EINTR && errno != EAGAIN)) {
            close(m->out_fd);
            m->out_fd = -1;
        }
    }
}

static bool notify(struct cli_mcp *m, const char *method, char *err, size_t errlen)
{
    cJSON *msg = cJSON_CreateObject();
    cJSON_AddStringToObject(msg, "jsonrpc", "2.0");
    cJSON_AddStringToObject(msg, "method", method);
    const bool ok = send_json(m, msg, cli_now_ms() + m->timeout_ms, err, errlen);
    cJSON_Delete(msg);
    return ok;
}

/* Split cmdline into argv (wordexp, no command substitution). */
static bool split_words(const char *cmdline, wordexp_t *we, char *err, size_t errlen)
{
    const int r = wordexp(cmdline, we, WRDE_NOCMD);
    const char *why = r == 0 ? NULL
                      : r == WRDE_BADCHAR ? "an unquoted | & ; < > ( ) { } or newline (the command is not run by a shell)"
                      : r == WRDE_CMDSUB  ? "command substitution is not done"
                      : r == WRDE_SYNTAX  ? "unbalanced quotes"
                      : r == WRDE_NOSPACE ? "out of memory"
                                          : "cannot split it into words";
    if (r == 0 && we->we_wordc == 0) {
        wordfree(we);
        why = "empty command";
    }
    if (why) fmt_err(err, errlen, "--mcp \"%.200s\": %s", cmdline, why);
    if (r == WRDE_NOSPACE) wordfree(we); /* the only failure that may leave words allocated */
    return !why;
}

static bool spawn(struct cli_mcp *m, char **argv, char *err, size_t errlen)
{
    int in[2] = {-1, -1}, out[2] = {-1, -1}, er[2] = {-1, -1};
    posix_spawn_file_actions_t fa;
    bool fa_ok = false;
    int e = 0;
    /* O_CLOEXEC: only the dup2'ed copies reach the server, and no later child inherits these */
    if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(er, O_CLOEXEC)) e = errno;
    if (!e) e = posix_spawn_file_actions_init(&fa);
    if (!e) {
        fa_ok = true;
        e = posix_spawn_file_actions_adddup2(&fa, in[0], 0);
        if (!e) e = posix_spawn_file_actions_adddup2(&fa, out[1], 1);
        if (!e) e = posix_spawn_file_actions_adddup2(&fa, er[1], 2);
    }
    if (!e) e = posix_spawnp(&m->pid, argv[0], &fa, NULL, argv, environ);
    if (fa_ok) posix_spawn_file_actions_destroy(&fa);
    if (in[0] >= 0) close(in[0]);
    if (out[1] >= 0) close(out[1]);
    if (er[1] >= 0) close(er[1]);
    if (e) {
        m->pid = 0;
        for (int *fd = (int[]){in[1], out[0], er[0]}, i = 0; i < 3; i++)
            if (fd[i] >= 0) close(fd[i]);
        fmt_err(err, errlen, "mcp server %s: cannot start '%s': %s", m->name, argv[0], strerror(e));
        return false;
    }
    m->in_fd = in[1];
    m->out_fd = out[0];
    m->err_fd = er[0];
    fcntl(m->in_fd, F_SETFL, fcntl(m->in_fd, F_GETFL) | O_NONBLOCK);
    return true;
}

bool cli_mcp_start(const char *cmdline, int timeout_ms, struct cli_mcp **out, char *err, size_t errlen)
{
    *out = NULL;
    wordexp_t we;
    if (!split_words(cmdline, &we, err, errlen)) return false;
    struct cli_mcp *m = calloc(1, sizeof *m);
    if (!m) {
        wordfree(&we);
        fmt_err(err, errlen, "--mcp: out of memory");
        return false;
    }
    m->in_fd = m->out_fd = m->err_fd = -1;
    m->timeout_ms = timeout_ms;
    /* named by its first two words until it names itself: "node server.mjs" says more than node */
    const char *w0 = strrchr(we.we_wordv[0], '/'), *w1 = we.we_wordc > 1 ? strrchr(we.we_wordv[1], '/') : NULL;
    snprintf(m->name, sizeof m->name, "'%.60s%s%.60s'", w0 ? w0 + 1 : we.we_wordv[0], we.we_wordc > 1 ? " " : "",
             we.we_wordc > 1 ? (w1 ? w1 + 1 : we.we_wordv[1]) : "");
    const bool started = spawn(m, we.we_wordv, err, errlen);
    wordfree(&we);
    if (!started) {
        free(m);
        return false;
    }
    cJSON *params = cJSON_CreateObject(), *info = cJSON_CreateObject();
    cJSON_AddStringToObject(params, "protocolVersion", CLI_MCP_PROTOCOL_VERSION);
    cJSON_AddItemToObject(params, "capabilities", cJSON_CreateObject());
    cJSON_AddStringToObject(info, "name", "tern");
    cJSON_AddStringToObject(info, "version", tern_version());
    cJSON_AddItemToObject(params, "clientInfo", info);
    cJSON *res;
    if (!request(m, "initialize", params, &res, err, errlen)) {
        cli_mcp_stop(m);
        return false;
    }
    static const char *const known[] = {CLI_MCP_PROTOCOL_VERSION, "2025-06-18", "2025-03-26", "2024-11-05"};
    const cJSON *pv = cJSON_GetObjectItemCaseSensitive(res, "protocolVersion");
    bool ok = false;
    for (size_t i = 0; cJSON_IsString(pv) && i < sizeof known / sizeof *known; i++) ok |= !strcmp(pv->valuestring, known[i]);
    if (!ok) {
        fmt_err(err, errlen, "mcp server %s: speaks MCP protocol version %s%.40s%s; tern speaks %s, 2025-06-18, "
                "2025-03-26 and 2024-11-05", m->name, cJSON_IsString(pv) ? "\"" : "(none given)",
                cJSON_IsString(pv) ? pv->valuestring : "", cJSON_IsString(pv) ? "\"" : "", CLI_MCP_PROTOCOL_VERSION);
        cJSON_Delete(res);
        cli_mcp_stop(m);
        return false;
    }
    const cJSON *si = cJSON_GetObjectItemCaseSensitive(res, "serverInfo");
    const cJSON *sn = cJSON_GetObjectItemCaseSensitive(si, "name");
    if (cJSON_IsString(sn) && sn->valuestring[0]) snprintf(m->name, sizeof m->name, "'%.120s'", sn->valuestring);
    cJSON_Delete(res);
    if (!notify(m, "notifications/initialized", err, errlen)) {
        cli_mcp_stop(m);
        return false;
    }
    *out = m;
    return true;
}

bool cli_mcp_list_tools(struct cli_mcp *m, cJSON **tools, char *err, size_t errlen)
{
    cJSON *all = cJSON_CreateArray();
    char *cursor = NULL;
    for (int page = 0;; page++) {
        if (page == 1000) { /* a server that hands out cursors forever */
            fmt_err(err, errlen, "mcp server %s: tools/list: more than 1000 pages", m->name);
            break;
        }
        cJSON *params = cJSON_CreateObject(), *res;
        if (cursor) cJSON_AddStringToObject(params, "cursor", cursor);
        free(cursor);
        cursor = NULL;
        if (!request(m, "tools/list", params, &res, err, errlen)) break;
        cJSON *list = cJSON_GetObjectItemCaseSensitive(res, "tools");
        if (!cJSON_IsArray(list)) {
            fmt_err(err, errlen, "mcp server %s: tools/list: the result has no \"tools\" array", m->name);
            cJSON_Delete(res);
            break;
        }
        while (list->child) cJSON_AddItemToArray(all, cJSON_DetachItemViaPointer(list, list->child));
        const cJSON *next = cJSON_GetObjectItemCaseSensitive(res, "nextCursor");
        if (cJSON_IsString(next)) cursor = strdup(next->valuestring);
        cJSON_Delete(res);
        if (!cursor) {
            *tools = all;
            return true;
        }
    }
    free(cursor);
    cJSON_Delete(all);
    return false;
}

/* Append s to the growing text. */
static void add_text(char **t, size_t *n, const char *s)
{
    const size_t k = strlen(s);
    char *nt = realloc(*t, *n + k + 2);
    if (!nt) return;
    if (*n) nt[(*n)++] = '\n';
    memcpy(nt + *n, s, k + 1);
    *n += k;
    *t = nt;
}

bool cli_mcp_call(struct cli_mcp *m, const char *name, const cJSON *arguments, char **text, bool *is_error,
                  char *err, size_t errlen)
{
    *text = NULL;
    *is_error = false;
    cJSON *params = cJSON_CreateObject(), *res;
    cJSON_AddStringToObject(params, "name", name);
    cJSON_AddItemToObject(params, "arguments", arguments ? cJSON_Duplicate(arguments, true) : cJSON_CreateObject());
    if (!request(m, "tools/call", params, &res, err, errlen)) return false;
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(res, "content");
    const cJSON *structured = cJSON_GetObjectItemCaseSensitive(res, "structuredContent");
    *is_error = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "isError"));
    char *t = NULL;
    size_t n = 0;
    const cJSON *item;
    const cJSON *items = cJSON_IsArray(content) ? content : NULL;
    cJSON_ArrayForEach(item, items) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(item, "type");
        const cJSON *tx = cJSON_GetObjectItemCaseSensitive(item, "text");
        const cJSON *res_ = cJSON_GetObjectItemCaseSensitive(item, "resource");
        const cJSON *uri = cJSON_GetObjectItemCaseSensitive(res_ ? res_ : item, "uri");
        const cJSON *mime = cJSON_GetObjectItemCaseSensitive(item, "mimeType");
        const cJSON *rtx = cJSON_GetObjectItemCaseSensitive(res_, "text");
        char note[512];
        if (cJSON_IsString(tx)) add_text(&t, &n, tx->valuestring);
        else if (cJSON_IsString(rtx)) add_text(&t, &n, rtx->valuestring); /* an embedded text resource */
        else {
            /* images, audio, links: the model reads text only; say what was there */
            snprintf(note, sizeof note, "[%s%s%.200s%s%.100s]", cJSON_IsString(type) ? type->valuestring : "content",
                     cJSON_IsString(uri) ? ": " : "", cJSON_IsString(uri) ? uri->valuestring : "",
                     cJSON_IsString(mime) ? ", " : "", cJSON_IsString(mime) ? mime->valuestring : "");
            add_text(&t, &n, note);
        }
    }
    if (!n && structured) {
        char *s = cJSON_PrintUnformatted(structured);
        if (s) add_text(&t, &n, s);
        free(s);
    }
    cJSON_Delete(res);
    *text = t ? t : calloc(1, 1);
    if (!*text) {
        fmt_err(err, errlen, "mcp server %s: out of memory", m->name);
        return false;
    }
    return true;
}

void cli_mcp_stop(struct cli_mcp *m)
{
    if (!m) return;
    /* the stdio transport's shutdown: close its input, wait, SIGTERM, wait, SIGKILL */
    if (m->in_fd >= 0) close(m->in_fd);
    m->in_fd = -1;
    if (m->out_fd >= 0) close(m->out_fd); /* a server still writing gets EPIPE rather than blocking */
    m->out_fd = -1;
    if (!reap(m, 2000)) {
        kill(m->pid, SIGTERM);
        if (!reap(m, 1000)) {
            kill(m->pid, SIGKILL);
            while (waitpid(m->pid, &m->status, 0) < 0 && errno == EINTR) {}
            m->pid = 0;
        }
    }
    if (m->err_fd >= 0) {
        err_lines(m, true);
        close(m->err_fd);
    }
    free(m->buf);
    free(m);
}
