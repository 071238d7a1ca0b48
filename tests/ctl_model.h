/* ctl_model.h — a tiny model whose vocabulary makes tool-call markup control tokens, for the
 * tests of preserved tokens (test_toolcall_control.c, test_server.c).
 *
 * The vocabulary is written here, independently of tern's tokenizer: the byte-level layout of
 * `tern synth` (256 GPT-2 byte tokens, no merges) with these control tokens (GGUF token_type 3,
 * as llama.cpp's converters write Mistral's tekken specials) and the rest unused padding up to
 * the "tiny" shape's 512 tokens. Its texts are the reference the tests compare against. The
 * model has random weights (tern_synth_model_write_vocab, Q4_0: the batcher's rows are
 * bit-identical to tern_generate's there). */
#ifndef TERN_TEST_CTL_MODEL_H
#define TERN_TEST_CTL_MODEL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

enum {
    CTL_ENDOFTEXT = 256, CTL_IM_START = 257, CTL_IM_END = 258, /* eos */
    CTL_TOOL_CALLS = 259,    /* [TOOL_CALLS] (Mistral) */
    CTL_PYTHON_TAG = 260,    /* <|python_tag|> (Llama 3.1) */
    CTL_GRANITE = 261,       /* <|tool_call|> (Granite) */
    CTL_HERMES_OPEN = 262,   /* <tool_call> (a Hermes model whose tags are control tokens) */
    CTL_HERMES_CLOSE = 263,  /* </tool_call> */
    CTL_N_VOCAB = 512,
};
static const char *const ctl_texts[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "[TOOL_CALLS]",
                                        "<|python_tag|>", "<|tool_call|>", "<tool_call>", "</tool_call>"};

/* GPT-2's byte -> printable code point map (what its vocabularies store for each byte). */
static inline void ctl_byte_token(int b, char out[4])
{
    int cp;
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) {
        cp = b;
    } else {
        int n = 0;
        for (int x = 0; x < b; x++)
            if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255))) n++;
        cp = 256 + n;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        out[2] = 0;
    }
}

/* Write the vocabulary (and template, may be NULL) to vocab_path and a Q4_0 tiny model with it
 * to model_path. */
static inline void ctl_model_write(const char *vocab_path, const char *model_path, const char *tmpl)
{
    char *toks[CTL_N_VOCAB];
    int32_t types[CTL_N_VOCAB];
    for (int i = 0; i < CTL_N_VOCAB; i++) {
        char buf[32];
        if (i < 256) {
            ctl_byte_token(i, buf);
            types[i] = 1;
        } else if (i < 256 + (int)(sizeof ctl_texts / sizeof ctl_texts[0])) {
            snprintf(buf, sizeof buf, "%s", ctl_texts[i - 256]);
            types[i] = 3;
        } else {
            snprintf(buf, sizeof buf, "[PAD%d]", i);
            types[i] = 5;
        }
        toks[i] = strdup(buf);
    }
    struct tern_gguf_writer *w;
    assert_tern_ok(tern_gguf_writer_create(0, &w));
    assert_tern_ok(tern_gguf_writer_set_str(w, "general.architecture", "llama"));
    assert_tern_ok(tern_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2"));
    assert_tern_ok(tern_gguf_writer_set_str(w, "tokenizer.ggml.pre", "gpt-2"));
    assert_tern_ok(tern_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)toks, CTL_N_VOCAB));
    assert_tern_ok(tern_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", TERN_GGUF_INT32, types, CTL_N_VOCAB));
    assert_tern_ok(tern_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", NULL, 0));
    assert_tern_ok(tern_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", CTL_ENDOFTEXT));
    assert_tern_ok(tern_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", CTL_IM_END));
    assert_tern_ok(tern_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", false));
    if (tmpl) assert_tern_ok(tern_gguf_writer_set_str(w, "tokenizer.chat_template", tmpl));
    assert_tern_ok(tern_gguf_writer_write(w, vocab_path));
    tern_gguf_writer_free(w);
    for (int i = 0; i < CTL_N_VOCAB; i++) free(toks[i]);
    assert_tern_ok(tern_synth_model_write_vocab("tiny", "q4_0", 7, vocab_path, model_path, NULL));
}

#endif
