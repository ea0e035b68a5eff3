#!/usr/bin/env python3
"""The reference side of tests/datasets/bpe_test.cpp: trains a byte-level BPE vocabulary with
Hugging Face's `tokenizers` on the texts (GLUE RTE's training sentences when RTE_TRAIN names
that file (plain or .gz), plus fixed texts with every kind of whitespace, digits, contractions and non-ASCII
letters), and writes what that tokenizer, and `transformers`' RoBERTa tokenizer where it is
installed, make of them:

  python3 tests/datasets/bpe_reference.py OUT_DIR [RTE_TRAIN]

OUT_DIR/vocab.json, OUT_DIR/merges.txt: the vocabulary;
OUT_DIR/cases.json: {"texts": [...], "ids": [...],
                     "pairs": [[a, b, maxlen, ids], ...] (RobertaTokenizer's, if installed)}
"""
import gzip
import json
import os
import sys

from tokenizers import ByteLevelBPETokenizer

FIXED = [
    "Hello world", "Hello  world", "  leading and trailing   ", "tabs\tand\nnew\n\nlines\n x",
    "numbers 12345 and 3.14, 1st 2nd", "don't I'll we've she's they're I'm he'd", "DON'T SHOUT'S",
    "unicode: café naïve Zürich 東京 Ελλάδα 😀 emoji", "non\u00a0breaking and em\u2003space",
    "punctuation!!! ...and (brackets) [x] {y} @#$%^&*", "end with space ", "\n", "a",
]


def main(out, rte=None):
    texts = list(FIXED)
    if rte and os.path.exists(rte):
        with (gzip.open if rte.endswith(".gz") else open)(rte, "rt", encoding="utf-8") as f:
            header = f.readline().rstrip("\n").split("\t")
            a, b = header.index("sentence1"), header.index("sentence2")
            for line in f:
                cells = line.rstrip("\n").split("\t")
                if len(cells) == len(header):
                    texts += [cells[a], cells[b]]
    os.makedirs(out, exist_ok=True)
    tokenizer = ByteLevelBPETokenizer()
    tokenizer.train_from_iterator(texts, vocab_size=3000, min_frequency=2,
                                  special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"], show_progress=False)
    tokenizer.save_model(out)
    cases = {"texts": texts, "ids": [tokenizer.encode(t).ids for t in texts], "pairs": []}
    try:
        from transformers import RobertaTokenizer
        roberta = RobertaTokenizer(os.path.join(out, "vocab.json"), os.path.join(out, "merges.txt"))
        for a, b, maxlen in [(texts[-2], texts[-1], 64), (FIXED[7], FIXED[3], 12), (FIXED[5], "a", 9),
                             (texts[-4] * 3, texts[-3], 40)]:
            ids = roberta(a, b, truncation=True, padding="max_length", max_length=maxlen)["input_ids"]
            cases["pairs"].append([a, b, maxlen, ids])
        single = roberta(FIXED[0], truncation=True, padding="max_length", max_length=8)["input_ids"]
        cases["single"] = [FIXED[0], 8, single]
    except ImportError:
        pass
    with open(os.path.join(out, "cases.json"), "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False)


if __name__ == "__main__":
    main(*sys.argv[1:])
