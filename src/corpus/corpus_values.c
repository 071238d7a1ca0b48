/* corpus_values.c — value generators: draw a normalized JSON value together with the words a user
 * says for it. Read corpus.h (struct corpus_val, struct corpus_kind) first.
 *
 * The point of the corpus is that arguments are copied or normalized, never guessed, so every
 * generator draws the value and its mention together: "tomorrow at 5pm" is computed from the
 * conversation's date (c->today) to "2025-03-15T17:00:00"; "twelve" -> 12; "2.5 km" -> 2500
 * (meters); "€40" -> 40 + "EUR" (the currency kind is linked: it takes the amount's currency and
 * is never said alone); "into French" -> "fr"; "@maria_k" -> "maria_k". Some results are
 * computed from the call's arguments (c->call_*): conversions, arithmetic, translations from a
 * small phrase table, so that final answers are right, not just plausible. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corpus/corpus.h"
#include "corpus/corpus_gen.h"

/* ------------------------------------------------------------------ helpers */

void corpus_put(char *dst, const char *s)
{
    corpus_fmt(dst, CORPUS_SAY, "%s", s);
}

void corpus_val_str(struct corpus_val *v, const char *s)
{
    v->json = cJSON_CreateString(s);
    corpus_put(v->bare, s);
}

/* Parse "a:b:c" field i of arg into out ("" if absent). */
const char *corpus_arg_field(const char *arg, int i, char *out, size_t cap)
{
    const char *p = arg ? arg : "";
    while (i > 0 && *p) {
        if (*p++ == ':') i--;
    }
    if (i > 0) {
        out[0] = '\0';
        return out;
    }
    const char *e = strchr(p, ':');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n >= cap) n = cap - 1;
    memcpy(out, p, n);
    out[n] = '\0';
    return out;
}

int corpus_arg_int(const char *arg, int i, int def)
{
    char t[32];
    corpus_arg_field(arg, i, t, sizeof t);
    return t[0] ? atoi(t) : def;
}

/* An integer as a user says it: digits mostly, words sometimes. */
void corpus_say_int(struct corpus_ctx *c, int n, char *out)
{
    if (n >= 0 && ((n <= 20 && corpus_chance(&c->rng, 40)) || (n <= 100 && corpus_chance(&c->rng, 12))))
        corpus_number_words(n, out, CORPUS_SAY);
    else if (n >= 1000 && n < 1000000 && corpus_chance(&c->rng, 40))
        corpus_fmt(out, CORPUS_SAY, "%d,%03d", n / 1000, n % 1000);
    else
        corpus_fmt(out, CORPUS_SAY, "%d", n);
}

const struct corpus_val *corpus_call_val(const struct corpus_ctx *c, const char *kind_key)
{
    for (int i = 0; i < c->call_n; i++)
        if (c->call_kinds[i] && !strcmp(c->call_kinds[i]->key, kind_key) && c->call_vals[i].json)
            return &c->call_vals[i];
    return NULL;
}

/* ------------------------------------------------------------------ words, people, contacts */

static void g_word(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    char w[CORPUS_SAY];
    corpus_val_str(v, corpus_word(c, k->arg, w, sizeof w));
}

/* A word-list entry whose index is kept in num (definitions, phrases key on it). */
static void g_word_indexed(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    const char *list = corpus_word_list(k->arg);
    if (!list) return;
    int n = corpus_alt_count(list), i = (int)corpus_below(&c->rng, (uint32_t)n);
    char w[CORPUS_SAY];
    corpus_val_str(v, corpus_alt(list, i, w, sizeof w));
    v->num = i;
}

static void g_person(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    char f[96], l[96], s[200];
    if (corpus_chance(&c->rng, 10)) {
        corpus_word(c, "native_name", s, sizeof s);
    } else {
        corpus_word(c, "first_name", f, sizeof f);
        corpus_word(c, "last_name", l, sizeof l);
        corpus_fmt(s, sizeof s, "%s %s", f, l);
    }
    corpus_val_str(v, s);
    corpus_fmt(c->last_person, sizeof c->last_person, "%s", s);
}

/* Latin letters with diacritics -> ASCII, for e-mail addresses made from names; false if the
 * name has a character we do not fold (CJK, Greek, Cyrillic). */
static bool ascii_fold(const char *s, char *out, size_t cap)
{
    static const char *const map[] = {
        "á", "a", "à", "a", "â", "a", "ä", "a", "ã", "a", "å", "a", "é", "e", "è", "e", "ê", "e",
        "ë", "e", "í", "i", "ì", "i", "î", "i", "ï", "i", "ı", "i", "ó", "o", "ò", "o", "ô", "o",
        "ö", "o", "õ", "o", "ø", "o", "ú", "u", "ù", "u", "û", "u", "ü", "u", "ñ", "n", "ç", "c",
        "ł", "l", "ş", "s", "š", "s", "ğ", "g", "ž", "z", "č", "c", "ć", "c", "ń", "n", "ś", "s",
        "ź", "z", "ż", "z", "ā", "a", "ī", "i", "ō", "o", "ū", "u", "Å", "a", "Ø", "o", "Ö", "o",
        "Ç", "c", "Ł", "l", "İ", "i", "É", "e", "Ü", "u", "Ä", "a",
    };
    size_t k = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        if (k + 2 >= cap) return false;
        if (*p < 0x80) {
            char ch = (char)*p++;
            if (ch >= 'A' && ch <= 'Z') ch = (char)(ch + 32);
            if ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9')) out[k++] = ch;
            else if (ch == ' ' || ch == '-') out[k++] = '.';
            continue;
        }
        size_t i = 0, nm = sizeof map / sizeof map[0];
        for (; i < nm; i += 2) {
            size_t l = strlen(map[i]);
            if (!strncmp((const char *)p, map[i], l)) {
                out[k++] = map[i + 1][0];
                p += l;
                break;
            }
        }
        if (i >= nm) return false;
    }
    out[k] = '\0';
    return k > 0;
}

static void g_email(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    char local[128], dom[64], f[64], l[64], s[256];
    corpus_word(c, "email_domain", dom, sizeof dom);
    if (c->last_person[0] && corpus_chance(&c->rng, 70) && ascii_fold(c->last_person, local, sizeof local)) {
        c->last_person[0] = '\0'; /* one address per drawn name */
    } else {
        corpus_word(c, "ascii_first", f, sizeof f);
        corpus_word(c, "ascii_last", l, sizeof l);
        switch (corpus_below(&c->rng, 4)) {
        case 0: corpus_fmt(local, sizeof local, "%s.%s", f, l); break;
        case 1: corpus_fmt(local, sizeof local, "%c%s", f[0], l); break;
        case 2: corpus_fmt(local, sizeof local, "%s_%s%d", f, l, corpus_range(&c->rng, 1, 99)); break;
        default: corpus_fmt(local, sizeof local, "%s", f); break;
        }
    }
    corpus_fmt(s, sizeof s, "%s@%s", local, dom);
    corpus_val_str(v, s);
}

/* Phone numbers are said with the country's grouping and normalized to E.164. */
static void g_phone(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    char said[64], e164[32];
    int a = corpus_range(&c->rng, 100, 999), b = corpus_range(&c->rng, 0, 9999);
    int d1 = corpus_range(&c->rng, 10, 99), d2 = corpus_range(&c->rng, 10, 99),
        d3 = corpus_range(&c->rng, 10, 99), d4 = corpus_range(&c->rng, 10, 99);
    switch (corpus_below(&c->rng, 5)) {
    case 0:
        corpus_fmt(said, sizeof said, "+1 (%d) 555-%04d", a, b);
        corpus_fmt(e164, sizeof e164, "+1%d555%04d", a, b);
        break;
    case 1:
        corpus_fmt(said, sizeof said, "+33 6 %d %d %d %d", d1, d2, d3, d4);
        corpus_fmt(e164, sizeof e164, "+336%d%d%d%d", d1, d2, d3, d4);
        break;
    case 2:
        corpus_fmt(said, sizeof said, "+49 30 %d%04d", a, b);
        corpus_fmt(e164, sizeof e164, "+4930%d%04d", a, b);
        break;
    case 3:
        corpus_fmt(said, sizeof said, "+81 90-%04d-%04d", b, corpus_range(&c->rng, 1000, 9999));
        corpus_fmt(e164, sizeof e164, "+8190%04d%s", b, said + strlen(said) - 4);
        break;
    default:
        corpus_fmt(said, sizeof said, "+44 7700 %d%03d", d1 % 10 + 900, a);
        corpus_fmt(e164, sizeof e164, "+447700%d%03d", d1 % 10 + 900, a);
        break;
    }
    v->json = cJSON_CreateString(e164);
    corpus_put(v->bare, said);
    corpus_put(v->show, e164);
}

/* arg: a pattern: '#' digit, '^' upper-case letter, '?' lower-case hex digit, anything else
 * itself ("ORD-######", "evt_????????"). */
static void g_id(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    char s[64];
    size_t n = 0;
    for (const char *p = k->arg; *p && n + 1 < sizeof s; p++) {
        if (*p == '#') s[n++] = (char)('0' + corpus_below(&c->rng, 10));
        else if (*p == '^') s[n++] = (char)('A' + corpus_below(&c->rng, 26));
        else if (*p == '?') s[n++] = "0123456789abcdef"[corpus_below(&c->rng, 16)];
        else s[n++] = *p;
    }
    s[n] = '\0';
    corpus_val_str(v, s);
}

static void g_handle(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    char h[64], said[80];
    corpus_word(c, "handle", h, sizeof h);
    corpus_fmt(said, sizeof said, "@%s", h);
    v->json = cJSON_CreateString(h);
    corpus_put(v->bare, said);
    corpus_put(v->show, said);
}

/* Article URLs; num = the slug's index (the summary result keys on it). */
static void g_url(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    const char *list = corpus_word_list("article_slug");
    int i = (int)corpus_below(&c->rng, (uint32_t)corpus_alt_count(list));
    char slug[128], s[256];
    corpus_alt(list, i, slug, sizeof slug);
    corpus_fmt(s, sizeof s, "https://news.example.com/%d/%02d/%s", c->today.y, c->today.m, slug);
    corpus_val_str(v, s);
    v->num = i;
}

/* Summaries of the invented articles of the "article_slug" list (same order). */
static void g_summary(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    static const char *const sums[] = {
        "The city council approved a new tram line linking the northern districts to the centre; "
        "construction starts next year and should take three years.",
        "A research team mapped a field of hydrothermal vents on the ocean floor and found several "
        "species that had not been described before.",
        "A small family bakery won the national bread prize with a sourdough loaf; the owners say "
        "prices will stay the same.",
        "Heat pumps move heat instead of producing it, which makes them efficient in mild climates; "
        "the article also covers installation costs.",
        "Organizers announced the new marathon route: it starts at the harbour, passes the old town "
        "and finishes in the central park.",
    };
    const struct corpus_val *u = corpus_call_val(c, "article_url");
    int i = u ? (int)u->num : 0;
    if (i < 0 || i >= (int)(sizeof sums / sizeof sums[0])) i = 0;
    corpus_val_str(v, sums[i]);
}

static void g_path(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    char dir[128], file[128], s[300];
    corpus_word(c, "folder", dir, sizeof dir);
    corpus_word(c, "file_name", file, sizeof file);
    corpus_fmt(s, sizeof s, "%s/%s", dir, file);
    corpus_val_str(v, s);
}

static void g_ticker(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    char s[8];
    int n = corpus_range(&c->rng, 3, 4);
    for (int i = 0; i < n; i++) s[i] = (char)('A' + corpus_below(&c->rng, 26));
    s[n] = '\0';
    corpus_val_str(v, s);
}

static void g_version(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    char s[40];
    int a = corpus_range(&c->rng, 1, 4), b = corpus_range(&c->rng, 0, 30), p = corpus_range(&c->rng, 0, 12);
    if (corpus_chance(&c->rng, 20)) corpus_fmt(s, sizeof s, "v%d.%d.%d-rc.%d", a, b, p, corpus_range(&c->rng, 1, 4));
    else corpus_fmt(s, sizeof s, "v%d.%d.%d", a, b, p);
    corpus_val_str(v, s);
}

static void g_company(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    char h[64], t[64], s[140];
    corpus_word(c, "company_head", h, sizeof h);
    corpus_word(c, "company_tail", t, sizeof t);
    corpus_fmt(s, sizeof s, "%s %s", h, t);
    corpus_val_str(v, s);
}

/* ------------------------------------------------------------------ numbers and quantities */

/* arg "lo:hi[:unit:units]": "3 nights", "three nights". */
static void g_int(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    int lo = corpus_arg_int(k->arg, 0, 1), hi = corpus_arg_int(k->arg, 1, 10);
    int n = corpus_range(&c->rng, lo, hi);
    char unit[48], units[48], num[CORPUS_SAY];
    corpus_arg_field(k->arg, 2, unit, sizeof unit);
    corpus_arg_field(k->arg, 3, units, sizeof units);
    corpus_say_int(c, n, num);
    v->json = cJSON_CreateNumber(n);
    v->num = n;
    c->last_num = n;
    if (unit[0]) corpus_fmt(v->bare, CORPUS_SAY, "%s %s", num, n == 1 ? unit : units);
    else corpus_put(v->bare, num);
    if (unit[0]) corpus_fmt(v->show, CORPUS_SAY, "%d %s", n, n == 1 ? unit : units);
    else corpus_fmt(v->show, CORPUS_SAY, "%d", n);
}

/* arg "lo:hi:suffix" (result figures): show "18°C", "72%". */
static void g_measure(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    int lo = corpus_arg_int(k->arg, 0, 0), hi = corpus_arg_int(k->arg, 1, 100);
    int n = corpus_range(&c->rng, lo, hi);
    char suf[32];
    corpus_arg_field(k->arg, 2, suf, sizeof suf);
    v->json = cJSON_CreateNumber(n);
    v->num = n;
    c->last_num = n;
    corpus_fmt(v->bare, CORPUS_SAY, "%d%s", n, suf);
}

/* arg "lo:hi:scale:suffix": a decimal n/scale, e.g. "10:50:10: km" -> 1.0 .. 5.0 km. */
static void g_decimal(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    int lo = corpus_arg_int(k->arg, 0, 0), hi = corpus_arg_int(k->arg, 1, 100);
    int scale = corpus_arg_int(k->arg, 2, 10);
    char suf[32], t[64];
    corpus_arg_field(k->arg, 3, suf, sizeof suf);
    double x = corpus_range(&c->rng, lo, hi) / (double)scale;
    x = scale <= 100 ? corpus_round2(x) : x;
    v->json = cJSON_CreateNumber(x);
    v->num = x;
    c->last_num = x;
    corpus_fmt(t, sizeof t, scale >= 1000 ? "%.4f" : scale >= 100 ? "%.2f" : scale > 1 ? "%.1f" : "%.0f", x);
    corpus_fmt(v->bare, CORPUS_SAY, "%s%s", t, suf);
}

static void g_pct(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    int lo = corpus_arg_int(k->arg, 0, 5), hi = corpus_arg_int(k->arg, 1, 100);
    int n = corpus_range(&c->rng, lo, hi) / 5 * 5;
    if (n < lo) n = lo;
    char w[96], words[8];
    bool fractions = !strcmp(corpus_arg_field(k->arg, 2, words, sizeof words), "w");
    if (fractions && n == 50 && corpus_chance(&c->rng, 40)) corpus_put(v->bare, "half");
    else if (fractions && n == 25 && corpus_chance(&c->rng, 40)) corpus_put(v->bare, "a quarter");
    else if (corpus_chance(&c->rng, 30)) {
        corpus_number_words(n, w, sizeof w);
        corpus_fmt(v->bare, CORPUS_SAY, "%s percent", w);
    } else corpus_fmt(v->bare, CORPUS_SAY, "%d%%", n);
    corpus_fmt(v->show, CORPUS_SAY, "%d%%", n);
    v->json = cJSON_CreateNumber(n);
    v->num = n;
}

/* Minutes, said in minutes or hours: "an hour and a half" -> 90. arg "lo:hi". */
static void g_duration(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    static const int choices[] = {15, 20, 30, 45, 60, 75, 90, 120, 150, 180, 240};
    int lo = corpus_arg_int(k->arg, 0, 15), hi = corpus_arg_int(k->arg, 1, 240), m;
    do {
        m = choices[corpus_below(&c->rng, sizeof choices / sizeof choices[0])];
    } while (m < lo || m > hi);
    char w[64];
    const char *s = NULL;
    switch (m) {
    case 30: s = corpus_chance(&c->rng, 50) ? "half an hour" : NULL; break;
    case 60: s = corpus_chance(&c->rng, 50) ? "an hour" : "1 hour"; break;
    case 90: s = corpus_chance(&c->rng, 50) ? "an hour and a half" : "1.5 hours"; break;
    case 120: s = corpus_chance(&c->rng, 50) ? "two hours" : "2h"; break;
    case 150: s = "two and a half hours"; break;
    case 180: s = corpus_chance(&c->rng, 50) ? "three hours" : "3 hours"; break;
    case 240: s = "four hours"; break;
    case 75: s = corpus_chance(&c->rng, 50) ? "an hour and fifteen minutes" : "1h15"; break;
    default: break;
    }
    if (s) corpus_put(v->bare, s);
    else if (corpus_chance(&c->rng, 30)) {
        corpus_number_words(m, w, sizeof w);
        corpus_fmt(v->bare, CORPUS_SAY, "%s minutes", w);
    } else corpus_fmt(v->bare, CORPUS_SAY, "%d minutes", m);
    corpus_fmt(v->show, CORPUS_SAY, "%d minutes", m);
    v->json = cJSON_CreateNumber(m);
    v->num = m;
}

/* Meters, said in m or km ("2.5 km" -> 2500). arg "lo:hi" in meters. */
static void g_meters(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    int lo = corpus_arg_int(k->arg, 0, 100), hi = corpus_arg_int(k->arg, 1, 20000);
    int m = corpus_range(&c->rng, lo, hi);
    m = m >= 1000 ? m / 500 * 500 : m / 50 * 50;
    if (m < lo) m = lo;
    if (m >= 1000 && corpus_chance(&c->rng, 75)) {
        if (m % 1000) corpus_fmt(v->bare, CORPUS_SAY, "%.1f km", m / 1000.0);
        else corpus_fmt(v->bare, CORPUS_SAY, corpus_chance(&c->rng, 50) ? "%d km" : "%d kilometers", m / 1000);
    } else {
        corpus_fmt(v->bare, CORPUS_SAY, corpus_chance(&c->rng, 50) ? "%d m" : "%d meters", m);
    }
    corpus_fmt(v->show, CORPUS_SAY, "%d m", m);
    v->json = cJSON_CreateNumber(m);
    v->num = m;
}

/* Kilometers, said in km or m ("5000 meters" -> 5). arg "lo:hi" in tenths of km. */
static void g_km(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    int lo = corpus_arg_int(k->arg, 0, 10), hi = corpus_arg_int(k->arg, 1, 500);
    int t = corpus_range(&c->rng, lo, hi);
    double km = t / 10.0;
    if (t % 10 == 0 && corpus_chance(&c->rng, 25)) corpus_fmt(v->bare, CORPUS_SAY, "%d meters", t * 100);
    else if (t % 10 == 0) corpus_fmt(v->bare, CORPUS_SAY, "%d km", t / 10);
    else corpus_fmt(v->bare, CORPUS_SAY, corpus_chance(&c->rng, 50) ? "%.1f km" : "%.1f kilometers", km);
    corpus_fmt(v->show, CORPUS_SAY, "%.1f km", km);
    v->json = cJSON_CreateNumber(km);
    v->num = km;
}

/* Kilograms, said in kg or g ("500 grams" -> 0.5). arg "lo:hi" in grams. */
static void g_kg(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    int lo = corpus_arg_int(k->arg, 0, 100), hi = corpus_arg_int(k->arg, 1, 30000);
    int g = corpus_range(&c->rng, lo, hi) / 100 * 100;
    if (g < lo) g = lo;
    if (g < 1000 || (g % 1000 && corpus_chance(&c->rng, 30)))
        corpus_fmt(v->bare, CORPUS_SAY, corpus_chance(&c->rng, 50) ? "%d g" : "%d grams", g);
    else if (g % 1000) corpus_fmt(v->bare, CORPUS_SAY, "%.1f kg", g / 1000.0);
    else corpus_fmt(v->bare, CORPUS_SAY, corpus_chance(&c->rng, 50) ? "%d kg" : "%d kilos", g / 1000);
    double kg = g / 1000.0;
    corpus_fmt(v->show, CORPUS_SAY, "%g kg", kg);
    v->json = cJSON_CreateNumber(kg);
    v->num = kg;
}

/* Grams, said in g or kg ("0.5 kg" -> 500). arg "lo:hi". */
static void g_grams(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    int lo = corpus_arg_int(k->arg, 0, 50), hi = corpus_arg_int(k->arg, 1, 1500);
    int g = corpus_range(&c->rng, lo, hi) / 50 * 50;
    if (g < lo) g = lo;
    if (g >= 500 && g % 500 == 0 && corpus_chance(&c->rng, 50)) corpus_fmt(v->bare, CORPUS_SAY, "%g kg", g / 1000.0);
    else corpus_fmt(v->bare, CORPUS_SAY, corpus_chance(&c->rng, 50) ? "%d g" : "%d grams", g);
    corpus_fmt(v->show, CORPUS_SAY, "%d g", g);
    v->json = cJSON_CreateNumber(g);
    v->num = g;
}

/* ------------------------------------------------------------------ money */

struct currency {
    const char *code, *names; /* names: how users call it */
    const char *sym;          /* symbol written before the amount, or NULL */
    double per_usd;           /* illustrative rate used for conversions (results say so) */
    bool whole;               /* amounts without cents */
};
static const struct currency currencies[] = {
    {"USD", "US dollars|dollars|USD", "$", 1.0, false},
    {"EUR", "euros|EUR", "€", 0.92, false},
    {"GBP", "British pounds|pounds|GBP", "£", 0.79, false},
    {"JPY", "Japanese yen|yen|JPY", "¥", 150.0, true},
    {"CHF", "Swiss francs|CHF", NULL, 0.88, false},
    {"CAD", "Canadian dollars|CAD", "CA$", 1.36, false},
    {"INR", "Indian rupees|rupees|INR", "₹", 83.0, true},
    {"SEK", "Swedish kronor|SEK", NULL, 10.5, false},
    {"BRL", "Brazilian reais|BRL", "R$", 5.0, false},
    {"KRW", "Korean won|KRW", "₩", 1330.0, true},
    {"CNY", "Chinese yuan|yuan|CNY", NULL, 7.2, false},
    {"MXN", "Mexican pesos|MXN", NULL, 17.0, false},
};
#define N_CUR ((int)(sizeof currencies / sizeof currencies[0]))

static const struct currency *currency_by_code(const char *code)
{
    for (int i = 0; i < N_CUR; i++)
        if (!strcmp(currencies[i].code, code)) return &currencies[i];
    return &currencies[0];
}

/* How the assistant writes an amount: "$25.50", "¥3,000", "45.00 CHF". */
void corpus_money_show(double x, const char *code, char *out)
{
    const struct currency *cur = currency_by_code(code);
    char num[48];
    corpus_money_text(x, !cur->whole, num, sizeof num);
    if (cur->sym) corpus_fmt(out, CORPUS_SAY, "%s%s", cur->sym, num);
    else corpus_fmt(out, CORPUS_SAY, "%s %s", num, cur->code);
}

/* arg "lo:hi[:CODES]" in the currency's units (CODES: '/'-separated allowed currencies).
 * Sets c->currency for a linked currency parameter. */
static void g_money(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    char allowed[64];
    corpus_arg_field(k->arg, 2, allowed, sizeof allowed);
    const struct currency *cur;
    int tries = 0;
    do {
        cur = &currencies[corpus_below(&c->rng, corpus_chance(&c->rng, 60) ? 4 : N_CUR)];
    } while (allowed[0] && !strstr(allowed, cur->code) && ++tries < 64);
    if (allowed[0] && !strstr(allowed, cur->code)) cur = currency_by_code("USD");
    int lo = corpus_arg_int(k->arg, 0, 5), hi = corpus_arg_int(k->arg, 1, 500);
    double scale = cur->per_usd >= 50 ? (cur->per_usd >= 500 ? 1000 : 100) : 1;
    double x;
    if (cur->whole) x = (double)corpus_range(&c->rng, lo, hi) * scale / 10 * 10;
    else if (corpus_chance(&c->rng, 45)) x = corpus_range(&c->rng, lo, hi);
    else x = corpus_round2(corpus_range(&c->rng, lo * 100, hi * 100) / 100.0);
    if (cur->whole) x = floor(x / 10) * 10;
    if (x <= 0) x = 10;
    char num[48], w[96];
    bool cents = x != floor(x);
    corpus_money_text(x, cents, num, sizeof num);
    const char *name_alts = cur->names;
    char name[48];
    corpus_pick(&c->rng, name_alts, name, sizeof name);
    int style = (int)corpus_below(&c->rng, 5);
    if (style == 0 && !cur->sym) style = 1;
    if (style == 3 && !(!cents && x <= 100) && !(!strcmp(cur->code, "EUR") && cents)) style = 4;
    if (style == 0) {
        corpus_fmt(v->bare, CORPUS_SAY, "%s%s", cur->sym, num);
    } else if (style == 1) {
        corpus_fmt(v->bare, CORPUS_SAY, "%s %s", num, name);
    } else if (style == 2) {
        corpus_fmt(v->bare, CORPUS_SAY, "%s %s", num, cur->code);
    } else if (style == 3 && !cents) { /* "forty euros" */
        corpus_number_words((int)x, w, sizeof w);
        corpus_fmt(v->bare, CORPUS_SAY, "%s %s", w, name);
    } else if (style == 3) { /* European decimal comma: "12,50 €" */
        corpus_fmt(v->bare, CORPUS_SAY, "%lld,%02lld €", (long long)floor(x),
                   (long long)llround((x - floor(x)) * 100));
    } else if (cur->sym) {
        corpus_fmt(v->bare, CORPUS_SAY, "%s%s", cur->sym, num);
    } else {
        corpus_fmt(v->bare, CORPUS_SAY, "%s %s", cur->code, num);
    }
    corpus_money_show(x, cur->code, v->show);
    v->json = cJSON_CreateNumber(x);
    v->num = x;
    c->last_num = x;
    corpus_fmt(v->unit, sizeof v->unit, "%s", cur->code);
    corpus_fmt(c->currency, sizeof c->currency, "%s", cur->code);
}

/* Linked: the currency of the amount drawn before it in the same call (never said alone). */
static void g_currency_linked(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    const char *code = c->currency[0] ? c->currency : "USD";
    v->json = cJSON_CreateString(code);
    corpus_put(v->bare, code);
}

/* A currency named by the user ("into yen" -> "JPY"), different from the amount's. */
static void g_currency(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    const struct currency *cur;
    do {
        cur = &currencies[corpus_below(&c->rng, N_CUR)];
    } while (c->currency[0] && !strcmp(cur->code, c->currency));
    char name[48];
    corpus_pick(&c->rng, cur->names, name, sizeof name);
    v->json = cJSON_CreateString(cur->code);
    corpus_put(v->bare, name);
    corpus_put(v->show, cur->code);
    if (!c->currency[0]) corpus_fmt(c->currency, sizeof c->currency, "%s", cur->code);
}

/* Result: the amount in the call's currency (or USD). arg "lo:hi". */
static void g_money_result(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    const struct currency *cur = currency_by_code(c->currency[0] ? c->currency : "USD");
    int lo = corpus_arg_int(k->arg, 0, 5), hi = corpus_arg_int(k->arg, 1, 500);
    double x = cur->whole ? corpus_range(&c->rng, lo, hi) * (cur->per_usd >= 500 ? 1000 : 100)
                          : corpus_round2(corpus_range(&c->rng, lo * 100, hi * 100) / 100.0);
    v->json = cJSON_CreateNumber(x);
    v->num = x;
    c->last_num = x;
    corpus_money_show(x, cur->code, v->bare);
}

double corpus_fx_rate(const char *from, const char *to)
{
    return currency_by_code(to)->per_usd / currency_by_code(from)->per_usd;
}

/* ------------------------------------------------------------------ dates and times */

static void iso_date(struct corpus_date d, char *out)
{
    corpus_fmt(out, CORPUS_SAY, "%04d-%02d-%02d", d.y, d.m, d.d);
}

static const char *ordinal_suffix(int d)
{
    if (d >= 11 && d <= 13) return "th";
    return d % 10 == 1 ? "st" : d % 10 == 2 ? "nd" : d % 10 == 3 ? "rd" : "th";
}

/* "Saturday, March 15" (+ ", 2026" when not this year): how answers state a date. */
void corpus_date_show(const struct corpus_ctx *c, struct corpus_date d, char *out)
{
    if (d.y != c->today.y)
        corpus_fmt(out, CORPUS_SAY, "%s, %s %d, %d", corpus_weekday_names[corpus_weekday(d)],
                   corpus_month_names[d.m - 1], d.d, d.y);
    else
        corpus_fmt(out, CORPUS_SAY, "%s, %s %d", corpus_weekday_names[corpus_weekday(d)],
                   corpus_month_names[d.m - 1], d.d);
}

/* An absolute date as users write it (bare) and with its preposition (say). */
static void say_abs_date(struct corpus_ctx *c, struct corpus_date d, char *bare, char *say)
{
    const char *mon = corpus_month_names[d.m - 1];
    bool year = d.y != c->today.y || corpus_chance(&c->rng, 15);
    switch (corpus_below(&c->rng, 5)) {
    case 0:
        if (year) corpus_fmt(bare, CORPUS_SAY, "%s %d, %d", mon, d.d, d.y);
        else corpus_fmt(bare, CORPUS_SAY, "%s %d", mon, d.d);
        break;
    case 1:
        if (year) corpus_fmt(bare, CORPUS_SAY, "%d %s %d", d.d, mon, d.y);
        else corpus_fmt(bare, CORPUS_SAY, "%d %s", d.d, mon);
        break;
    case 2:
        if (year) corpus_fmt(bare, CORPUS_SAY, "%s %d%s, %d", mon, d.d, ordinal_suffix(d.d), d.y);
        else corpus_fmt(bare, CORPUS_SAY, "%s %d%s", mon, d.d, ordinal_suffix(d.d));
        break;
    case 3:
        if (year) corpus_fmt(bare, CORPUS_SAY, "the %d%s of %s %d", d.d, ordinal_suffix(d.d), mon, d.y);
        else corpus_fmt(bare, CORPUS_SAY, "the %d%s of %s", d.d, ordinal_suffix(d.d), mon);
        break;
    default: iso_date(d, bare); break;
    }
    corpus_fmt(say, CORPUS_SAY, "on %s", bare);
}

/* A date off days from today, said relatively when that is natural. */
static void say_date(struct corpus_ctx *c, int off, char *bare, char *say)
{
    struct corpus_date d = corpus_date_add(c->today, off);
    int wd = corpus_weekday(d);
    char w[64];
    if (off == 0 && corpus_chance(&c->rng, 80)) {
        corpus_put(bare, "today");
        corpus_put(say, "today");
    } else if (off == 1 && corpus_chance(&c->rng, 80)) {
        corpus_put(bare, "tomorrow");
        corpus_put(say, "tomorrow");
    } else if (off == 2 && corpus_chance(&c->rng, 50)) {
        corpus_put(bare, "the day after tomorrow");
        corpus_put(say, "the day after tomorrow");
    } else if (off >= 2 && off <= 6 && corpus_chance(&c->rng, 60)) {
        /* the coming weekday: never today's weekday, so "on Friday" has one meaning */
        if (corpus_chance(&c->rng, 50)) {
            corpus_fmt(bare, CORPUS_SAY, "%s", corpus_weekday_names[wd]);
            corpus_fmt(say, CORPUS_SAY, "on %s", corpus_weekday_names[wd]);
        } else {
            corpus_fmt(bare, CORPUS_SAY, "this coming %s", corpus_weekday_names[wd]);
            corpus_fmt(say, CORPUS_SAY, "this coming %s", corpus_weekday_names[wd]);
        }
    } else if (off >= 3 && off <= 14 && corpus_chance(&c->rng, 35)) {
        if (off == 7 && corpus_chance(&c->rng, 50)) corpus_put(bare, "a week from today");
        else if (off == 14 && corpus_chance(&c->rng, 50)) corpus_put(bare, "two weeks from today");
        else {
            corpus_say_int(c, off, w);
            corpus_fmt(bare, CORPUS_SAY, "in %s days", w);
        }
        corpus_put(say, bare);
    } else {
        say_abs_date(c, d, bare, say);
    }
}

/* arg "lo:hi[:after]": days from today (after: from the last date drawn in this call, so an end
 * date follows its start). */
static void g_date(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    int lo = corpus_arg_int(k->arg, 0, 0), hi = corpus_arg_int(k->arg, 1, 45);
    char mode[16];
    corpus_arg_field(k->arg, 2, mode, sizeof mode);
    int64_t base = corpus_days_from_civil(c->today);
    int off = corpus_range(&c->rng, lo, hi);
    if (!strcmp(mode, "after") && c->last_day) off = (int)(c->last_day - base) + corpus_range(&c->rng, lo > 0 ? lo : 1, hi);
    struct corpus_date d = corpus_date_add(c->today, off);
    char iso[CORPUS_SAY];
    iso_date(d, iso);
    v->json = cJSON_CreateString(iso);
    if (off < 0) { /* past dates: "yesterday", "last Tuesday", "3 days ago", "March 1" */
        int back = -off;
        int wd = corpus_weekday(d);
        char w[64];
        if (back == 1 && corpus_chance(&c->rng, 70)) corpus_put(v->bare, "yesterday");
        else if (back >= 2 && back <= 6 && corpus_chance(&c->rng, 50))
            corpus_fmt(v->bare, CORPUS_SAY, "last %s", corpus_weekday_names[wd]);
        else if (back <= 14 && corpus_chance(&c->rng, 40)) {
            corpus_say_int(c, back, w);
            corpus_fmt(v->bare, CORPUS_SAY, "%s days ago", w);
        } else {
            char say[CORPUS_SAY];
            say_abs_date(c, d, v->bare, say);
        }
        bool relative = !strncmp(v->bare, "last ", 5) || strstr(v->bare, " ago") || !strcmp(v->bare, "yesterday");
        corpus_fmt(v->say, CORPUS_SAY, relative ? "%s" : "on %s", v->bare);
    } else {
        say_date(c, off, v->bare, v->say);
    }
    corpus_date_show(c, d, v->show);
    c->last_day = corpus_days_from_civil(d);
}

/* "5pm", "17:30", "half past nine in the morning", "noon". */
static void say_time(struct corpus_ctx *c, int h, int m, char *out)
{
    int h12 = h % 12 ? h % 12 : 12;
    const char *ap = h < 12 ? "am" : "pm";
    const char *part = h < 12 ? "in the morning" : h < 18 ? "in the afternoon" : "in the evening";
    char w[64];
    int style = (int)corpus_below(&c->rng, 4);
    if (style == 0) {
        corpus_fmt(out, CORPUS_SAY, "%02d:%02d", h, m);
    } else if (style == 1 && h == 12 && m == 0) {
        corpus_put(out, "noon");
    } else if (style == 1 && (m == 30 || m == 15)) {
        corpus_number_words(h12, w, sizeof w);
        corpus_fmt(out, CORPUS_SAY, "%s past %s %s", m == 30 ? "half" : "quarter", w, part);
    } else if (style == 1 && m == 45 && h < 23) {
        int nh = h + 1;
        corpus_number_words(nh % 12 ? nh % 12 : 12, w, sizeof w);
        corpus_fmt(out, CORPUS_SAY, "quarter to %s %s", w,
                   nh < 12 ? "in the morning" : nh < 18 ? "in the afternoon" : "in the evening");
    } else if (m == 0) {
        corpus_fmt(out, CORPUS_SAY, corpus_chance(&c->rng, 50) ? "%d%s" : "%d %s", h12, ap);
    } else {
        corpus_fmt(out, CORPUS_SAY, corpus_chance(&c->rng, 50) ? "%d:%02d%s" : "%d:%02d %s", h12, m, ap);
    }
}

/* arg "lo:hi[:after]" days, as g_date; the time is 07:00 .. 21:45 in quarter hours, or relative
 * to the current time ("in 2 hours") when the system prompt states it. */
static void g_datetime(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    int lo = corpus_arg_int(k->arg, 0, 0), hi = corpus_arg_int(k->arg, 1, 30);
    char mode[16];
    corpus_arg_field(k->arg, 2, mode, sizeof mode);
    int64_t base = corpus_days_from_civil(c->today);
    int off, h, m;
    char t[CORPUS_SAY];
    if (!strcmp(mode, "after") && c->last_minute) { /* an end time after the start just drawn */
        int64_t end = c->last_minute + 15 * corpus_range(&c->rng, 2, 12);
        off = (int)(end / 1440 - base);
        h = (int)(end % 1440) / 60;
        m = (int)(end % 60);
        struct corpus_date d = corpus_date_add(c->today, off);
        say_time(c, h, m, t);
        if (off == (int)(c->last_minute / 1440 - base)) {
            corpus_fmt(v->bare, CORPUS_SAY, "%s", t);
            corpus_fmt(v->say, CORPUS_SAY, "until %s", t);
        } else {
            char db[CORPUS_SAY], ds[CORPUS_SAY];
            say_date(c, off, db, ds);
            corpus_fmt(v->bare, CORPUS_SAY, "%s at %s", db, t);
            corpus_fmt(v->say, CORPUS_SAY, "until %s at %s", ds, t);
        }
        char iso[CORPUS_SAY];
        corpus_fmt(iso, sizeof iso, "%04d-%02d-%02dT%02d:%02d:00", d.y, d.m, d.d, h, m);
        v->json = cJSON_CreateString(iso);
        char ds2[CORPUS_SAY];
        corpus_date_show(c, d, ds2);
        corpus_fmt(v->show, CORPUS_SAY, "%s at %02d:%02d", ds2, h, m);
        c->last_minute = (base + off) * 1440 + h * 60 + m;
        return;
    }
    if (c->has_time && lo == 0 && corpus_chance(&c->rng, 15)) { /* "in 2 hours" */
        static const int deltas[] = {30, 45, 60, 90, 120, 180};
        int dm = deltas[corpus_below(&c->rng, 6)];
        int64_t now = base * 1440 + c->hour * 60 + c->minute, at = now + dm;
        off = (int)(at / 1440 - base);
        h = (int)(at % 1440) / 60;
        m = (int)(at % 60);
        const char *rel = dm == 30 ? "in half an hour" : dm == 45 ? "in 45 minutes" : dm == 60 ? "in an hour"
                        : dm == 90 ? "in an hour and a half" : dm == 120 ? "in two hours" : "in three hours";
        corpus_put(v->bare, rel);
        corpus_put(v->say, rel);
    } else {
        off = corpus_range(&c->rng, lo, hi);
        h = corpus_range(&c->rng, 7, 21);
        m = 15 * corpus_range(&c->rng, 0, 3);
        if (off == 0 && c->has_time && h * 60 + m <= c->hour * 60 + c->minute) off = 1;
        if (off == 0 && h >= 18 && corpus_chance(&c->rng, 50)) {
            int h12 = h % 12;
            corpus_fmt(v->bare, CORPUS_SAY, m ? "tonight at %d:%02d" : "tonight at %d", h12, m);
            corpus_put(v->say, v->bare);
        } else if (off == 0 && h >= 12 && h < 18 && m == 0 && corpus_chance(&c->rng, 50)) {
            corpus_fmt(v->bare, CORPUS_SAY, "this afternoon at %d", h % 12 ? h % 12 : 12);
            corpus_put(v->say, v->bare);
        } else {
            char db[CORPUS_SAY], ds[CORPUS_SAY];
            say_date(c, off, db, ds);
            say_time(c, h, m, t);
            if (corpus_chance(&c->rng, 80)) {
                corpus_fmt(v->bare, CORPUS_SAY, "%s at %s", db, t);
                corpus_fmt(v->say, CORPUS_SAY, "%s at %s", ds, t);
            } else {
                corpus_fmt(v->bare, CORPUS_SAY, "%s, %s", t, db);
                corpus_fmt(v->say, CORPUS_SAY, "at %s %s", t, ds);
            }
        }
    }
    struct corpus_date d = corpus_date_add(c->today, off);
    char iso[CORPUS_SAY], ds2[CORPUS_SAY];
    corpus_fmt(iso, sizeof iso, "%04d-%02d-%02dT%02d:%02d:00", d.y, d.m, d.d, h, m);
    v->json = cJSON_CreateString(iso);
    corpus_date_show(c, d, ds2);
    corpus_fmt(v->show, CORPUS_SAY, "%s at %02d:%02d", ds2, h, m);
    c->last_day = base + off;
    c->last_minute = (base + off) * 1440 + h * 60 + m;
}

/* Time of day "HH:MM". */
static void g_time(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    int h = corpus_range(&c->rng, 6, 22), m = 15 * corpus_range(&c->rng, 0, 3);
    char t[CORPUS_SAY], iso[16];
    say_time(c, h, m, t);
    corpus_put(v->bare, t);
    corpus_fmt(v->say, CORPUS_SAY, "at %s", t);
    corpus_fmt(iso, sizeof iso, "%02d:%02d", h, m);
    v->json = cJSON_CreateString(iso);
    corpus_put(v->show, iso);
}

/* Result: an absolute date-time near today (arg "lo:hi" days). */
static void g_datetime_result(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    int off = corpus_range(&c->rng, corpus_arg_int(k->arg, 0, 0), corpus_arg_int(k->arg, 1, 7));
    int h = corpus_range(&c->rng, 6, 22), m = 5 * corpus_range(&c->rng, 0, 11);
    struct corpus_date d = corpus_date_add(c->today, off);
    char iso[40], ds[CORPUS_SAY];
    corpus_fmt(iso, sizeof iso, "%04d-%02d-%02dT%02d:%02d:00", d.y, d.m, d.d, h, m);
    v->json = cJSON_CreateString(iso);
    corpus_date_show(c, d, ds);
    corpus_fmt(v->bare, CORPUS_SAY, "%s at %02d:%02d", ds, h, m);
}

static void g_time_result(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    int lo = corpus_arg_int(k->arg, 0, 0), hi = corpus_arg_int(k->arg, 1, 23);
    int h = corpus_range(&c->rng, lo, hi), m = corpus_range(&c->rng, 0, 59);
    char t[16];
    corpus_fmt(t, sizeof t, "%02d:%02d", h, m);
    corpus_val_str(v, t);
}

static void g_date_result(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    int off = corpus_range(&c->rng, corpus_arg_int(k->arg, 0, 0), corpus_arg_int(k->arg, 1, 14));
    struct corpus_date d = corpus_date_add(c->today, off);
    char iso[CORPUS_SAY];
    iso_date(d, iso);
    v->json = cJSON_CreateString(iso);
    corpus_date_show(c, d, v->bare);
}

/* ------------------------------------------------------------------ enums and booleans */

/* arg "value=say1/say2;value2=..." : the user says one of the phrases; the JSON is the value. */
static void g_enum(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    int n = 1;
    for (const char *p = k->arg; *p; p++) n += *p == ';';
    int pick = (int)corpus_below(&c->rng, (uint32_t)n);
    const char *p = k->arg;
    for (int i = 0; i < pick; i++) p = strchr(p, ';') + 1;
    const char *eq = strchr(p, '='), *end = strchr(p, ';');
    if (!end) end = p + strlen(p);
    char value[64], says[256], say[128];
    corpus_fmt(value, sizeof value, "%.*s", (int)(eq - p), p);
    corpus_fmt(says, sizeof says, "%.*s", (int)(end - eq - 1), eq + 1);
    for (char *s = says; *s; s++)
        if (*s == '/') *s = '|';
    corpus_pick(&c->rng, says, say, sizeof say);
    v->json = cJSON_CreateString(value);
    corpus_put(v->bare, say);
    corpus_put(v->say, say);
    char show[64];
    corpus_fmt(show, sizeof show, "%s", value);
    for (char *s = show; *s; s++)
        if (*s == '_') *s = ' ';
    corpus_put(v->show, show);
}

/* arg "true phrases;false phrases" ('/'-separated): "and notify the attendees" -> true. */
static void g_bool(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    bool b = corpus_chance(&c->rng, 60);
    const char *semi = strchr(k->arg, ';');
    char says[256], say[128];
    if (b) corpus_fmt(says, sizeof says, "%.*s", (int)(semi - k->arg), k->arg);
    else corpus_fmt(says, sizeof says, "%s", semi + 1);
    for (char *s = says; *s; s++)
        if (*s == '/') *s = '|';
    corpus_pick(&c->rng, says, say, sizeof say);
    v->json = cJSON_CreateBool(b);
    corpus_put(v->bare, say);
    corpus_put(v->say, say);
    corpus_put(v->show, b ? "yes" : "no");
}

/* A fixed result value (status words): arg is the value. */
static void g_fixed(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)c;
    corpus_val_str(v, k->arg);
}

static void g_fixed_bool(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)c;
    bool b = k->arg[0] == 't';
    v->json = cJSON_CreateBool(b);
    corpus_put(v->bare, b ? "yes" : "no");
}

/* ------------------------------------------------------------------ languages and text */

struct lang {
    const char *code, *name;
};
static const struct lang langs[] = {
    {"en", "English"}, {"fr", "French"}, {"es", "Spanish"}, {"de", "German"}, {"ja", "Japanese"},
    {"zh", "Chinese"}, {"it", "Italian"}, {"pt", "Portuguese"}, {"ko", "Korean"}, {"nl", "Dutch"},
};
#define N_PHRASE_LANGS 6 /* the first six have the phrase table below */

/* Phrases written for tern in the six languages of the table (translation results). */
static const char *const phrases[][N_PHRASE_LANGS] = {
    {"Where is the train station?", "Où est la gare ?", "¿Dónde está la estación de tren?", "Wo ist der Bahnhof?", "駅はどこですか？", "火车站在哪里？"},
    {"How much does this cost?", "Combien ça coûte ?", "¿Cuánto cuesta esto?", "Wie viel kostet das?", "これはいくらですか？", "这个多少钱？"},
    {"Thank you very much for your help.", "Merci beaucoup pour votre aide.", "Muchas gracias por su ayuda.", "Vielen Dank für Ihre Hilfe.", "助けていただき、ありがとうございます。", "非常感谢你的帮助。"},
    {"I would like to book a table for two.", "Je voudrais réserver une table pour deux.", "Quisiera reservar una mesa para dos.", "Ich möchte einen Tisch für zwei reservieren.", "二人用のテーブルを予約したいです。", "我想订一张两人桌。"},
    {"The meeting starts at nine.", "La réunion commence à neuf heures.", "La reunión empieza a las nueve.", "Das Meeting beginnt um neun Uhr.", "会議は九時に始まります。", "会议九点开始。"},
    {"Good morning! How are you?", "Bonjour ! Comment allez-vous ?", "¡Buenos días! ¿Cómo está?", "Guten Morgen! Wie geht es Ihnen?", "おはようございます！お元気ですか？", "早上好！你好吗？"},
    {"Can you help me, please?", "Pouvez-vous m'aider, s'il vous plaît ?", "¿Puede ayudarme, por favor?", "Können Sie mir bitte helfen?", "手伝っていただけますか？", "你能帮我一下吗？"},
    {"I don't understand.", "Je ne comprends pas.", "No entiendo.", "Ich verstehe nicht.", "わかりません。", "我不明白。"},
    {"The weather is beautiful today.", "Il fait beau aujourd'hui.", "Hoy hace buen tiempo.", "Heute ist schönes Wetter.", "今日はいい天気です。", "今天天气很好。"},
    {"Where can I buy tickets?", "Où puis-je acheter des billets ?", "¿Dónde puedo comprar billetes?", "Wo kann ich Fahrkarten kaufen?", "切符はどこで買えますか？", "我在哪里可以买票？"},
    {"I am allergic to peanuts.", "Je suis allergique aux cacahuètes.", "Soy alérgico a los cacahuetes.", "Ich bin allergisch gegen Erdnüsse.", "私はピーナッツアレルギーです。", "我对花生过敏。"},
    {"The package arrived yesterday.", "Le colis est arrivé hier.", "El paquete llegó ayer.", "Das Paket ist gestern angekommen.", "荷物は昨日届きました。", "包裹昨天到了。"},
    {"Please call me back tomorrow.", "Merci de me rappeler demain.", "Por favor, llámeme mañana.", "Bitte rufen Sie mich morgen zurück.", "明日折り返し電話してください。", "请明天给我回电话。"},
    {"The store closes at six.", "Le magasin ferme à six heures.", "La tienda cierra a las seis.", "Der Laden schließt um sechs.", "店は六時に閉まります。", "商店六点关门。"},
    {"Happy birthday!", "Joyeux anniversaire !", "¡Feliz cumpleaños!", "Alles Gute zum Geburtstag!", "お誕生日おめでとうございます！", "生日快乐！"},
    {"Where is the nearest pharmacy?", "Où est la pharmacie la plus proche ?", "¿Dónde está la farmacia más cercana?", "Wo ist die nächste Apotheke?", "一番近い薬局はどこですか？", "最近的药店在哪里？"},
    {"I lost my passport.", "J'ai perdu mon passeport.", "He perdido mi pasaporte.", "Ich habe meinen Reisepass verloren.", "パスポートをなくしました。", "我的护照丢了。"},
    {"See you next week.", "À la semaine prochaine.", "Nos vemos la próxima semana.", "Bis nächste Woche.", "また来週会いましょう。", "下周见。"},
};
#define N_PHRASES ((int)(sizeof phrases / sizeof phrases[0]))

/* Source text for translation: a phrase in one of the six languages; num = phrase * 16 + lang. */
static void g_phrase(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    int p = (int)corpus_below(&c->rng, N_PHRASES), l = (int)corpus_below(&c->rng, N_PHRASE_LANGS);
    corpus_val_str(v, phrases[p][l]);
    v->num = p * 16 + l;
    c->src_lang = l;
}

/* A language the user names ("into Japanese" -> "ja"); arg "6" limits to the phrase table's
 * languages, and it differs from the source text's language. */
static void g_lang(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    int n = k->arg && k->arg[0] == '6' ? N_PHRASE_LANGS : (int)(sizeof langs / sizeof langs[0]);
    int l;
    do {
        l = (int)corpus_below(&c->rng, (uint32_t)n);
    } while (l == c->src_lang && n > 1);
    v->json = cJSON_CreateString(langs[l].code);
    corpus_put(v->bare, langs[l].name);
    corpus_put(v->show, langs[l].name);
    v->num = l;
}

const char *corpus_lang_code(bool phrase_langs, int i)
{
    int n = phrase_langs ? N_PHRASE_LANGS : (int)(sizeof langs / sizeof langs[0]);
    return i < n ? langs[i].code : NULL;
}

static void g_translation(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    const struct corpus_val *src = corpus_call_val(c, "source_text");
    const struct corpus_val *tgt = corpus_call_val(c, "target_language");
    int p = src ? (int)src->num / 16 : 0, t = tgt ? (int)tgt->num : 0;
    if (t >= N_PHRASE_LANGS) t = 0;
    corpus_val_str(v, phrases[p][t]);
}

static void g_detected(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    const struct corpus_val *src = corpus_call_val(c, "detect_text");
    if (!src) src = corpus_call_val(c, "source_text");
    int l = src ? (int)src->num % 16 : 0;
    v->json = cJSON_CreateString(langs[l].code);
    corpus_fmt(v->bare, CORPUS_SAY, "%s (%s)", langs[l].name, langs[l].code);
}

/* Definitions written for the "word" list (same order). */
static const char *const definitions[] = {
    "the luck of finding something good without looking for it",
    "lasting for a very short time",
    "found everywhere at once",
    "able to recover quickly from difficulties",
    "very careful about every small detail",
    "expressing ideas clearly and persuasively",
    "honest and direct, even when it is uncomfortable",
    "careful not to spend more money than necessary",
    "holding on firmly and not giving up easily",
    "playful and fanciful in an unexpected way",
};

static void g_definition(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    const struct corpus_val *w = corpus_call_val(c, "dict_word");
    int i = w ? (int)w->num : 0;
    if (i < 0 || i >= (int)(sizeof definitions / sizeof definitions[0])) i = 0;
    corpus_val_str(v, definitions[i]);
}

/* ------------------------------------------------------------------ code */

static void g_code(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    char code[CORPUS_SAY], t1[64], t2[64], c1[64], c2[64], s1[64];
    const char *lang = k->arg;
    if (!strcmp(lang, "sql")) {
        corpus_word(c, "table", t1, sizeof t1);
        corpus_word(c, "column", c1, sizeof c1);
        corpus_word(c, "column", c2, sizeof c2);
        int n = corpus_range(&c->rng, 5, 100);
        switch (corpus_below(&c->rng, 4)) {
        case 0:
            corpus_fmt(code, sizeof code, "SELECT %s, %s FROM %s ORDER BY %s DESC LIMIT %d;", c1, c2, t1, c2, n);
            break;
        case 1:
            corpus_fmt(code, sizeof code, "SELECT COUNT(*) FROM %s WHERE %s >= '%04d-%02d-01';", t1,
                       "created_at", c->today.y, c->today.m);
            break;
        case 2:
            corpus_word(c, "table", t2, sizeof t2);
            corpus_fmt(code, sizeof code,
                       "SELECT o.id, c.name\nFROM %s o\nJOIN %s c ON c.id = o.%s\nWHERE o.status = 'open';",
                       t1, t2, "user_id");
            break;
        default:
            corpus_fmt(code, sizeof code, "SELECT %s, SUM(amount) AS total\nFROM %s\nGROUP BY %s\nHAVING SUM(amount) > %d;",
                       c1, t1, c1, n * 10);
            break;
        }
    } else if (!strcmp(lang, "shell")) {
        corpus_word(c, "service", s1, sizeof s1);
        switch (corpus_below(&c->rng, 6)) {
        case 0: corpus_fmt(code, sizeof code, "kubectl get pods -n %s", s1); break;
        case 1: corpus_fmt(code, sizeof code, "df -h /var"); break;
        case 2: corpus_fmt(code, sizeof code, "tail -n %d /var/log/%s.log", corpus_range(&c->rng, 20, 200), s1); break;
        case 3: corpus_fmt(code, sizeof code, "systemctl status %s", s1); break;
        case 4: corpus_fmt(code, sizeof code, "grep -c \"ERROR\" /var/log/%s.log", s1); break;
        default: corpus_fmt(code, sizeof code, "du -sh /srv/%s/* | sort -h | tail -5", s1); break;
        }
    } else { /* python */
        int a = corpus_range(&c->rng, 2, 9);
        switch (corpus_below(&c->rng, 4)) {
        case 0:
            corpus_fmt(code, sizeof code, "def add(a, b):\n    return a + b\n\nprint(add(%d, %d))", a, a * 3);
            break;
        case 1:
            corpus_fmt(code, sizeof code, "items = [x * %d for x in range(10)]\nprint(sum(items) / len(items))", a);
            break;
        case 2:
            corpus_fmt(code, sizeof code,
                       "def is_even(n):\n    if n %% 2 = 0:\n        return True\n    return False");
            break;
        default:
            corpus_fmt(code, sizeof code, "name = input(\"Name: \")\nprint(f\"Hello, {name}! 👋\")");
            break;
        }
    }
    corpus_val_str(v, code);
    bool multi = strchr(code, '\n') != NULL;
    if (multi) corpus_fmt(v->say, CORPUS_SAY, ":\n```%s\n%s\n```", !strcmp(lang, "shell") ? "bash" : lang, code);
    else corpus_fmt(v->say, CORPUS_SAY, ": `%s`", code);
}

/* ------------------------------------------------------------------ math */

/* An expression said in words or symbols; the JSON is the symbolic form; num its value. */
static void g_expr(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    int a = corpus_range(&c->rng, 2, 250), b = corpus_range(&c->rng, 2, 60), d = corpus_range(&c->rng, 1, 99);
    int form = (int)corpus_below(&c->rng, 5);
    char sym[128], said[CORPUS_SAY];
    double val;
    switch (form) {
    case 0:
        corpus_fmt(sym, sizeof sym, "%d * %d + %d", a, b, d);
        val = (double)a * b + d;
        corpus_fmt(said, sizeof said, corpus_chance(&c->rng, 50) ? "%d times %d plus %d" : "%d * %d + %d", a, b, d);
        break;
    case 1:
        corpus_fmt(sym, sizeof sym, "%d - %d * %d", a * 10, b, d % 9 + 2);
        val = (double)a * 10 - (double)b * (d % 9 + 2);
        corpus_fmt(said, sizeof said, corpus_chance(&c->rng, 50) ? "%d minus %d times %d" : "%d - %d * %d", a * 10, b, d % 9 + 2);
        break;
    case 2:
        corpus_fmt(sym, sizeof sym, "%d / %d", a * b, b);
        val = a;
        corpus_fmt(said, sizeof said, corpus_chance(&c->rng, 50) ? "%d divided by %d" : "%d / %d", a * b, b);
        break;
    case 3:
        corpus_fmt(sym, sizeof sym, "(%d + %d) * %d", a, d, b);
        val = (double)(a + d) * b;
        corpus_fmt(said, sizeof said, corpus_chance(&c->rng, 50) ? "the sum of %d and %d, times %d" : "(%d + %d) * %d", a, d, b);
        break;
    default:
        corpus_fmt(sym, sizeof sym, "%d * %d", a, b);
        val = (double)a * b;
        corpus_fmt(said, sizeof said, corpus_chance(&c->rng, 50) ? "the product of %d and %d" : "%d × %d", a, b);
        break;
    }
    v->json = cJSON_CreateString(sym);
    corpus_put(v->bare, said);
    corpus_put(v->show, sym);
    v->num = val;
}

static void g_equation(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    int a = corpus_range(&c->rng, 2, 12), x = corpus_range(&c->rng, -9, 20), b = corpus_range(&c->rng, 1, 40);
    char s[64];
    corpus_fmt(s, sizeof s, "%dx + %d = %d", a, b, a * x + b);
    corpus_val_str(v, s);
    v->num = x;
}

/* A list of 4-7 integers said as "12, 15, 9 and 20"; num = their mean. */
static void g_numlist(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    int n = corpus_range(&c->rng, 4, 7), x[8];
    v->json = cJSON_CreateArray();
    struct corpus_buf b = {0};
    double sum = 0;
    for (int i = 0; i < n; i++) {
        x[i] = corpus_range(&c->rng, 1, 120);
        sum += x[i];
        cJSON_AddItemToArray(v->json, cJSON_CreateNumber(x[i]));
        corpus_buf_printf(&b, "%s%d", i == 0 ? "" : i == n - 1 ? " and " : ", ", x[i]);
    }
    corpus_put(v->bare, b.p ? b.p : "");
    corpus_buf_free(&b);
    /* median: sort a copy */
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && x[j - 1] > x[j]; j--) {
            int t = x[j];
            x[j] = x[j - 1];
            x[j - 1] = t;
        }
    v->num = corpus_round2(sum / n);
    c->stat_median = n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2.0;
    c->stat_min = x[0];
    c->stat_max = x[n - 1];
}

static void set_num_result(struct corpus_val *v, double x, const char *suffix)
{
    x = corpus_round2(x);
    v->json = cJSON_CreateNumber(x);
    v->num = x;
    if (x == floor(x) && fabs(x) < 1e12) corpus_fmt(v->bare, CORPUS_SAY, "%.0f%s", x, suffix);
    else corpus_fmt(v->bare, CORPUS_SAY, "%.2f%s", x, suffix);
}

/* Results computed from the call's arguments: arg names which. */
static void g_computed(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    const char *w = k->arg;
    const struct corpus_val *x;
    if (!strcmp(w, "expr")) {
        x = corpus_call_val(c, "math_expression");
        set_num_result(v, x ? x->num : 0, "");
    } else if (!strcmp(w, "solve")) {
        x = corpus_call_val(c, "equation");
        char s[32];
        corpus_fmt(s, sizeof s, "x = %d", x ? (int)x->num : 0);
        corpus_val_str(v, s);
    } else if (!strcmp(w, "mean")) {
        x = corpus_call_val(c, "number_list");
        set_num_result(v, x ? x->num : 0, "");
    } else if (!strcmp(w, "median")) {
        set_num_result(v, c->stat_median, "");
    } else if (!strcmp(w, "range")) {
        set_num_result(v, c->stat_max - c->stat_min, "");
    } else if (!strcmp(w, "convert")) {
        const struct corpus_val *val = corpus_call_val(c, "conv_value");
        const struct corpus_val *from = corpus_call_val(c, "from_unit");
        const struct corpus_val *to = corpus_call_val(c, "to_unit");
        double r = val && from && to ? corpus_unit_convert(val->num, from->json->valuestring, to->json->valuestring) : 0;
        char suf[40];
        corpus_fmt(suf, sizeof suf, " %s", to ? to->json->valuestring : "");
        set_num_result(v, r, suf);
    } else if (!strcmp(w, "fx_rate") || !strcmp(w, "fx_amount")) {
        const struct corpus_val *from = corpus_call_val(c, "from_currency");
        const struct corpus_val *to = corpus_call_val(c, "to_currency");
        const struct corpus_val *amt = corpus_call_val(c, "amount");
        if (!from) from = corpus_call_val(c, "currency"); /* converting an amount: its own currency */
        const char *fc = from ? from->json->valuestring : "USD", *tc = to ? to->json->valuestring : "EUR";
        double rate = corpus_fx_rate(fc, tc);
        if (!strcmp(w, "fx_rate")) {
            double r4 = round(rate * 10000) / 10000;
            v->json = cJSON_CreateNumber(r4);
            corpus_fmt(v->bare, CORPUS_SAY, "1 %s = %.4f %s", fc, r4, tc);
        } else {
            double y = corpus_round2((amt ? amt->num : 100) * rate);
            v->json = cJSON_CreateNumber(y);
            corpus_money_show(y, tc, v->bare);
        }
    } else if (!strcmp(w, "tip") || !strcmp(w, "per_person")) {
        const struct corpus_val *bill = corpus_call_val(c, "bill_amount");
        const struct corpus_val *pct = corpus_call_val(c, "tip_pct");
        const struct corpus_val *ways = corpus_call_val(c, "split_ways");
        double total = (bill ? bill->num : 0) * (1 + (pct ? pct->num : 15) / 100.0);
        double y = !strcmp(w, "tip") ? corpus_round2(total) : corpus_round2(total / (ways ? ways->num : 1));
        v->json = cJSON_CreateNumber(y);
        corpus_money_show(y, c->currency[0] ? c->currency : "USD", v->bare);
    } else if (!strcmp(w, "loan")) {
        const struct corpus_val *p = corpus_call_val(c, "loan_amount");
        const struct corpus_val *rate = corpus_call_val(c, "annual_rate_pct");
        const struct corpus_val *n = corpus_call_val(c, "term_months");
        double P = p ? p->num : 10000, r = (rate ? rate->num : 5) / 1200.0, N = n ? n->num : 60;
        double pay = r > 0 ? P * r / (1 - pow(1 + r, -N)) : P / N;
        pay = corpus_round2(pay);
        v->json = cJSON_CreateNumber(pay);
        corpus_money_show(pay, c->currency[0] ? c->currency : "USD", v->bare);
    } else if (!strcmp(w, "scaled")) {
        const struct corpus_val *s = corpus_call_val(c, "servings");
        char t[64];
        corpus_fmt(t, sizeof t, "%d servings", s ? (int)s->num : 4);
        corpus_val_str(v, t);
    } else {
        corpus_val_str(v, "ok");
    }
}

/* ------------------------------------------------------------------ units */

struct unit {
    const char *code, *says;
    int dim;       /* 0 length, 1 mass, 2 temperature, 3 volume */
    double to_base; /* length: meters, mass: grams, volume: liters */
};
static const struct unit units[] = {
    {"km", "kilometers/km", 0, 1000}, {"m", "meters", 0, 1}, {"mi", "miles", 0, 1609.344},
    {"ft", "feet", 0, 0.3048}, {"cm", "centimeters/cm", 0, 0.01}, {"in", "inches", 0, 0.0254},
    {"kg", "kilograms/kg", 1, 1000}, {"g", "grams", 1, 1}, {"lb", "pounds/lbs", 1, 453.59237},
    {"oz", "ounces", 1, 28.349523125}, {"celsius", "Celsius/degrees Celsius/°C", 2, 0},
    {"fahrenheit", "Fahrenheit/degrees Fahrenheit/°F", 2, 0}, {"l", "liters", 3, 1},
    {"ml", "milliliters/ml", 3, 0.001}, {"gal", "US gallons/gallons", 3, 3.785411784},
};
#define N_UNITS ((int)(sizeof units / sizeof units[0]))

const char *corpus_unit_code(int i)
{
    return i < N_UNITS ? units[i].code : NULL;
}

static const struct unit *unit_by_code(const char *code)
{
    for (int i = 0; i < N_UNITS; i++)
        if (!strcmp(units[i].code, code)) return &units[i];
    return &units[0];
}

double corpus_unit_convert(double x, const char *from, const char *to)
{
    const struct unit *a = unit_by_code(from), *b = unit_by_code(to);
    if (a->dim == 2) {
        double cel = !strcmp(a->code, "celsius") ? x : (x - 32) * 5 / 9;
        return !strcmp(b->code, "celsius") ? cel : cel * 9 / 5 + 32;
    }
    return x * a->to_base / b->to_base;
}

/* from_unit draws a unit (its dimension is kept for to_unit); to_unit another of that dimension. */
static void g_unit(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    bool to = k->arg && !strcmp(k->arg, "to");
    int i;
    do {
        i = (int)corpus_below(&c->rng, N_UNITS);
    } while (to && (units[i].dim != c->unit_dim || i == c->unit_from));
    if (!to) {
        c->unit_dim = units[i].dim;
        c->unit_from = i;
    }
    char says[64], say[64];
    corpus_fmt(says, sizeof says, "%s", units[i].says);
    for (char *s = says; *s; s++)
        if (*s == '/') *s = '|';
    corpus_pick(&c->rng, says, say, sizeof say);
    v->json = cJSON_CreateString(units[i].code);
    corpus_put(v->bare, say);
    corpus_put(v->show, units[i].code);
}

/* The value to convert, said with its unit: "5 miles" (the unit part comes from from_unit, so
 * this one is said together with it: see KF_LINKED on from_unit). */
static void g_conv_value(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    double x = corpus_chance(&c->rng, 60) ? corpus_range(&c->rng, 1, 500) : corpus_range(&c->rng, 5, 995) / 10.0;
    v->json = cJSON_CreateNumber(x);
    v->num = x;
    if (x == floor(x)) corpus_fmt(v->bare, CORPUS_SAY, "%.0f", x);
    else corpus_fmt(v->bare, CORPUS_SAY, "%.1f", x);
}

/* ------------------------------------------------------------------ places and objects */

struct country {
    const char *code, *names;
};
static const struct country countries[] = {
    {"FR", "France"}, {"DE", "Germany"}, {"ES", "Spain"}, {"IT", "Italy"}, {"GB", "the UK|the United Kingdom"},
    {"US", "the US|the United States|USA"}, {"JP", "Japan"}, {"BR", "Brazil"}, {"CA", "Canada"},
    {"SE", "Sweden"}, {"NL", "the Netherlands"}, {"PL", "Poland"}, {"KR", "South Korea"},
    {"IN", "India"}, {"MX", "Mexico"}, {"NG", "Nigeria"}, {"AU", "Australia"}, {"CH", "Switzerland"},
    {"TR", "Türkiye|Turkey"}, {"PT", "Portugal"},
};
#define N_COUNTRIES ((int)(sizeof countries / sizeof countries[0]))

static void g_country(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    const struct country *ct = &countries[corpus_below(&c->rng, N_COUNTRIES)];
    char name[64];
    corpus_pick(&c->rng, ct->names, name, sizeof name);
    v->json = cJSON_CreateString(ct->code);
    corpus_put(v->bare, name);
    corpus_put(v->show, ct->code);
}

/* Addresses in the local style of their country; the JSON splits them into fields. */
struct addr {
    char street[128], postal[32], city[64], country[4], text[CORPUS_SAY];
};
static void draw_address(struct corpus_ctx *c, struct addr *a)
{
    static const char *const fr_st[] = {"rue des Lilas", "avenue Jean Jaurès", "rue de la Paix", "boulevard Voltaire", "place Bellecour"};
    static const char *const de_st[] = {"Lindenstraße", "Bergweg", "Gartenstraße", "Schillerplatz", "Mühlenweg"};
    static const char *const es_st[] = {"Calle Mayor", "Avenida de la Constitución", "Calle del Carmen", "Paseo de Gracia"};
    static const char *const uk_st[] = {"Baker Lane", "Mill Road", "Station Street", "Church Walk"};
    static const char *const us_st[] = {"Pine Avenue", "Maple Street", "Harbor Road", "Sunset Boulevard"};
    static const char *const jp_city[] = {"Tokyo", "東京都渋谷区", "Osaka", "Kyoto"};
    int n = corpus_range(&c->rng, 1, 180);
    switch (corpus_below(&c->rng, 6)) {
    case 0: {
        static const char *const cities[] = {"Lyon", "Paris", "Marseille", "Toulouse", "Nantes"};
        static const char *const cps[] = {"69003", "75011", "13001", "31000", "44000"};
        int i = (int)corpus_below(&c->rng, 5);
        corpus_fmt(a->street, sizeof a->street, "%d %s", n, fr_st[corpus_below(&c->rng, 5)]);
        corpus_fmt(a->postal, sizeof a->postal, "%s", cps[i]);
        corpus_fmt(a->city, sizeof a->city, "%s", cities[i]);
        corpus_fmt(a->country, sizeof a->country, "FR");
        corpus_fmt(a->text, sizeof a->text, "%s, %s %s, France", a->street, a->postal, a->city);
        break;
    }
    case 1: {
        static const char *const cities[] = {"Berlin", "München", "Köln", "Hamburg"};
        static const char *const cps[] = {"10115", "80331", "50667", "20095"};
        int i = (int)corpus_below(&c->rng, 4);
        corpus_fmt(a->street, sizeof a->street, "%s %d", de_st[corpus_below(&c->rng, 5)], n % 60 + 1);
        corpus_fmt(a->postal, sizeof a->postal, "%s", cps[i]);
        corpus_fmt(a->city, sizeof a->city, "%s", cities[i]);
        corpus_fmt(a->country, sizeof a->country, "DE");
        corpus_fmt(a->text, sizeof a->text, "%s, %s %s, Germany", a->street, a->postal, a->city);
        break;
    }
    case 2: {
        static const char *const cities[] = {"Madrid", "Barcelona", "Sevilla", "Málaga"};
        static const char *const cps[] = {"28013", "08007", "41004", "29015"};
        int i = (int)corpus_below(&c->rng, 4);
        corpus_fmt(a->street, sizeof a->street, "%s %d", es_st[corpus_below(&c->rng, 4)], n % 90 + 1);
        corpus_fmt(a->postal, sizeof a->postal, "%s", cps[i]);
        corpus_fmt(a->city, sizeof a->city, "%s", cities[i]);
        corpus_fmt(a->country, sizeof a->country, "ES");
        corpus_fmt(a->text, sizeof a->text, "%s, %s %s, Spain", a->street, a->postal, a->city);
        break;
    }
    case 3: {
        static const char *const cities[] = {"London", "Manchester", "Bristol", "Leeds"};
        static const char *const cps[] = {"NW1 6XE", "M1 2AB", "BS1 4DJ", "LS1 5QS"};
        int i = (int)corpus_below(&c->rng, 4);
        corpus_fmt(a->street, sizeof a->street, "%d %s", n, uk_st[corpus_below(&c->rng, 4)]);
        corpus_fmt(a->postal, sizeof a->postal, "%s", cps[i]);
        corpus_fmt(a->city, sizeof a->city, "%s", cities[i]);
        corpus_fmt(a->country, sizeof a->country, "GB");
        corpus_fmt(a->text, sizeof a->text, "%s, %s %s, United Kingdom", a->street, a->city, a->postal);
        break;
    }
    case 4: {
        static const char *const cities[] = {"Portland", "Austin", "Denver", "Boston"};
        static const char *const cps[] = {"97205", "78701", "80202", "02108"};
        int i = (int)corpus_below(&c->rng, 4);
        corpus_fmt(a->street, sizeof a->street, "%d %s", n * 10, us_st[corpus_below(&c->rng, 4)]);
        corpus_fmt(a->postal, sizeof a->postal, "%s", cps[i]);
        corpus_fmt(a->city, sizeof a->city, "%s", cities[i]);
        corpus_fmt(a->country, sizeof a->country, "US");
        corpus_fmt(a->text, sizeof a->text, "%s, %s %s, USA", a->street, a->city, a->postal);
        break;
    }
    default: {
        int i = (int)corpus_below(&c->rng, 4);
        corpus_fmt(a->street, sizeof a->street, "%d-%d-%d Jingumae", n % 6 + 1, n % 20 + 1, n % 30 + 1);
        corpus_fmt(a->postal, sizeof a->postal, "150-%04d", 1000 + n);
        corpus_fmt(a->city, sizeof a->city, "%s", jp_city[i]);
        corpus_fmt(a->country, sizeof a->country, "JP");
        corpus_fmt(a->text, sizeof a->text, "%s, %s %s, Japan", a->street, a->city, a->postal);
        break;
    }
    }
}

static void g_address(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    struct addr a;
    draw_address(c, &a);
    v->json = cJSON_CreateObject();
    cJSON_AddStringToObject(v->json, "street", a.street);
    cJSON_AddStringToObject(v->json, "city", a.city);
    cJSON_AddStringToObject(v->json, "postal_code", a.postal);
    cJSON_AddStringToObject(v->json, "country", a.country);
    corpus_put(v->bare, a.text);
}

static void g_address_text(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    struct addr a;
    draw_address(c, &a);
    corpus_val_str(v, a.text);
}

static void g_coords(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    double lat = corpus_range(&c->rng, -600000, 700000) / 10000.0;
    double lon = corpus_range(&c->rng, -1700000, 1700000) / 10000.0;
    v->json = cJSON_CreateObject();
    cJSON_AddNumberToObject(v->json, "lat", lat);
    cJSON_AddNumberToObject(v->json, "lon", lon);
    corpus_fmt(v->bare, CORPUS_SAY, "%.4f, %.4f", lat, lon);
    corpus_fmt(v->say, CORPUS_SAY, "at coordinates %.4f, %.4f", lat, lon);
}

static void g_coord_result(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    bool lon = k->arg && k->arg[0] == 'o';
    double x = lon ? corpus_range(&c->rng, -1700000, 1700000) / 10000.0
                   : corpus_range(&c->rng, -600000, 700000) / 10000.0;
    v->json = cJSON_CreateNumber(x);
    corpus_fmt(v->bare, CORPUS_SAY, "%.4f", x);
}

static void g_recipient(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    struct corpus_val n = {0}, e = {0};
    g_person(c, NULL, &n);
    g_email(c, NULL, &e);
    v->json = cJSON_CreateObject();
    cJSON_AddItemToObject(v->json, "name", n.json);
    cJSON_AddItemToObject(v->json, "email", e.json);
    corpus_fmt(v->bare, CORPUS_SAY, "%s (%s)", n.bare, e.bare);
}

static void g_time_window(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    int off = corpus_range(&c->rng, 1, 10), h = corpus_range(&c->rng, 8, 16), len = corpus_range(&c->rng, 1, 4);
    struct corpus_date d = corpus_date_add(c->today, off);
    char db[CORPUS_SAY], ds[CORPUS_SAY], s1[40], s2[40];
    say_date(c, off, db, ds);
    corpus_fmt(s1, sizeof s1, "%04d-%02d-%02dT%02d:00:00", d.y, d.m, d.d, h);
    corpus_fmt(s2, sizeof s2, "%04d-%02d-%02dT%02d:00:00", d.y, d.m, d.d, h + len);
    v->json = cJSON_CreateObject();
    cJSON_AddStringToObject(v->json, "start", s1);
    cJSON_AddStringToObject(v->json, "end", s2);
    int e = h + len;
    if (corpus_chance(&c->rng, 50))
        corpus_fmt(v->bare, CORPUS_SAY, "between %02d:00 and %02d:00 %s", h, e, db);
    else
        corpus_fmt(v->bare, CORPUS_SAY, "between %d%s and %d%s %s", h % 12 ? h % 12 : 12, h < 12 ? "am" : "pm",
                   e % 12 ? e % 12 : 12, e < 12 ? "am" : "pm", db);
    corpus_put(v->say, v->bare);
}

static void g_price_range(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    int lo = corpus_range(&c->rng, 1, 30) * 10, hi = lo + corpus_range(&c->rng, 2, 40) * 10;
    v->json = cJSON_CreateObject();
    cJSON_AddNumberToObject(v->json, "min", lo);
    cJSON_AddNumberToObject(v->json, "max", hi);
    corpus_fmt(v->bare, CORPUS_SAY, corpus_chance(&c->rng, 50) ? "between $%d and $%d" : "from %d to %d dollars", lo, hi);
    corpus_put(v->say, v->bare);
}

static void g_dimensions(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    int l = corpus_range(&c->rng, 10, 80), w = corpus_range(&c->rng, 10, 60), h = corpus_range(&c->rng, 5, 50);
    v->json = cJSON_CreateObject();
    cJSON_AddNumberToObject(v->json, "length_cm", l);
    cJSON_AddNumberToObject(v->json, "width_cm", w);
    cJSON_AddNumberToObject(v->json, "height_cm", h);
    corpus_fmt(v->bare, CORPUS_SAY, corpus_chance(&c->rng, 50) ? "%d x %d x %d cm" : "%d by %d by %d centimeters", l, w, h);
}

/* ------------------------------------------------------------------ arrays */

/* arg "item_kind[:lo:hi]": 2-3 items of another kind, said "a, b and c". */
static void g_array(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    char item[48];
    corpus_arg_field(k->arg, 0, item, sizeof item);
    int lo = corpus_arg_int(k->arg, 1, 2), hi = corpus_arg_int(k->arg, 2, 3);
    const struct corpus_kind *ik = corpus_kind_find(item);
    int n = corpus_range(&c->rng, lo, hi);
    v->json = cJSON_CreateArray();
    struct corpus_buf b = {0};
    char seen[4][CORPUS_SAY];
    int got = 0;
    for (int tries = 0; ik && got < n && tries < 20; tries++) {
        struct corpus_val e = {0};
        c->last_person[0] = '\0';
        corpus_gen(c, ik, &e);
        bool dup = false;
        for (int j = 0; j < got; j++) dup |= !strcmp(seen[j], e.bare);
        if (dup || !e.json) {
            cJSON_Delete(e.json);
            continue;
        }
        corpus_put(seen[got], e.bare);
        cJSON_AddItemToArray(v->json, e.json);
        got++;
    }
    for (int j = 0; j < got; j++)
        corpus_buf_printf(&b, "%s%s", j == 0 ? "" : j == got - 1 ? " and " : ", ", seen[j]);
    corpus_put(v->bare, b.p ? b.p : "");
    corpus_buf_free(&b);
}

/* Order lines: "two USB-C cables and a phone stand" -> [{"product": .., "quantity": 2}, ..]. */
static void g_order_items(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    int n = corpus_range(&c->rng, 1, 3);
    v->json = cJSON_CreateArray();
    struct corpus_buf b = {0};
    char used[3][96];
    int got = 0;
    for (int tries = 0; got < n && tries < 20; tries++) {
        char p[160], sing[96], plur[96], w[64];
        corpus_word(c, "product", p, sizeof p);
        char *slash = strchr(p, '/');
        if (!slash) continue;
        *slash = '\0';
        corpus_fmt(sing, sizeof sing, "%s", p);
        corpus_fmt(plur, sizeof plur, "%s", slash + 1);
        bool dup = false;
        for (int j = 0; j < got; j++) dup |= !strcmp(used[j], sing);
        if (dup) continue;
        corpus_fmt(used[got], sizeof used[got], "%s", sing);
        int q = corpus_chance(&c->rng, 50) ? 1 : corpus_range(&c->rng, 2, 6);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "product", sing);
        cJSON_AddNumberToObject(o, "quantity", q);
        cJSON_AddItemToArray(v->json, o);
        const char *sep = got == 0 ? "" : got == n - 1 ? " and " : ", ";
        if (q == 1) {
            bool vowel = strchr("aeiouAEIOU", sing[0]) != NULL;
            corpus_buf_printf(&b, "%s%s %s", sep, corpus_chance(&c->rng, 50) ? "one" : vowel ? "an" : "a", sing);
        } else {
            corpus_say_int(c, q, w);
            corpus_buf_printf(&b, "%s%s %s", sep, w, plur);
        }
        got++;
    }
    corpus_put(v->bare, b.p ? b.p : "");
    corpus_buf_free(&b);
}

/* A thermostat temperature: "21 degrees", "72°F" (sets the linked unit). */
static void g_temp(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    bool f = corpus_chance(&c->rng, 30);
    int t = f ? corpus_range(&c->rng, 62, 78) : corpus_range(&c->rng, 16, 25);
    switch (corpus_below(&c->rng, 3)) {
    case 0: corpus_fmt(v->bare, CORPUS_SAY, "%d°%s", t, f ? "F" : "C"); break;
    case 1: corpus_fmt(v->bare, CORPUS_SAY, "%d degrees %s", t, f ? "Fahrenheit" : "Celsius"); break;
    default:
        if (f) corpus_fmt(v->bare, CORPUS_SAY, "%d°F", t);
        else corpus_fmt(v->bare, CORPUS_SAY, "%d degrees", t);
        break;
    }
    corpus_fmt(v->show, CORPUS_SAY, "%d°%s", t, f ? "F" : "C");
    v->json = cJSON_CreateNumber(t);
    v->num = t;
    corpus_fmt(c->temp_unit, sizeof c->temp_unit, "%s", f ? "fahrenheit" : "celsius");
}

static void g_temp_unit_linked(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    const char *u = c->temp_unit[0] ? c->temp_unit : "celsius";
    v->json = cJSON_CreateString(u);
    corpus_put(v->bare, u);
}

/* AQI category follows the index drawn just before it. */
static void g_aqi_category(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    double x = c->last_num;
    corpus_val_str(v, x <= 50 ? "good" : x <= 100 ? "moderate" : x <= 150 ? "unhealthy for sensitive groups" : "unhealthy");
}

static void g_uv_risk(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    double x = c->last_num;
    corpus_val_str(v, x <= 2 ? "low" : x <= 5 ? "moderate" : x <= 7 ? "high" : "very high");
}


/* A month "YYYY-MM": "last month", "this month", or a month name (its latest occurrence). */
static void g_month(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    int back = corpus_range(&c->rng, 0, 5), y = c->today.y, m = c->today.m - back;
    while (m < 1) {
        m += 12;
        y--;
    }
    char iso[16];
    corpus_fmt(iso, sizeof iso, "%04d-%02d", y, m);
    v->json = cJSON_CreateString(iso);
    if (back == 0 && corpus_chance(&c->rng, 60)) corpus_put(v->bare, "this month");
    else if (back == 1 && corpus_chance(&c->rng, 60)) corpus_put(v->bare, "last month");
    else if (y != c->today.y) corpus_fmt(v->bare, CORPUS_SAY, "%s %d", corpus_month_names[m - 1], y);
    else corpus_put(v->bare, corpus_month_names[m - 1]);
    corpus_fmt(v->show, CORPUS_SAY, "%s %d", corpus_month_names[m - 1], y);
}

/* A sports season "2024-25" (seasons start in August): "this season", "last season". */
static void g_season(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    int start = c->today.m >= 8 ? c->today.y : c->today.y - 1;
    bool last = corpus_chance(&c->rng, 40);
    if (last) start--;
    char s[16];
    corpus_fmt(s, sizeof s, "%d-%02d", start, (start + 1) % 100);
    v->json = cJSON_CreateString(s);
    if (corpus_chance(&c->rng, 60)) corpus_put(v->bare, last ? "last season" : "this season");
    else corpus_fmt(v->bare, CORPUS_SAY, "the %d/%02d season", start, (start + 1) % 100);
    corpus_put(v->show, s);
}

/* A year, always in digits. arg "lo:hi". */
static void g_year(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    int y = corpus_range(&c->rng, corpus_arg_int(k->arg, 0, 1990), corpus_arg_int(k->arg, 1, 2024));
    v->json = cJSON_CreateNumber(y);
    corpus_fmt(v->bare, CORPUS_SAY, "%d", y);
    v->num = y;
}

/* A loan term in months, said in years or months ("over 30 years" -> 360). */
static void g_term(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    static const int years[] = {3, 5, 10, 15, 20, 25, 30};
    char w[64];
    int n;
    if (corpus_chance(&c->rng, 70)) {
        int y = years[corpus_below(&c->rng, 7)];
        n = 12 * y;
        corpus_say_int(c, y, w);
        corpus_fmt(v->bare, CORPUS_SAY, "%s years", w);
    } else {
        n = 6 * corpus_range(&c->rng, 2, 12);
        corpus_fmt(v->bare, CORPUS_SAY, "%d months", n);
    }
    v->json = cJSON_CreateNumber(n);
    v->num = n;
    corpus_fmt(v->show, CORPUS_SAY, "%d months", n);
}

/* The source text's language, named by the user ("from French" -> "fr"). */
static void g_lang_src(struct corpus_ctx *c, const struct corpus_kind *k, struct corpus_val *v)
{
    (void)k;
    int l = c->src_lang >= 0 ? c->src_lang : 0;
    v->json = cJSON_CreateString(langs[l].code);
    corpus_put(v->bare, langs[l].name);
    corpus_put(v->show, langs[l].name);
}

/* ------------------------------------------------------------------ the generator table */

const struct corpus_gen_entry corpus_gens[] = {
    {"word", g_word}, {"word_indexed", g_word_indexed}, {"person", g_person}, {"email", g_email},
    {"phone", g_phone}, {"id", g_id}, {"handle", g_handle}, {"url", g_url}, {"path", g_path},
    {"ticker", g_ticker}, {"version", g_version}, {"company", g_company}, {"int", g_int},
    {"measure", g_measure}, {"decimal", g_decimal}, {"pct", g_pct}, {"duration", g_duration},
    {"meters", g_meters}, {"km", g_km}, {"kg", g_kg}, {"grams", g_grams}, {"money", g_money},
    {"currency_linked", g_currency_linked}, {"currency", g_currency},
    {"money_result", g_money_result}, {"date", g_date}, {"datetime", g_datetime},
    {"time", g_time}, {"datetime_result", g_datetime_result}, {"time_result", g_time_result},
    {"date_result", g_date_result}, {"enum", g_enum}, {"bool", g_bool}, {"fixed", g_fixed},
    {"fixed_bool", g_fixed_bool}, {"phrase", g_phrase}, {"lang", g_lang},
    {"translation", g_translation}, {"detected", g_detected}, {"definition", g_definition},
    {"code", g_code}, {"expr", g_expr}, {"equation", g_equation}, {"numlist", g_numlist},
    {"computed", g_computed}, {"unit", g_unit}, {"conv_value", g_conv_value},
    {"country", g_country}, {"address", g_address}, {"address_text", g_address_text},
    {"coords", g_coords}, {"coord_result", g_coord_result}, {"recipient", g_recipient},
    {"time_window", g_time_window}, {"price_range", g_price_range},
    {"dimensions", g_dimensions}, {"array", g_array}, {"order_items", g_order_items},
    {"temp", g_temp}, {"temp_unit_linked", g_temp_unit_linked},
    {"aqi_category", g_aqi_category}, {"uv_risk", g_uv_risk}, {"summary", g_summary},
    {"month", g_month}, {"season", g_season}, {"year", g_year}, {"term", g_term},
    {"lang_src", g_lang_src},
    {NULL, NULL},
};
