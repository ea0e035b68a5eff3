#!/usr/bin/env python3
"""Writes, for each zoo model that has torchvision's names, a torchvision model's state dict
(random weights, random batch-norm statistics, float64) and its eval-mode logits on a random
input, for tests/models/torchvision_names_test.cpp:

  python3 tests/models/torchvision_names.py OUT_DIR

OUT_DIR/<case>.pt holds the state dict, OUT_DIR/<case>_io.pt {"x": input, "logits": output}.
"""
import os
import sys

import torch
import torchvision

CASES = {
    "resnet18": (lambda: torchvision.models.resnet18(num_classes=10), 64),
    "resnet50": (lambda: torchvision.models.resnet50(num_classes=10), 64),
    "vgg16": (lambda: torchvision.models.vgg16(num_classes=10), 32),
    "mobilenet_v2": (lambda: torchvision.models.mobilenet_v2(num_classes=10), 32),
    "densenet121": (lambda: torchvision.models.densenet121(num_classes=10), 32),
    "googlenet": (lambda: torchvision.models.googlenet(num_classes=10, aux_logits=True, init_weights=False,
                                                        transform_input=False), 64),
    # With its auxiliary classifier, as published checkpoints have it (pipelab drops it).
    "inception_v3": (lambda: torchvision.models.inception_v3(num_classes=10, aux_logits=True, init_weights=False,
                                                              transform_input=False), 75),
}


def main(out):
    os.makedirs(out, exist_ok=True)
    for name, (make, size) in CASES.items():
        torch.manual_seed(0)
        model = make().double().eval()
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                # Statistics away from (0, 1), so that a batch norm loaded into the wrong place shows.
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.data.uniform_(0.5, 1.5)
                m.bias.data.uniform_(-0.2, 0.2)
        x = torch.randn(2, 3, size, size, dtype=torch.float64)
        with torch.no_grad():
            logits = model(x)
        torch.save(model.state_dict(), os.path.join(out, name + ".pt"))
        torch.save({"x": x, "logits": logits}, os.path.join(out, name + "_io.pt"))


if __name__ == "__main__":
    main(sys.argv[1])
