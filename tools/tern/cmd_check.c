/* cmd_check.c — `tern check`: can tern run this model, and what will it cost? Architecture,
 * hyperparameters, tensor types with counts and bytes, KV cache size per context length. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_json.h"
#include "tern_gguf.h"

/* The hyperparameters an architecture adds beyond the stable core (struct tern_model_info), read
 * by name: a parameter a new architecture brings is printed once it is listed here, and nothing
 * breaks before that. HPI for counts and flags, HPF for scales and byte counts. */
static double hparam(const struct tern_model *m, const char *name)
{
    double v = 0;
    return tern_model_hparam(m, name, &v) ? v : 0;
}
#define HPI(name) ((int)hparam(m, #name))
#define HPF(name) hparam(m, #name)

struct check_opts {
    const char *model, *pos_model, *decode_tile;
    bool json, no_repack;
    struct cli_lora_opts lora;
};

#define K struct check_opts
static const struct cli_option check_table[] = {
    {"-m", "--model", CLI_PATH, "MODEL", CLI_AT(K, model), .help = "the GGUF model to check"},
    {.meta = "MODEL", .kind = CLI_PATH, CLI_AT(K, pos_model), .help = "the same, without -m"},
    {NULL, "--json", CLI_FLAG, NULL, CLI_AT(K, json), .help = "print one JSON object"},
    {NULL, "--no-repack", CLI_FLAG, NULL, CLI_AT(K, no_repack),
     .help = "keep the weights mmap-only: no bytes repacked at load"},
    {NULL, "--decode-tile", CLI_STRING, "TILE", CLI_AT(K, decode_tile), .def = "auto",
     .help = "the tile matmuls of 1-3 tokens over repacked weights use: auto (measured at load, cached "
             "per CPU), zmm, ymm-evex, ymm-vnni or ymm (env TERN_DECODE_TILE)"},
    {.kind = CLI_INCLUDE, .sub = cli_lora_table, CLI_AT(K, lora),
     .notes = (const struct cli_note[]){{"--lora", NULL, "load a LoRA adapter and check it against the "
             "model: matrices adapted, rank, alpha, types, targets"}, {NULL}}},
    {0},
};
#undef K

const struct cli_command cli_spec_check = {
    "check", "-m MODEL [--json] [--no-repack] [--lora FILE ...]",
    "Loads the model (validating every tensor's type and shape) and prints its\n"
    "architecture, hyperparameters, tensor types with counts and bytes, and the KV cache\n"
    "size at 512/1024/2048/4096 context as (layers, kv_heads, head_dim, ctx) -> bytes (and\n"
    "what stays resident when sliding-window layers keep only their window),\n"
    "and the bytes of weights repacked at load on this CPU's kernel path (none with\n"
    "--no-repack: the weights then stay mmap-only).\n",
    check_table, CLI_OPTS(struct check_opts, NULL),
    "Exits 1 with the reason if tern cannot run the model (or use an adapter).\n",
};

/* An adapter's targets by kind: "attn_q x 30, ffn_down x 30, output" ("blk.N." dropped). */
static void lora_targets(const struct tern_lora *a, char *buf, size_t cap)
{
    struct tern_lora_info in;
    tern_lora_get_info(a, &in);
    size_t len = 0;
    buf[0] = '\0';
    char seen[64][32];
    int counts[64], n_kinds = 0;
    for (int i = 0; i < in.n_targets; i++) {
        const char *name = tern_lora_target(a, i, NULL), *kind = name;
        int il;
        if (sscanf(name, "blk.%d.", &il) == 1) kind = strchr(name + 4, '.') + 1;
        char k[32];
        snprintf(k, sizeof k, "%.*s", (int)strcspn(kind, "."), kind);
        int j = 0;
        while (j < n_kinds && strcmp(seen[j], k)) j++;
        if (j == n_kinds && n_kinds < 64) {
            snprintf(seen[n_kinds], sizeof seen[0], "%s", k);
            counts[n_kinds++] = 0;
        }
        if (j < 64) counts[j]++;
    }
    for (int j = 0; j < n_kinds && len < cap; j++) {
        int w = counts[j] > 1 ? snprintf(buf + len, cap - len, "%s%s x %d", j ? ", " : "", seen[j], counts[j])
                              : snprintf(buf + len, cap - len, "%s%s", j ? ", " : "", seen[j]);
        if (w < 0) break;
        len += (size_t)w;
    }
}

int cmd_check(int argc, char **argv)
{
    struct check_opts o = {0};
    const int pr = cli_parse(&cli_spec_check, argc, argv, &o);
    if (pr != CLI_PARSED) return pr;
    if (o.model && o.pos_model) return cli_usage_error("check", "give the model once: -m MODEL or MODEL");
    const char *model = o.model ? o.model : o.pos_model;
    const bool json = o.json, no_repack = o.no_repack;
    struct cli_lora_opts lora = o.lora;
    if (!model) return cli_usage_error("check", "missing -m MODEL");
    struct tern_model *m;
    tern_status st = tern_model_load(model, &(struct tern_model_params){.no_repack = no_repack, .decode_tile = o.decode_tile}, &m);
    if (st) return cli_report("check", st);
    if (cli_lora_load("check", &lora, m, NULL)) {
        cli_lora_free(&lora);
        tern_model_free(m);
        return CLI_EXIT_FAIL;
    }
    const struct tern_model_info *in = tern_model_get_info(m);
    const struct tern_gguf *g = tern_model_gguf(m);

    /* tensor types: counts and bytes */
    int64_t count[TERN_TYPE_COUNT_];
    uint64_t bytes[TERN_TYPE_COUNT_];
    const uint64_t params = cli_gguf_tensor_stats(g, count, bytes);
    static const int ctxs[] = {512, 1024, 2048, 4096};
    int rc = CLI_EXIT_OK;
    if (json) {
        cJSON *j = cJSON_CreateObject();
        cli_json_str(j, "model", model);
        cli_json_str(j, "arch", in->arch_name);
        cli_json_int(j, "n_vocab", in->n_vocab);
        cli_json_int(j, "n_embd", in->n_embd);
        cli_json_int(j, "n_layer", in->n_layer);
        cli_json_int(j, "n_head", in->n_head);
        cli_json_int(j, "n_head_kv", in->n_head_kv);
        cli_json_int(j, "head_dim", in->head_dim);
        cli_json_int(j, "n_ff", in->n_ff);
        cli_json_int(j, "n_ctx_train", in->n_ctx_train);
        cli_json_int(j, "n_rot", HPI(n_rot));
        cli_json_f32(j, "rope_freq_base", HPF(rope_freq_base));
        cli_json_f32(j, "rope_freq_scale", HPF(rope_freq_scale));
        cli_json_bool(j, "rope_neox", HPI(rope_neox));
        cli_json_bool(j, "rope_freqs", HPI(has_rope_freqs));
        cli_json_f32(j, "rms_eps", HPF(rms_eps));
        cli_json_bool(j, "tied_output", HPI(tied_output));
        cli_json_bool(j, "qkv_bias", HPI(has_qkv_bias));
        cli_json_bool(j, "qk_norm", HPI(has_qk_norm));
        cli_json_bool(j, "post_norms", HPI(has_post_norms));
        cli_json_bool(j, "fused_qkv", HPI(fused_qkv));
        cli_json_str(j, "ffn_act", HPI(ffn_gelu) ? "gelu" : "silu");
        cli_json_f32(j, "embd_scale", HPF(embd_scale));
        cli_json_f32(j, "attn_scale", HPF(attn_scale));
        cli_json_int(j, "nope_every", HPI(nope_every));
        cli_json_int(j, "n_swa", HPI(n_swa));
        cli_json_int(j, "n_layer_swa", HPI(n_layer_swa));
        cli_json_f32(j, "rope_freq_base_swa", HPF(rope_freq_base_swa));
        cli_json_bool(j, "rope_long", HPI(has_rope_long));
        cli_json_f32(j, "rope_attn_factor", HPF(rope_attn_factor));
        cli_json_int(j, "n_ctx_orig", HPI(n_ctx_orig));
        cli_json_int(j, "n_layer_kv", in->n_layer_kv);
        cli_json_int(j, "n_layer_rec", in->n_layer_rec);
        if (in->n_layer_rec) {
            cJSON *r = cli_json_obj(j, "recurrent");
            cli_json_int(r, "full_attn_interval", HPI(full_attn_interval));
            cli_json_int(r, "conv_kernel", HPI(ssm_d_conv));
            cli_json_int(r, "k_heads", HPI(ssm_n_k_heads));
            cli_json_int(r, "v_heads", HPI(ssm_n_v_heads));
            cli_json_int(r, "head_k", HPI(ssm_head_k));
            cli_json_int(r, "head_v", HPI(ssm_head_v));
            cli_json_uint(r, "state_bytes_per_seq", in->state_bytes);
        }
        cli_json_bool(j, "attn_gate", HPI(attn_gate));
        cli_json_int(j, "n_nextn", HPI(n_nextn));
        if (HPI(n_nextn)) {
            const char *why = NULL;
            const bool mtp = tern_model_has_mtp(m, &why);
            cli_json_bool(j, "mtp", mtp);
            if (mtp) cli_json_uint(j, "mtp_bytes", HPF(mtp_bytes));
            else cli_json_str(j, "mtp_unusable", why);
        }
        cli_json_uint(j, "params", params);
        cli_json_uint(j, "weight_bytes", in->weight_bytes);
        cli_json_uint(j, "file_bytes", tern_gguf_file_size(g));
        cli_json_str(j, "kernels", tern_kernels_name());
        cli_json_uint(j, "repacked_bytes", in->repacked_bytes);
        cli_json_uint(j, "released_bytes", in->released_bytes);
        cli_json_str(j, "decode_tiles", in->decode_tiles ? in->decode_tiles : "");
        cJSON *types = cli_json_obj(j, "tensor_types");
        for (int t = 0; t < TERN_TYPE_COUNT_; t++)
            if (count[t]) {
                cJSON *e = cli_json_obj(types, tern_type_name(t));
                cli_json_int(e, "count", count[t]);
                cli_json_uint(e, "bytes", bytes[t]);
            }
        cJSON *kv = cli_json_arr(j, "kv_cache");
        for (int i = 0; i < 4; i++) {
            cJSON *e = cli_json_obj(kv, NULL);
            cli_json_int(e, "layers", in->n_layer_kv);
            cli_json_int(e, "kv_heads", in->n_head_kv);
            cli_json_int(e, "head_dim", in->head_dim);
            cli_json_int(e, "ctx", ctxs[i]);
            cli_json_uint(e, "bytes", tern_model_kv_bytes(m, ctxs[i]));
            /* resident at most, sliding-window layers keeping their window (n_batch 512) */
            cli_json_uint(e, "bytes_windowed", tern_model_kv_bytes_windowed(m, ctxs[i], 512));
        }
        if (in->arch == TERN_ARCH_GEMMA4) {
            cJSON *g4 = cli_json_obj(j, "gemma4");
            cli_json_int(g4, "kv_heads_swa", HPI(n_head_kv_swa));
            cli_json_int(g4, "head_dim_swa", HPI(head_dim_swa));
            cli_json_int(g4, "rope_dims_swa", HPI(n_rot_swa));
            cli_json_int(g4, "n_ff_max", HPI(n_ff_max));
            cli_json_int(g4, "layers_with_own_kv", in->n_layer_kv);
            cli_json_int(g4, "per_layer_embedding", HPI(n_embd_per_layer));
            cli_json_num(g4, "final_softcap", HPF(final_softcap));
        }
        if (lora.n) {
            cJSON *la = cli_json_arr(j, "lora");
            for (int k = 0; k < lora.n; k++) {
                struct tern_lora_info li;
                tern_lora_get_info(lora.ad[k], &li);
                cJSON *o = cli_json_obj(la, NULL);
                cli_json_str(o, "path", lora.path[k]);
                cli_json_num(o, "scale", lora.scale[k]);
                cli_json_f32(o, "alpha", li.alpha);
                cli_json_int(o, "rank_min", li.rank_min);
                cli_json_int(o, "rank_max", li.rank_max);
                cli_json_str(o, "type_a", li.type_a >= 0 ? tern_type_name(li.type_a) : "");
                cli_json_str(o, "type_b", li.type_b >= 0 ? tern_type_name(li.type_b) : "");
                cli_json_int(o, "n_ignored", li.n_ignored);
                cJSON *t = cli_json_arr(o, "targets");
                for (int x = 0; x < li.n_targets; x++) cli_json_str(t, NULL, tern_lora_target(lora.ad[k], x, NULL));
            }
        }
        rc = cli_json_emit("check", stdout, j, false, "", "\n");
    } else {
        printf("model:         %s (%zu bytes, GGUF v%u)\n", model, tern_gguf_file_size(g),
               tern_gguf_version(g));
        printf("architecture:  %s\n", in->arch_name);
        printf("parameters:    %llu\n", (unsigned long long)params);
        printf("vocab:         %d\n", in->n_vocab);
        printf("n_embd:        %d\n", in->n_embd);
        printf("n_layer:       %d\n", in->n_layer);
        printf("heads:         %d query, %d kv (GQA group %d), head_dim %d\n", in->n_head,
               in->n_head_kv, in->n_head / in->n_head_kv, in->head_dim);
        printf("n_ff:          %d\n", in->n_ff);
        printf("context:       %d (training)\n", in->n_ctx_train);
        printf("rope:          %s, %d dims, base %g, scale %g%s\n", HPI(rope_neox) ? "neox" : "norm",
               HPI(n_rot), (double)HPF(rope_freq_base), (double)HPF(rope_freq_scale),
               HPI(has_rope_freqs) ? ", frequency factors (rope_freqs)" : "");
        printf("rms epsilon:   %g\n", (double)HPF(rms_eps));
        if (HPI(head_rows) < HPI(n_vocab))
            printf("output:        pruned head: %d of the %d tokens (tern.output_token_ids; a drafter's)\n",
                   HPI(head_rows), HPI(n_vocab));
        else
            printf("output:        %s\n", HPI(tied_output) ? "tied to token_embd" : "separate output.weight");
        printf("q/k/v biases:  %s\n", HPI(has_qkv_bias) ? "yes" : "no");
        if (HPI(has_qk_norm)) printf("q/k norms:     per-head RMSNorm before RoPE\n");
        if (HPI(fused_qkv)) printf("fused:         attn_qkv (q|k|v), ffn_up (gate|up)\n");
        if (HPI(has_post_norms)) printf("post-norms:    attention and FFN outputs\n");
        if (HPI(ffn_gelu)) printf("ffn:           gelu(gate) * up\n");
        if (HPF(embd_scale) != 1.0f) printf("embd scale:    %g\n", (double)HPF(embd_scale));
        if (HPI(nope_every))
            printf("no RoPE:       every %d%s layer\n", HPI(nope_every), HPI(nope_every) == 4 ? "th" : "-th");
        if (HPI(n_swa))
            printf("sliding window: %d positions on %d of %d layers (rope base %g there)\n",
                   HPI(n_swa), HPI(n_layer_swa), in->n_layer, (double)HPF(rope_freq_base_swa));
        if (in->n_layer_rec)
            printf("recurrent:     %d Gated DeltaNet layers (every %d-th layer is full attention), "
                   "conv %d, %d key / %d value heads of %d / %d; state %llu bytes per sequence\n",
                   in->n_layer_rec, HPI(full_attn_interval), HPI(ssm_d_conv), HPI(ssm_n_k_heads),
                   HPI(ssm_n_v_heads), HPI(ssm_head_k), HPI(ssm_head_v),
                   (unsigned long long)in->state_bytes);
        if (HPI(attn_gate)) printf("attention:     output gated by sigmoid(gate) (gate rows in attn_q)\n");
        if (HPI(n_nextn)) {
            const char *why = NULL;
            if (tern_model_has_mtp(m, &why))
                printf("MTP layer:     yes (--draft mtp drafts with it: %.1f MiB per draft step, "
                       "%.0f%% of the model's weights)\n", (double)HPF(mtp_bytes) / 1048576.0,
                       100.0 * (double)HPF(mtp_bytes) / (double)in->weight_bytes);
            else
                printf("MTP layers:    %d, not usable: %s\n", HPI(n_nextn), why);
        }
        if (in->arch == TERN_ARCH_GEMMA4) {
            printf("sliding layers: %d kv, head_dim %d, %d rotated dims; v RMS-normalized; q.k unscaled\n",
                   HPI(n_head_kv_swa), HPI(head_dim_swa), HPI(n_rot_swa));
            if (HPI(n_ff_max) != in->n_ff) printf("n_ff (widest): %d\n", HPI(n_ff_max));
            if (in->n_layer_kv < in->n_layer)
                printf("shared KV:     the last %d layers read layer %d's (sliding) / %d's (global) KV\n",
                       in->n_layer - in->n_layer_kv, in->n_layer_kv - 2, in->n_layer_kv - 1);
            if (HPI(n_embd_per_layer)) printf("per-layer embeddings: %d per layer\n", HPI(n_embd_per_layer));
            if (HPF(final_softcap) > 0) printf("logit softcap: %g\n", (double)HPF(final_softcap));
        }
        if (HPI(has_rope_long))
            printf("long rope:     factors long/short (long above %d positions), magnitude %g\n",
                   HPI(n_ctx_orig), (double)HPF(rope_attn_factor));
        printf("tensors:       %lld (%llu bytes)\n", (long long)tern_gguf_n_tensors(g),
               (unsigned long long)in->weight_bytes);
        for (int t = 0; t < TERN_TYPE_COUNT_; t++)
            if (count[t])
                printf("  %-6s %5lld tensors %14llu bytes\n", tern_type_name(t), (long long)count[t],
                       (unsigned long long)bytes[t]);
        printf("repacked:      %llu bytes at load for the %s kernels", (unsigned long long)in->repacked_bytes,
               tern_kernels_name());
        if (in->released_bytes)
            printf("; the %llu bytes of file rows they replace are released",
                   (unsigned long long)in->released_bytes);
        printf("\n");
        if (in->decode_tiles && *in->decode_tiles) printf("tiles of 1 / 2-3 tokens: %s\n", in->decode_tiles);
        printf("KV cache (F16 K+V):\n");
        for (int i = 0; i < 4; i++) {
            if (in->arch == TERN_ARCH_GEMMA4) /* layers differ: the sum of the layers that store KV */
                printf("  (%d of %d layers: %d x %d sliding, %d x %d global, %d) -> %llu bytes\n",
                       in->n_layer_kv, in->n_layer, HPI(n_head_kv_swa), HPI(head_dim_swa),
                       in->n_head_kv, in->head_dim, ctxs[i],
                       (unsigned long long)tern_model_kv_bytes(m, ctxs[i]));
            else /* n_layer_kv: n_layer, or qwen35's attention layers */
                printf("  (%d, %d, %d, %d) -> %llu bytes\n", in->n_layer_kv, in->n_head_kv, in->head_dim,
                       ctxs[i], (unsigned long long)tern_model_kv_bytes(m, ctxs[i]));
            const uint64_t w = tern_model_kv_bytes_windowed(m, ctxs[i], 512);
            if (w < tern_model_kv_bytes(m, ctxs[i]))
                printf("    resident at most %llu bytes: the sliding-window layers (window %d) keep only "
                       "their window (--swa-full: all)\n", (unsigned long long)w, HPI(n_swa));
        }
        for (int k = 0; k < lora.n; k++) {
            struct tern_lora_info li;
            tern_lora_get_info(lora.ad[k], &li);
            char targets[1024];
            lora_targets(lora.ad[k], targets, sizeof targets);
            printf("LoRA:          %s: %d matrices, rank %d", lora.path[k], li.n_targets, li.rank_min);
            if (li.rank_max != li.rank_min) printf("..%d", li.rank_max);
            printf(", alpha %g (scale %g x alpha / rank), %s/%s, %.1f MiB as F32\n", li.alpha,
                   lora.scale[k], li.type_a >= 0 ? tern_type_name(li.type_a) : "-",
                   li.type_b >= 0 ? tern_type_name(li.type_b) : "-", li.bytes / 1048576.0);
            printf("  targets:     %s\n", targets);
            if (li.n_ignored) printf("  ignored:     %d *_norm.weight tensors (as llama.cpp)\n", li.n_ignored);
        }
        printf("status:        ok (every tensor has a supported type and the expected shape%s)\n",
               lora.n ? "; the adapters fit the model" : "");
    }
    cli_lora_free(&lora);
    tern_model_free(m);
    return rc;
}
