#!/usr/bin/env python3
"""The reference side of tests/models/roberta_model_test.cpp: a small random
RobertaForSequenceClassification from `transformers` (float64, eager attention), its state dict
as torch.save and as safetensors, and its eval-mode logits on token ids with padding:

  python3 tests/models/roberta_model.py OUT_DIR

OUT_DIR/roberta.pt, OUT_DIR/roberta.safetensors: the state dict (Hugging Face's names);
OUT_DIR/roberta_io.pt {"x": ids [3, 10], "logits": [3, 3]}.
"""
import os
import sys
import warnings

import torch


def main(out):
    warnings.filterwarnings("ignore")
    from safetensors.torch import save_file
    from transformers import RobertaConfig, RobertaForSequenceClassification

    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    config = RobertaConfig(vocab_size=60, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=32, max_position_embeddings=40, type_vocab_size=1, pad_token_id=1,
                           num_labels=3, layer_norm_eps=1e-5,  # roberta-base's
                           attn_implementation="eager")
    model = RobertaForSequenceClassification(config).double().eval()
    with torch.no_grad():  # away from the init's zero biases and unit norms
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    x = torch.randint(3, 60, (3, 10))
    x[0, 0] = x[1, 0] = x[2, 0] = 0  # <s>
    x[1, 7:] = 1                     # padding
    x[2, 4:] = 1
    with torch.no_grad():
        logits = model(input_ids=x, attention_mask=(x != 1).long()).logits
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    torch.save(state, os.path.join(out, "roberta.pt"))
    save_file(state, os.path.join(out, "roberta.safetensors"))
    torch.save({"x": x, "logits": logits}, os.path.join(out, "roberta_io.pt"))


if __name__ == "__main__":
    main(sys.argv[1])
