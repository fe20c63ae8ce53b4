// What a KV block on disk is checked against (kv/disk_block_store.h): a checksum of bytes, and the
// identity of what computed the block. KV rows depend on the tokens (named by the prefix chain hash) and on
// everything else that went into the forward: the weights, how they were loaded (quantised at load or not),
// the activation mode, the KV dtype and geometry. The caller folds those into one IdentityHasher.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string_view>

namespace aerie {

// A 64-bit checksum of n bytes (not cryptographic: it detects damaged and truncated files, not forgeries).
// About 8 bytes a cycle: four independent lanes, each word multiplied in and rotated.
uint64_t checksum64(const void* data, size_t n, uint64_t seed = 0);

// Fields folded, in order, into one 64-bit identity. Each field is length- or type-tagged, so ("ab", "c")
// and ("a", "bc") differ.
class IdentityHasher {
 public:
  IdentityHasher& add(std::string_view text);
  IdentityHasher& add(uint64_t value);
  uint64_t value() const { return state_; }

 private:
  uint64_t state_ = 0x6b762d6964656e74ull;  // "kv-ident"
};

// A fingerprint of a checkpoint (a folder, or one file such as a GGUF): for config.json and each weight
// file (*.safetensors, *.bin, *.pt, *.pth, *.gguf), its name, its size, its first MiB whole (the
// safetensors and GGUF headers: every tensor's name, dtype, shape and offset) and 256 samples of 4 KiB
// spread evenly over the rest. Two checkpoints of one architecture differ in nearly every weight byte
// (random initialisations, fine-tunes), so the samples tell them apart; it reads about 2 MiB a file
// instead of the whole checkpoint. Throws aerie::Error when the path cannot be read.
uint64_t checkpoint_fingerprint(const std::filesystem::path& path);

}  // namespace aerie
