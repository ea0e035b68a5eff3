#pragma once
// Precompiled header shared by every pipelab target (LibTorch headers are heavy; on two
// cores this is the difference between a one- and a ten-minute build). Sources still
// include what they use, with narrow headers.
#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/conv.h>
#include <torch/csrc/autograd/autograd.h>
#include <yaml-cpp/yaml.h>
#include <fmt/format.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>
