/* lora.c — loading a LoRA adapter GGUF (llama.cpp's format) against a model: tern_lora_load,
 * tern_lora_free, the adapter's info. Read lora.h first.
 *
 * The checks follow llama.cpp c392e50's llama_adapter_lora_init (general.type adapter,
 * adapter.type lora, the model's architecture, lora_a / lora_b pairs whose base tensor exists
 * with matching shapes, *_norm.weight tensors ignored), with more of them named: a pair whose
 * base tern's forward pass does not multiply as one matrix (fused attn_qkv rows, DeltaNet
 * matrices) is refused instead of being silently unused, and every message names the file and
 * the tensor. A and B are converted to F32 here, once; the file is closed when loading ends. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/lora.h"
#include "quant/quant.h"
#include "util/error.h"
#include "util/huge.h"

const struct model_weight *lora_slot_weight(const struct tern_model *m, int s)
{
    const struct model_weight *w = NULL;
    if (s == lora_slot_output(m)) {
        /* tied: output is the embeddings' matrix under their name, no output.weight to adapt;
         * a pruned head (head_ids) has fewer rows than any adapter of the vocabulary */
        w = strcmp(m->output.name, "output.weight") || m->head_ids ? NULL : &m->output;
    } else if (s == lora_slot_embd(m)) {
        w = &m->tok_embd;
    } else if (s >= 0 && s < lora_slot_output(m)) {
        const int il = s / LORA_KINDS;
        const struct model_layer *L = &m->layers[il];
        /* a layer that reads another's KV (gemma4) never computes its own k and v */
        const bool own_kv = !L->recurrent && L->kv_src == il;
        switch (s % LORA_KINDS) {
        case LORA_Q: w = L->recurrent ? NULL : &L->wq; break;
        case LORA_K: w = own_kv ? &L->wk : NULL; break;
        case LORA_V: w = own_kv && !L->v_is_k ? &L->wv : NULL; break;
        case LORA_O: w = L->recurrent ? NULL : &L->wo; break;
        case LORA_GATE: w = &L->ffn_gate; break;
        case LORA_UP: w = &L->ffn_up; break;
        case LORA_DOWN: w = &L->ffn_down; break;
        }
    }
    return w && w->data ? w : NULL;
}

/* The slot whose weight is the whole tensor `name` (ne0 cols, ne1 rows), or -1. */
static int slot_of(const struct tern_model *m, const char *name, int64_t ne0, int64_t ne1)
{
    int s0 = lora_slot_output(m), s1 = lora_n_slots(m);
    int il;
    if (sscanf(name, "blk.%d.", &il) == 1) {
        if (il < 0 || il >= m->info.n_layer) return -1;
        s0 = il * LORA_KINDS;
        s1 = s0 + LORA_KINDS;
    }
    for (int s = s0; s < s1; s++) {
        const struct model_weight *w = lora_slot_weight(m, s);
        if (w && !strcmp(w->name, name) && w->cols == ne0 && w->rows == ne1) return s;
    }
    return -1;
}

static bool ends_with(const struct tern_str *s, const char *suffix)
{
    const size_t n = strlen(suffix);
    return s->len >= n && !memcmp(s->ptr + s->len - n, suffix, n);
}

static bool str_is(const struct tern_str *s, const char *v)
{
    return s->len == strlen(v) && !memcmp(s->ptr, v, s->len);
}

/* Check the metadata: general.type, adapter.type, general.architecture, the alpha. */
static tern_status check_meta(const struct tern_model *m, const struct tern_gguf *g,
                              const char *path, float *alpha)
{
    struct tern_str s = {0};
    if (tern_gguf_find_key(g, "general.type") < 0 || tern_gguf_get_str(g, "general.type", &s) ||
        !str_is(&s, "adapter"))
        return tern_fail(TERN_ERR_FORMAT, "%s: not a LoRA adapter: general.type is '%.*s', "
                         "expected 'adapter' (a model file? adapters come from llama.cpp's "
                         "convert_lora_to_gguf.py or tern_lora_write)", path,
                         (int)(s.len < 64 ? s.len : 64), s.ptr ? s.ptr : "");
    s = (struct tern_str){0};
    if (tern_gguf_find_key(g, "adapter.type") < 0 || tern_gguf_get_str(g, "adapter.type", &s) ||
        !str_is(&s, "lora"))
        return tern_fail(TERN_ERR_UNSUPPORTED, "%s: adapter.type is '%.*s', expected 'lora'", path,
                         (int)(s.len < 64 ? s.len : 64), s.ptr ? s.ptr : "");
    s = (struct tern_str){0};
    if (tern_gguf_find_key(g, "general.architecture") < 0 ||
        tern_gguf_get_str(g, "general.architecture", &s) || !str_is(&s, m->arch_name))
        return tern_fail(TERN_ERR_ARG, "%s: the adapter is for architecture '%.*s', the model "
                         "is '%s'", path, (int)(s.len < 64 ? s.len : 64), s.ptr ? s.ptr : "",
                         m->arch_name);
    *alpha = 0.0f;
    if (tern_gguf_find_key(g, "adapter.lora.alpha") >= 0) {
        tern_status st = tern_gguf_get_f32(g, "adapter.lora.alpha", alpha);
        if (st) return tern_fail(st, "%s: adapter.lora.alpha: %s", path, tern_last_error());
        if (!(*alpha == *alpha) || *alpha > 1e30f || *alpha < -1e30f)
            return tern_fail(TERN_ERR_FORMAT, "%s: adapter.lora.alpha is not a finite number", path);
    }
    return TERN_OK;
}

/* Check tensor t of the file ("X.lora_a" / "X.lora_b") is one the loader can read as F32. */
static tern_status check_tensor(const char *path, const struct tern_gguf_tensor *t)
{
    const struct quant_traits *q = quant_traits_get(t->type);
    if (t->n_dims != 2)
        return tern_fail(TERN_ERR_FORMAT, "%s: tensor '%.*s' has %d dimensions, expected 2", path,
                         (int)t->name.len, t->name.ptr, t->n_dims);
    if (!q || !q->to_float || !q->vec_dot_ref)
        return tern_fail(TERN_ERR_UNSUPPORTED, "%s: tensor '%.*s' has type %s, which tern cannot "
                         "read (adapters are F32, F16, BF16 or Q8_0)", path, (int)t->name.len,
                         t->name.ptr, tern_type_name(t->type));
    return TERN_OK;
}

/* Pair tensor i (a lora_a or lora_b) with its other half and check both against the model;
 * fills tg (name, slot, rank, sizes) and the two tensors. */
static tern_status pair_up(const struct tern_model *m, const struct tern_gguf *g, const char *path,
                           const struct tern_gguf_tensor *ta, struct lora_target *tg,
                           const struct tern_gguf_tensor **pb)
{
    tern_status st;
    const size_t base_len = ta->name.len - strlen(".lora_a");
    if (base_len >= sizeof tg->name)
        return tern_fail(TERN_ERR_UNSUPPORTED, "%s: tensor '%.*s': name too long", path,
                         (int)ta->name.len, ta->name.ptr);
    memcpy(tg->name, ta->name.ptr, base_len);
    tg->name[base_len] = '\0';
    char bname[80];
    snprintf(bname, sizeof bname, "%s.lora_b", tg->name);
    const struct tern_gguf_tensor *tb = tern_gguf_find_tensor(g, bname);
    if (!tb)
        return tern_fail(TERN_ERR_FORMAT, "%s: LoRA pair of '%s' is missing one half: '%s.lora_a' "
                         "has no '%s'", path, tg->name, tg->name, bname);
    if ((st = check_tensor(path, ta)) || (st = check_tensor(path, tb))) return st;
    const struct tern_gguf *mg = m->gguf;
    const struct tern_gguf_tensor *base = tern_gguf_find_tensor(mg, tg->name);
    if (!base)
        return tern_fail(TERN_ERR_ARG, "%s: LoRA tensor '%s' does not exist in the base model "
                         "(wrong base model?)", path, tg->name);
    if (base->n_dims != 2)
        return tern_fail(TERN_ERR_UNSUPPORTED, "%s: LoRA tensor '%s': the base tensor is not a "
                         "matrix (%d dimensions)", path, tg->name, base->n_dims);
    const bool embd = !strcmp(tg->name, "token_embd.weight");
    tg->n_in = base->ne[0];
    tg->n_out = base->ne[1];
    if (embd) {
        /* llama.cpp's flipped pair: A (r, n_vocab), B (r, n_embd) in ggml's ne */
        if (tb->ne[1] != base->ne[0] || ta->ne[1] != base->ne[1] || ta->ne[0] != tb->ne[0])
            return tern_fail(TERN_ERR_ARG, "%s: LoRA tensor '%s': lora_a [%lld, %lld] and lora_b "
                             "[%lld, %lld] do not fit the base [%lld, %lld] (expected lora_a "
                             "[r, %lld], lora_b [r, %lld]; wrong base model?)", path, tg->name,
                             (long long)ta->ne[0], (long long)ta->ne[1], (long long)tb->ne[0],
                             (long long)tb->ne[1], (long long)base->ne[0], (long long)base->ne[1],
                             (long long)base->ne[1], (long long)base->ne[0]);
        tg->rank = (int)ta->ne[0];
    } else {
        if (ta->ne[0] != base->ne[0] || tb->ne[1] != base->ne[1])
            return tern_fail(TERN_ERR_ARG, "%s: LoRA tensor '%s': lora_a [%lld, %lld] and lora_b "
                             "[%lld, %lld] do not fit the base [%lld, %lld] (expected lora_a "
                             "[%lld, r], lora_b [r, %lld]; wrong base model?)", path, tg->name,
                             (long long)ta->ne[0], (long long)ta->ne[1], (long long)tb->ne[0],
                             (long long)tb->ne[1], (long long)base->ne[0], (long long)base->ne[1],
                             (long long)base->ne[0], (long long)base->ne[1]);
        if (ta->ne[1] != tb->ne[0])
            return tern_fail(TERN_ERR_FORMAT, "%s: LoRA tensor '%s': rank of lora_a (%lld) and "
                             "lora_b (%lld) differ (lora_a not transposed?)", path, tg->name,
                             (long long)ta->ne[1], (long long)tb->ne[0]);
        tg->rank = (int)ta->ne[1];
    }
    if (tg->rank < 1 || tg->rank > 65536)
        return tern_fail(TERN_ERR_UNSUPPORTED, "%s: LoRA tensor '%s': rank %d out of range "
                         "1..65536", path, tg->name, tg->rank);
    tg->slot = slot_of(m, tg->name, base->ne[0], base->ne[1]);
    if (tg->slot < 0)
        return tern_fail(TERN_ERR_UNSUPPORTED, "%s: LoRA tensor '%s': tern applies adapters to "
                         "attn_q/k/v/output, ffn_gate/up/down, output and token_embd matrices "
                         "its forward pass multiplies whole, not to this one", path, tg->name);
    *pb = tb;
    return TERN_OK;
}

/* Where a half (0: A, 1: B^T) of target t goes in the F16 copy: in the order lora_apply.c reads
 * them, layer by layer and group by group (the slots that share an input: q, k, v; o; gate, up;
 * down), every A of a group before its B^Ts, so a group is one forward run through memory. */
static int64_t read_rank(const struct tern_model *m, const struct lora_target *t, int half)
{
    static const int group[LORA_KINDS] = {[LORA_Q] = 0, [LORA_K] = 0, [LORA_V] = 0, [LORA_O] = 1,
                                          [LORA_GATE] = 2, [LORA_UP] = 2, [LORA_DOWN] = 3};
    const int64_t layer = t->slot / LORA_KINDS, kind = t->slot % LORA_KINDS;
    const int64_t g = t->slot >= lora_slot_output(m) ? 4 * (int64_t)m->info.n_layer + t->slot : 4 * layer + group[kind];
    return (g * 2 + half) * LORA_KINDS + kind;
}

struct half_ref {
    int64_t rank;
    int target, half;
};

static int cmp_half(const void *x, const void *y)
{
    const struct half_ref *a = x, *b = y;
    return a->rank < b->rank ? -1 : a->rank > b->rank;
}

/* The F16 copy decoding reads (same values as the F32 one, half the bytes), for every target
 * whose A and B are both F16, the embeddings aside: a->mem16, on huge pages like the base's
 * repacked copy (on 4 KiB pages, the adapter's short runs between the base's matrices paid page
 * walks: a 1-thread token's adapter products 15 % longer on an AMD Zen 4); A as stored, B
 * transposed, in read_rank order. ta: the (A, B) tensors of each target. */
static tern_status copy_halves(struct tern_lora *a, const struct tern_gguf_tensor *const *ta, const char *path)
{
    const struct tern_model *m = a->model;
    struct half_ref *ord = malloc((size_t)(2 * (a->n_targets ? a->n_targets : 1)) * sizeof *ord);
    if (!ord) return tern_fail(TERN_ERR_NOMEM, "%s: out of memory (F16 copies of A and B)", path);
    int n = 0;
    uint64_t halves = 0;
    for (int i = 0; i < a->n_targets; i++) {
        if (ta[2 * i]->type != TERN_TYPE_F16 || ta[2 * i + 1]->type != TERN_TYPE_F16 || a->t[i].slot == lora_slot_embd(m))
            continue;
        for (int half = 0; half < 2; half++) {
            ord[n++] = (struct half_ref){read_rank(m, &a->t[i], half), i, half};
            halves += (uint64_t)(ta[2 * i + half]->ne[0] * ta[2 * i + half]->ne[1]);
        }
    }
    if (halves && !(a->mem16 = util_alloc_huge((size_t)halves * sizeof *a->mem16))) {
        free(ord);
        return tern_fail(TERN_ERR_NOMEM, "%s: out of memory (F16 copies of A and B)", path);
    }
    qsort(ord, (size_t)n, sizeof *ord, cmp_half);
    uint16_t *h = a->mem16;
    for (int j = 0; j < n; j++) {
        struct lora_target *tg = &a->t[ord[j].target];
        const struct tern_gguf_tensor *t = ta[2 * ord[j].target + ord[j].half];
        const int64_t r = t->ne[0], rows = t->ne[1];
        const uint16_t *src = t->data;
        if (ord[j].half == 0) {
            memcpy(h, src, (size_t)(r * rows) * sizeof *h);
            tg->a16 = h;
        } else {
            for (int64_t o = 0; o < rows; o++)
                for (int64_t k = 0; k < r; k++) h[(size_t)(k * rows + o)] = src[(size_t)(o * r + k)];
            tg->bt16 = h;
        }
        h += r * rows;
    }
    free(ord);
    a->bytes += halves * sizeof(uint16_t);
    return TERN_OK;
}

/* Rows of a 2-D tensor into F32. */
static void to_f32(const struct tern_gguf_tensor *t, float *dst)
{
    const struct quant_traits *q = quant_traits_get(t->type);
    const size_t rb = quant_row_bytes(t->type, t->ne[0]);
    for (int64_t r = 0; r < t->ne[1]; r++)
        q->to_float((const char *)t->data + (size_t)r * rb, dst + (size_t)r * t->ne[0], t->ne[0]);
}

tern_status tern_lora_load(const struct tern_model *m, const char *path, struct tern_lora **out)
{
    if (!m || !path || !out) return tern_fail(TERN_ERR_ARG, "tern_lora_load: NULL argument");
    struct tern_gguf *g;
    tern_status st = tern_gguf_open(path, &g);
    if (st) return st;
    struct tern_lora *a = calloc(1, sizeof *a);
    const int64_t nt = tern_gguf_n_tensors(g);
    if (a) a->t = calloc((size_t)(nt > 0 ? nt : 1), sizeof *a->t);
    const struct tern_gguf_tensor **ta = calloc((size_t)(nt > 0 ? nt : 1), 2 * sizeof *ta);
    if (!a || !a->t || !ta) {
        st = tern_fail(TERN_ERR_NOMEM, "%s: out of memory loading the adapter", path);
        goto done;
    }
    a->model = m;
    a->type_a = a->type_b = -1;
    if ((st = check_meta(m, g, path, &a->alpha))) goto done;
    /* the chat template the adapter was trained with (tern train writes it), if any */
    struct tern_str tmpl;
    if (tern_gguf_find_key(g, "tokenizer.chat_template") >= 0) {
        if (tern_gguf_get_str(g, "tokenizer.chat_template", &tmpl) != TERN_OK) {
            st = tern_fail(TERN_ERR_FORMAT, "%s: tokenizer.chat_template is not a string", path);
            goto done;
        }
        if (!(a->chat_template = malloc(tmpl.len + 1))) {
            st = tern_fail(TERN_ERR_NOMEM, "%s: out of memory", path);
            goto done;
        }
        memcpy(a->chat_template, tmpl.ptr, tmpl.len);
        a->chat_template[tmpl.len] = '\0';
    }
    /* every tensor is a lora_a, a lora_b (paired when its lora_a is met) or a norm */
    uint64_t floats = 0;
    for (int64_t i = 0; i < nt; i++) {
        const struct tern_gguf_tensor *t = tern_gguf_tensor(g, i);
        if (ends_with(&t->name, ".lora_a")) {
            struct lora_target *tg = &a->t[a->n_targets];
            const struct tern_gguf_tensor *tb = NULL;
            if ((st = pair_up(m, g, path, t, tg, &tb))) goto done;
            ta[2 * a->n_targets] = t;
            ta[2 * a->n_targets + 1] = tb;
            if (a->type_a < 0) a->type_a = t->type, a->type_b = tb->type;
            floats += (uint64_t)(t->ne[0] * t->ne[1] + tb->ne[0] * tb->ne[1]);
            a->n_targets++;
        } else if (ends_with(&t->name, ".lora_b")) {
            char an[80];
            snprintf(an, sizeof an, "%.*s.lora_a", (int)(t->name.len - 7 < 64 ? t->name.len - 7 : 64),
                     t->name.ptr);
            if (!tern_gguf_find_tensor(g, an)) {
                st = tern_fail(TERN_ERR_FORMAT, "%s: LoRA pair of '%.*s' is missing one half: "
                               "'%.*s' has no '%s'", path, (int)(t->name.len - 7), t->name.ptr,
                               (int)t->name.len, t->name.ptr, an);
                goto done;
            }
        } else if (ends_with(&t->name, "_norm.weight")) {
            a->n_ignored++; /* llama.cpp skips them too (mergekit-extract-lora writes them) */
        } else {
            st = tern_fail(TERN_ERR_FORMAT, "%s: tensor '%.*s' is neither a .lora_a nor a .lora_b "
                           "(nor a *_norm.weight, which are ignored)", path, (int)t->name.len,
                           t->name.ptr);
            goto done;
        }
    }
    /* decoding reads these for an adapter that is not F16 (huge pages: copy_halves says why) */
    a->mem = util_alloc_huge((size_t)(floats ? floats : 1) * sizeof(float));
    if (!a->mem) {
        st = tern_fail(TERN_ERR_NOMEM, "%s: out of memory (%llu floats of A and B)", path,
                       (unsigned long long)floats);
        goto done;
    }
    a->bytes = floats * sizeof(float);
    float *p = a->mem;
    for (int i = 0; i < a->n_targets && !st; i++) {
        struct lora_target *tg = &a->t[i];
        const struct tern_gguf_tensor *tb = ta[2 * i + 1];
        tg->a = p;
        to_f32(ta[2 * i], p);
        p += ta[2 * i]->ne[0] * ta[2 * i]->ne[1];
        /* B transposed: the forward pass adds c_k * row k of B^T over contiguous output rows */
        const int64_t r = tb->ne[0], rows = tb->ne[1];
        float *tmp = malloc((size_t)(r * rows) * sizeof *tmp);
        if (!tmp) {
            st = tern_fail(TERN_ERR_NOMEM, "%s: out of memory converting '%s.lora_b'", path, tg->name);
            break;
        }
        to_f32(tb, tmp);
        for (int64_t o = 0; o < rows; o++)
            for (int64_t k = 0; k < r; k++) p[(size_t)(k * rows + o)] = tmp[(size_t)(o * r + k)];
        free(tmp);
        tg->bt = p;
        p += r * rows;
    }
    if (!st) st = copy_halves(a, ta, path); /* F16 adapters: the F16 copy decoding reads */
done:
    free(ta);
    tern_gguf_close(g);
    if (st) {
        tern_lora_free(a);
        return st;
    }
    *out = a;
    return TERN_OK;
}

void tern_lora_free(struct tern_lora *a)
{
    if (!a) return;
    free(a->mem);
    free(a->mem16);
    free(a->t);
    free(a->chat_template);
    free(a);
}

const char *tern_lora_chat_template(const struct tern_lora *a)
{
    return a ? a->chat_template : NULL;
}

void tern_lora_get_info(const struct tern_lora *a, struct tern_lora_info *out)
{
    memset(out, 0, sizeof *out);
    out->alpha = a->alpha;
    out->n_targets = a->n_targets;
    out->n_ignored = a->n_ignored;
    out->type_a = a->type_a;
    out->type_b = a->type_b;
    out->bytes = a->bytes;
    for (int i = 0; i < a->n_targets; i++) {
        if (!out->rank_min || a->t[i].rank < out->rank_min) out->rank_min = a->t[i].rank;
        if (a->t[i].rank > out->rank_max) out->rank_max = a->t[i].rank;
    }
}

const char *tern_lora_target(const struct tern_lora *a, int i, int *rank)
{
    if (!a || i < 0 || i >= a->n_targets) return NULL;
    if (rank) *rank = a->t[i].rank;
    return a->t[i].name;
}
