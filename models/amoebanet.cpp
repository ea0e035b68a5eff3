/// `amoebanet_d`: AmoebaNet-D (Real et al. 2019) as torchgpipe's benchmarks build it for the
/// GPipe memory and speed tables (docs/schemes.md, "torchgpipe benchmarks"; `benchmarks/models/amoebanet`),
/// with `layers` L (a multiple of 3) and `filters` F. One block per layer of torchgpipe's
/// Sequential, named as there, so its balances are block counts: "stem1" (ReLU -> 3x3/2 conv
/// to F/4 -> bn), "stem2" and "stem3" (reduction cells), "cell1_normal1" ... (L/3 normal
/// cells), "cell2_reduction", "cell3_normal*", "cell4_reduction", "cell5_normal*",
/// "classify" (global average pool -> fc): L + 6 blocks. Cells are in models/amoebanet_cell.h;
/// each reads and writes the live pair (x, prev) (core/model/block_io.h), the first reading
/// the stem's x alone, so a stage boundary after the stem carries one tensor and after a cell
/// two, as torchgpipe's. "classify" reads x; prev ends with the model.
///
/// Named splits, torchgpipe's memory-benchmark balances where L matches: `torchgpipe_2` =
/// [16, 8] (L = 18), `torchgpipe_4` = [16, 12, 7, 7] (L = 36), `torchgpipe_8` = [23, 16,
/// 11, 6, 6, 5, 5, 6] (L = 72).
///
/// Deviations, none of which changes a parameter count: the classifier pools globally where
/// torchgpipe uses AvgPool2d(7) (the same on the 7x7 maps of 224x224 inputs); and the
/// genotype's max_pool_3x3 is a max-pool, where torchgpipe's code builds an average pool
/// (`avg_pool_quirk: true` restores that). Initialisation is LibTorch's default, as
/// torchgpipe leaves PyTorch's.
#include "core/config/bounds.h"
#include "models/amoebanet_cell.h"

#include "models/blocks/conv_bn.h"
#include "models/blocks/vision.h"

namespace pipelab::models {
namespace {

struct AmoebanetOptions {
  int layers = 18;
  int64_t filters = 256;
  bool avg_pool_quirk = false;
  template <class V>
  void fields(V& v) {
    v("layers", layers, "normal cells L (a multiple of 3: L/3 between each pair of reductions)", repeats_bound());
    v("filters", filters, "filters F (a multiple of 8); the first cells have F/4 channels per state", width_bound());
    v("avg_pool_quirk", avg_pool_quirk, "average-pool where the genotype says max_pool_3x3, as torchgpipe's code does");
  }
  void check(const ConfigNode& node) const {
    if (layers % 3 != 0) {
      node.child("layers").fail(fmt::format("{} is not a multiple of 3", layers), "use e.g. 18, 36 or 72");
    }
    // F/4 channels are split in halves by factorized reductions.
    if (filters % 8 != 0) {
      node.child("filters").fail(fmt::format("{} is not a multiple of 8", filters), "use e.g. 208, 256 or 512");
    }
  }
};

class Amoebanet : public Configured<ModelFactory, AmoebanetOptions> {
 public:
  using Configured::Configured;
  Miniature miniature() const override {
    Miniature m;
    if (options_.filters > 16) m.widths["filters"] = 16;  // a multiple of 8, as the cells need
    return m;
  }
  ModelDef define(const DataSpec& data) const override {
    const ImageShape image = image_input(*this, data);
    // Each of the four reduction cells halves sides that must be even (its 2x2 max-pool
    // floors where its padded 3x3 ops round up), so the stem's output sides must be
    // multiples of 16.
    const int64_t h = window_out(image.height, 3, 2, 1), w = window_out(image.width, 3, 2, 1);
    if (h % 16 != 0 || w % 16 != 0) {
      fail("",
           fmt::format("needs image sides whose halves (rounded up) are multiples of 16, got {}x{}", image.height,
                       image.width),
           "use e.g. 32x32 or 224x224 images");
    }
    ModelDef def;
    int64_t channels = options_.filters / 4;
    const int64_t in_channels = image.channels;
    def.blocks.push_back({"stem1", [=] {
                            return torch::nn::AnyModule(conv_bn(
                                ConvBnOptions(in_channels, channels, 3).stride(2).padding(1).order(Order::ActConvBn)));
                          }});
    // The states a cell reads: s1 the previous output, s2 the one before (torchgpipe's
    // channels_prev / channels_prev_prev); the stem's single output serves as both.
    CellState s1{channels, h, w}, s2 = s1;
    bool paired = false, reduction_prev = false;
    const bool quirk = options_.avg_pool_quirk;
    auto add_cell = [&](const std::string& name, bool reduction) {
      if (reduction) channels *= 2;
      CellSpec spec{s1, s2, channels, reduction, reduction_prev, quirk};
      PIPELAB_ASSERT(!reduction || (s1.height % 2 == 0 && s1.width % 2 == 0), "odd sides {}x{} reach reduction cell {}",
                     s1.height, s1.width, name);
      if (paired) {
        def.blocks.push_back({name, [spec] { return torch::nn::AnyModule(Cell(spec)); }, reads({"x", "prev"}, {"x", "prev"})});
      } else {
        def.blocks.push_back({name, [spec] { return torch::nn::AnyModule(FirstCell(spec)); }, reads({"x"}, {"x", "prev"})});
      }
      s2 = s1;
      s1 = spec.output();
      paired = true;
      reduction_prev = reduction;
    };
    const int repeat = options_.layers / 3;
    add_cell("stem2", true);
    add_cell("stem3", true);
    for (int group = 0; group < 3; ++group) {
      if (group > 0) add_cell(fmt::format("cell{}_reduction", 2 * group), true);
      for (int i = 0; i < repeat; ++i) add_cell(fmt::format("cell{}_normal{}", 2 * group + 1, i + 1), false);
    }
    const int64_t classes = data.classes, features = s1.channels;
    def.blocks.push_back({"classify", [=] { return torch::nn::AnyModule(classifier(features, classes)); }});
    def.loss = std::make_shared<CrossEntropyLoss>();
    const std::map<int, std::pair<std::string, std::vector<int>>> balances{
        {18, {"torchgpipe_2", {16, 8}}},
        {36, {"torchgpipe_4", {16, 12, 7, 7}}},
        {72, {"torchgpipe_8", {23, 16, 11, 6, 6, 5, 5, 6}}}};
    if (auto it = balances.find(options_.layers); it != balances.end()) def.named_balances.insert(it->second);
    return def;
  }
};

}  // namespace
}  // namespace pipelab::models

namespace pipelab {
PIPELAB_REGISTER(ModelFactory, models::Amoebanet, "amoebanet_d",
                 "AmoebaNet-D (L layers, F filters) as torchgpipe's benchmarks, one block per cell");
}
