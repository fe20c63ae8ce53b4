// WeightStore: every tensor of a checkpoint folder, as views into the bytes of its files: memory-mapped
// (no copy) by default, or read into anonymous huge-page memory (io/weight_memory.h). It opens, in this
// order of preference:
//   model.safetensors.index.json (sharded safetensors), model.safetensors, pytorch_model.bin.index.json,
//   pytorch_model.bin (torch.save zip format).
// Every malformed file is an aerie::Error naming the file and the problem.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/weight_memory.h"

namespace aerie {

class MappedFile;

// Called while loading: tensors and bytes done so far out of the totals.
struct LoadProgress {
  int64_t tensors_done = 0;
  int64_t tensors_total = 0;
  uint64_t bytes_done = 0;
  uint64_t bytes_total = 0;
};
using ProgressFn = std::function<void(const LoadProgress&)>;

struct WeightLoadOptions {
  WeightMemory memory = WeightMemory::kMapped;
  // Called while loading; while files are copied into huge-page memory, with bytes of the files read so far
  // and tensors_total 0 (the headers are parsed after the copy).
  ProgressFn progress;
  // A copy larger than this is refused and the files are mapped instead, with a note in the report (a
  // guard, and how the tests take the fallback path).
  uint64_t max_copy_bytes = UINT64_MAX;
};

class WeightStore {
 public:
  WeightStore();
  ~WeightStore();
  WeightStore(WeightStore&&) noexcept;
  WeightStore& operator=(WeightStore&&) noexcept;
  WeightStore(const WeightStore&) = delete;
  WeightStore& operator=(const WeightStore&) = delete;

  // Opens the checkpoint in `dir` (see above). Throws aerie::Error if there is none or it is malformed.
  static WeightStore open_dir(const std::filesystem::path& dir, const ProgressFn& progress = nullptr);
  static WeightStore open_dir(const std::filesystem::path& dir, const WeightLoadOptions& options);
  // Reads one file of a checkpoint into a store (a format's parser: safetensors, GGUF).
  using FileReader = std::function<void(std::shared_ptr<MappedFile>, const std::filesystem::path&, WeightStore&)>;
  // Opens `paths` with `reader`, mapped or copied into huge pages as `options` says (the folder formats use
  // this too). `source` names the checkpoint in errors.
  static WeightStore open_files(const std::vector<std::filesystem::path>& paths, const WeightLoadOptions& options,
                                const FileReader& reader, std::string source);
  // Opens one file: *.safetensors or a torch zip (*.bin / *.pt).
  static WeightStore open_file(const std::filesystem::path& file);

  bool contains(const std::string& name) const;
  // The tensor named `name`; throws "<source>: missing tensor 'name'" when absent.
  const Tensor& get(const std::string& name) const;
  // get() plus a shape check; throws "tensor 'name' has shape [a, b], expected [c, d]".
  const Tensor& get(const std::string& name, const Shape& expected) const;
  // nullptr when absent.
  const Tensor* find(const std::string& name) const;

  std::vector<std::string> names() const;  // sorted
  size_t size() const { return tensors_.size(); }
  uint64_t total_bytes() const;  // sum of tensor byte sizes
  // The dtypes of the matrices (2-D and up), most bytes first: "Q4_K x 97, Q6_K x 17" (a GGUF mix), "BF16 x 113".
  std::string matrix_dtypes() const;
  // Where the tensors came from (the folder or file), for error messages.
  const std::string& source() const { return source_; }

  // Touches every page of every tensor (so the first forward does not pay page faults), calling
  // `progress` as it goes; returns the resident bytes of the mappings afterwards. A copy in huge-page
  // memory is resident already and is not touched again.
  uint64_t prefault(const ProgressFn& progress = nullptr) const;
  // Bytes of the mapped files currently resident in RAM (mincore).
  uint64_t resident_bytes() const;
  // Where the open_dir put the files' bytes, how much of a copy is in huge pages (as of the load) and why.
  const WeightMemoryReport& memory_report() const { return memory_report_; }

  // Used by the readers: adds a tensor that views into `file`. Throws on a duplicate name.
  void add(const std::string& name, const Tensor& tensor, std::shared_ptr<MappedFile> file);
  // A view into bytes the store already holds (a slice of one of its tensors: one expert of a stacked
  // [n_expert, ...] tensor). Throws on a duplicate name.
  void add_view(const std::string& name, const Tensor& tensor);
  // Gives tensor `from` the name `to` (a format's names mapped onto the publisher's). Throws when `from` is
  // missing or `to` is taken.
  void rename(const std::string& from, const std::string& to);
  // Owned tensors (converted from a layout that cannot be viewed, e.g. non-contiguous torch storage).
  void add_owned(const std::string& name, DType dtype, const Shape& shape, std::vector<uint8_t> bytes);
  // Replaces (or adds) `name` by an owned tensor: a derived form of the weights (quantised at load, scales
  // widened to F32). The old tensor's bytes stay where they were (a mapping the kernel can drop).
  void replace_owned(const std::string& name, DType dtype, const Shape& shape, std::vector<uint8_t> bytes);
  void set_source(std::string source) { source_ = std::move(source); }

 private:
  std::map<std::string, Tensor> tensors_;
  std::vector<std::shared_ptr<MappedFile>> files_;
  std::vector<std::unique_ptr<std::vector<uint8_t>>> owned_;
  std::string source_;
  WeightMemoryReport memory_report_;
};

}  // namespace aerie
