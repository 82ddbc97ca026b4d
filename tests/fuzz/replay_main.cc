// Replays the committed corpus through the fuzz target without libFuzzer: Bazel builds this with g++,
// so that CI's plain, ASan + UBSan and TSan runs (and the GPU bundle, on the sim) replay every input.
// The target aborts, naming the call, on any input that breaks an invariant.
#include <cstdint>
#include <cstdio>
#include <span>
#include <vector>

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv);
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace ferry::fuzz {
std::vector<std::span<const unsigned char>> corpus();  // embed_corpus.sh
}

int main() {
  LLVMFuzzerInitialize(nullptr, nullptr);
  const auto inputs = ferry::fuzz::corpus();
  for (std::span<const unsigned char> input : inputs) LLVMFuzzerTestOneInput(input.data(), input.size());
  std::printf("corpus_replay_test: %zu inputs replayed, every call judged by the model\n", inputs.size());
  return inputs.empty() ? 1 : 0;
}
