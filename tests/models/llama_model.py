#!/usr/bin/env python3
"""The reference side of tests/models/llama_model_test.cpp: a small random LlamaForCausalLM
from `transformers` (float64, eager attention, grouped-query: 4 query heads over 2 key/value
heads), its weights as safetensors, its logits on token ids, and its weights after 3 AdamW
steps on one batch of 8 sequences (mean cross-entropy of the next token):

  python3 tests/models/llama_model.py OUT_DIR

OUT_DIR/llama.safetensors (the initial weights, Hugging Face's names), tokens.pt {"x": [8, 12],
"y": [8, 12]} (y is x shifted by one token), io.pt {"logits": [8, 12, 64]}, trained.safetensors.

transformers computes RMSNorm and the attention softmax in float32 whatever the model's dtype
(a cast meant for half precision); here both keep float64 for float64 tensors, so that the
comparison measures the model and not that cast. Nothing changes for other dtypes.
"""
import os
import sys
import warnings

import torch


def keep_float64():
    from transformers.models.llama import modeling_llama

    softmax = torch.nn.functional.softmax

    def softmax_keeping_float64(x, dim=None, _stacklevel=3, dtype=None):
        return softmax(x, dim=dim, dtype=None if x.dtype == torch.float64 else dtype)

    modeling_llama.nn.functional.softmax = softmax_keeping_float64
    norm = modeling_llama.LlamaRMSNorm.forward

    def norm_keeping_float64(self, h):
        if h.dtype != torch.float64:
            return norm(self, h)
        return self.weight * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))

    modeling_llama.LlamaRMSNorm.forward = norm_keeping_float64


def main(out):
    warnings.filterwarnings("ignore")
    from safetensors.torch import save_file
    from transformers import LlamaConfig, LlamaForCausalLM

    keep_float64()
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
                         attn_implementation="eager")
    model = LlamaForCausalLM(config).double()
    with torch.no_grad():  # norms away from one
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.1)
    state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    save_file(state, os.path.join(out, "llama.safetensors"))
    seq = torch.randint(0, 64, (8, 13))
    x, y = seq[:, :12].contiguous(), seq[:, 1:].contiguous()
    torch.save({"x": x, "y": y}, os.path.join(out, "tokens.pt"))
    model.eval()
    with torch.no_grad():
        torch.save({"logits": model(input_ids=x).logits}, os.path.join(out, "io.pt"))
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    for _ in range(3):
        opt.zero_grad()
        logits = model(input_ids=x).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 64), y.reshape(-1))
        loss.backward()
        opt.step()
    trained = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    save_file(trained, os.path.join(out, "trained.safetensors"))


if __name__ == "__main__":
    main(sys.argv[1])
