#pragma once
/// A language model's examples from documents of word ids, as GPT-2's and Megatron-LM's
/// GPT datasets make them: the documents, each opened by its start id (the document
/// separator), are concatenated into one stream, which is cut into consecutive windows of
/// `length` + 1 ids. Example i reads the first `length` ids of window i and has as targets
/// its last `length` (the next word at every position); neighbouring windows share one id.
/// The stream's tail that fills no window is dropped, so nothing is padded.
#include <ATen/Tensor.h>

#include <cstdint>
#include <vector>

namespace pipelab {

struct LanguageModelWindows {
  at::Tensor x, y;  ///< int64 [windows, length] each
};

/// The windows of `documents` (in order); none when the stream is shorter than length + 1.
LanguageModelWindows language_model_windows(const std::vector<std::vector<int64_t>>& documents, int64_t length);

}  // namespace pipelab
