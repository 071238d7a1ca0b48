"""gguf_hf.py — a Hugging Face tokenizer built from a GGUF file, for the peer comparisons in
bench/peers (tokenizers_compare.py, grammar_compare.py).

transformers' GGUF reader (AutoTokenizer.from_pretrained(dir, gguf_file=name)) builds the
tokenizer from the same vocabulary and merges tern reads, so tern and the peer see one vocabulary.
One gap is filled here: for SmolLM2 (tokenizer.ggml.pre == "smollm") the reader builds ByteLevel
alone, while SmolLM2's own tokenizer.json splits digits one by one first (llama.cpp's "smollm"
pre-type: \\p{N} then the GPT-2 expression); without the fix the peer would not be SmolLM2's
tokenizer.
"""
import os


def gguf_pre_type(model):
    """The GGUF's tokenizer.ggml.pre ("default" when absent)."""
    from gguf import GGUFReader
    field = GGUFReader(model).fields.get("tokenizer.ggml.pre")
    return bytes(field.parts[field.data[0]]).decode() if field else "default"


def load_tokenizer(model):
    """(transformers tokenizer, pre-type) for a GGUF path; the backend's pre-tokenizer is fixed
    for "smollm" (above)."""
    from transformers import AutoTokenizer
    hf = AutoTokenizer.from_pretrained(os.path.dirname(os.path.abspath(model)), gguf_file=os.path.basename(model))
    pre = gguf_pre_type(model)
    if pre == "smollm":
        from tokenizers import pre_tokenizers
        hf.backend_tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    return hf, pre
