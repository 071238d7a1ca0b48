/* rec_state.h — the recurrent state of qwen35's Gated DeltaNet layers in one context, beside the
 * KV cache: per sequence and recurrent layer the causal-conv window ((d_conv - 1) raw inputs of
 * each of conv_dim channels) and one head_k x head_v matrix per value head, all F32.
 *
 * A KV cache keeps every position, so rolling back is moving a counter. A recurrent state is one
 * value per sequence; what tern keeps to go back (read rec_state.c for the how):
 *  - two buffers per sequence: a decode call reads the state from one and leaves the new one in
 *    the other, so the state where the call started (`base`) stays as it was at no cost;
 *  - the inputs the recurrence consumed for each token since `base` (conv inputs, decay, beta),
 *    at most rec_cap tokens (a longer call moves `base` to rec_cap tokens before its end, a copy);
 * so a sequence can be truncated to 0, to `base`, or to anything in between (the recurrence is
 * replayed from `base` with the recorded inputs: the same code on the same numbers, so the same
 * bits as never having gone further). The forward pass (forward_delta.c) does the reading,
 * writing, recording and the captures the prefix cache asks for (the state at a chosen
 * position, kept aside during the call). */
#ifndef TERN_MODEL_REC_STATE_H
#define TERN_MODEL_REC_STATE_H

#include <stdbool.h>
#include <stddef.h>

#include "kernels/delta.h"
#include "kernels/vexp.h"
#include "tern.h"

struct model_hparams; /* model/model.h */

struct rec_state {
    int n_layer, n_seq;          /* recurrent layers, sequences */
    int d_conv, conv_dim, n_k, n_v, hk, hv;
    size_t conv_floats;          /* (conv_dim, d_conv - 1) per layer */
    size_t ssm_floats;           /* (n_v, hk, hv) per layer */
    size_t layer_floats;         /* conv_floats + ssm_floats */
    size_t seq_floats;           /* n_layer * layer_floats: one state of one sequence */
    float *buf;                  /* (n_seq, 2, n_layer, layer_floats) */
    int *cur;                    /* (n_seq) buffer (0/1) holding the state at the sequence's end */
    int *base;                   /* (n_seq) position of the state in the other buffer; -1: none */
    int rec_cap;                 /* tokens recorded per sequence */
    size_t rec_floats;           /* per (token, layer): conv_dim conv inputs, n_v beta, n_v decay g */
    float *rec;                  /* (n_seq, rec_cap, n_layer, rec_floats) */
    int *cap_pos;                /* (n_seq) keep the state at this many positions; -1: none */
    bool *cap_done;              /* (n_seq) cap holds it */
    float *cap;                  /* (n_seq, seq_floats), allocated at the first capture request */
    struct delta_kernels dk;     /* the DeltaNet head's inner loops for this CPU (kernels/delta.h):
                                    one path for every pass and every replay */
    struct vexp_kernels vk;      /* the conv's SiLU (the same bits on every path) */
};

TERN_NODISCARD tern_status rec_init(struct rec_state *r, const struct model_hparams *in, int n_seq, int rec_cap);
void rec_free(struct rec_state *r);

/* The state of layer l (recurrent index) of sequence s in buffer b: conv window, then matrices. */
static inline float *rec_layer(const struct rec_state *r, int s, int b, int l)
{
    return r->buf + (((size_t)s * 2 + b) * r->n_layer + l) * r->layer_floats;
}
static inline float *rec_record(const struct rec_state *r, int s, int i, int l)
{
    return r->rec + (((size_t)s * r->rec_cap + i) * r->n_layer + l) * r->rec_floats;
}

/* A run of m consecutive tokens of one sequence through one DeltaNet layer: the forward pass
 * makes one per sequence of its batch, replay one over the recorded tokens. Rows index the
 * (row, ...) buffers, which are the context's dn_* scratch. */
struct rec_run {
    const int *rows;             /* m rows, the sequence's tokens in position order */
    int m;
    const float *src;            /* the layer's state before the first token (NULL: zeros) */
    float *dst;                  /* the layer's state after the last one (not src) */
    float *const *keep;          /* NULL, or 2 per token: layer states that also get the state
                                    after it (entries NULL: none) */
    const float *in;             /* (row, conv_dim) conv inputs */
    const float *bg;             /* (row, 2 n_v) beta before its sigmoid, then g */
    float *qkv;                  /* (row, conv_dim) q, k, v after conv, SiLU and l2 norm */
    float *par;                  /* (row, n_v, DELTA_PAR) the heads' parameters (kernels/delta.h) */
    float *out;                  /* (row, n_v * hv) the DeltaNet output (before its gated norm) */
};

/* A layer's conv weights (conv_dim rows of d_conv taps) tap-major, as rec_conv_run reads them:
 * taps[j * conv_dim + c]. */
void rec_conv_taps(const struct rec_state *r, const float *conv_w, float *taps);

/* The steps of a run, in this order, each over all its tokens (the forward pass splits each over
 * threads; replay does all):
 *   rec_conv_run     channels [c0, c1): conv and SiLU into qkv, the window into dst (and keep);
 *                    pre: (d_conv - 1, conv_dim) scratch
 *   rec_token_params one row: l2-normalizes its q and k heads, computes its heads' parameters
 *   rec_delta_run    value head h, components [j0, j1): the DeltaNet into out, the matrix into
 *                    dst (and keep); j0 and j1 multiples of DELTA_BLOCK, or j1 = hv; work:
 *                    hk * DELTA_BLOCK floats of the calling thread's own (kernels/delta.h) */
void rec_conv_run(const struct rec_state *r, const struct rec_run *run, const float *taps, float *pre,
                  int c0, int c1);
void rec_token_params(const struct rec_state *r, float *qkv, const float *bg, float *par, float eps);
void rec_delta_run(const struct rec_state *r, const struct rec_run *run, int h, int j0, int j1, float *work);

#endif
