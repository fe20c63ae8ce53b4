#include "io/weight_store.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <set>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_file.h"
#include "io/mapped_file.h"
#include "io/safetensors.h"
#include "io/torch_zip.h"

namespace aerie {
namespace fs = std::filesystem;
namespace {

nlohmann::json read_index(const fs::path& path) {
  const nlohmann::json json = read_json_file(path);
  AERIE_CHECK(json.is_object() && json.contains("weight_map") && json["weight_map"].is_object(), path.string(),
              ": missing 'weight_map' object");
  return json;
}

// The files of a checkpoint in reading order; for a sharded one, the tensors the index puts in each file.
struct CheckpointFiles {
  std::vector<fs::path> paths;
  std::vector<std::vector<std::string>> listed;  // per path; empty when there is no index
  fs::path index;                                // empty when there is no index
};

// Sharded checkpoints: every shard named in the index is read, and every tensor the index lists must be
// in the shard it names.
CheckpointFiles list_shards(const fs::path& index_path) {
  const nlohmann::json index = read_index(index_path);
  std::map<std::string, std::vector<std::string>> by_shard;
  for (const auto& [name, shard] : index["weight_map"].items()) {
    AERIE_CHECK(shard.is_string(), index_path.string(), ": weight_map entry '", name, "' is not a file name");
    const std::string shard_name = shard.get<std::string>();
    AERIE_CHECK(shard_name.find('/') == std::string::npos && shard_name != "..", index_path.string(),
                ": shard name '", shard_name, "' must be a file in the same folder");
    by_shard[shard_name].push_back(name);
  }
  AERIE_CHECK(!by_shard.empty(), index_path.string(), ": weight_map is empty");
  CheckpointFiles files;
  files.index = index_path;
  for (auto& [shard, names] : by_shard) {
    const fs::path shard_path = index_path.parent_path() / shard;
    AERIE_CHECK(fs::exists(shard_path), index_path.string(), ": shard '", shard, "' is missing");
    files.paths.push_back(shard_path);
    files.listed.push_back(std::move(names));
  }
  return files;
}

uint64_t checked_file_size(const fs::path& path) {
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  AERIE_CHECK(!ec, path.string(), ": cannot stat: ", ec.message());
  return size;
}

// Each file's region of the shared buffer starts on a huge page, so no 2 MiB page straddles two files.
uint64_t round_to_huge_page(uint64_t bytes) {
  const uint64_t page = HugePageBuffer::kHugePageBytes;
  return (bytes + page - 1) / page * page;
}

// Reads every file into one HugePageBuffer; nullptr buffers (the caller maps instead) when the copy is
// refused or the allocation fails, with the reason in report.note.
std::vector<std::shared_ptr<MappedFile>> copy_files(const std::vector<fs::path>& paths,
                                                    const std::vector<uint64_t>& sizes,
                                                    const WeightLoadOptions& options, const MemorySystem& system,
                                                    WeightMemoryReport& report) {
  uint64_t reserve = 0;
  for (uint64_t size : sizes) reserve += round_to_huge_page(size);
  if (report.file_bytes > options.max_copy_bytes) {
    report.note = str_cat("copy refused: ", report.file_bytes, " bytes exceed the limit of ", options.max_copy_bytes);
    return {};
  }
  std::string why;
  std::shared_ptr<HugePageBuffer> buffer = HugePageBuffer::allocate(size_t(reserve), &why);
  if (buffer == nullptr) {
    report.note = str_cat("no huge-page memory (", why, ")");
    return {};
  }
  const auto start = std::chrono::steady_clock::now();
  LoadProgress progress{0, 0, 0, report.file_bytes};
  const auto on_read = [&](uint64_t bytes) {
    progress.bytes_done += bytes;
    if (options.progress) options.progress(progress);
  };
  const bool direct = copy_bypasses_page_cache(report.file_bytes, system);
  std::vector<std::shared_ptr<MappedFile>> files;
  size_t offset = 0;
  for (size_t i = 0; i < paths.size(); ++i) {
    files.push_back(MappedFile::read_into(paths[i].string(), sizes[i], buffer, offset, direct, on_read));
    offset += size_t(round_to_huge_page(sizes[i]));
  }
  // Where free memory was too fragmented for a 2 MiB page at fault time, that part of the copy sits in
  // 4 KiB pages (with O_DIRECT reads, measured: 0.3% of a 16 GB copy). Collapsing it now costs a second
  // copy of that part.
  if (buffer->huge_page_bytes() < report.file_bytes) buffer->collapse();
  report.copy_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report.huge_page_bytes = buffer->huge_page_bytes();
  report.used = WeightMemory::kHugePages;
  return files;
}

void read_file_into(std::shared_ptr<MappedFile> file, const fs::path& path, WeightStore& store) {
  if (path.extension() == ".safetensors") {
    read_safetensors(std::move(file), store);
  } else {
    read_torch_zip(std::move(file), store);
  }
}

void read_files(const CheckpointFiles& checkpoint, const WeightLoadOptions& options,
                const WeightStore::FileReader& reader, WeightStore& store, WeightMemoryReport& report) {
  std::vector<uint64_t> sizes;
  for (const fs::path& path : checkpoint.paths) {
    sizes.push_back(checked_file_size(path));
    report.file_bytes += sizes.back();
  }
  const MemorySystem system = probe_memory_system();
  const WeightMemoryChoice choice = choose_weight_memory(options.memory, report.file_bytes, system);
  report.note = choice.note;
  std::vector<std::shared_ptr<MappedFile>> files;
  if (choice.memory == WeightMemory::kHugePages) files = copy_files(checkpoint.paths, sizes, options, system, report);
  for (size_t i = 0; i < checkpoint.paths.size(); ++i) {
    const fs::path& path = checkpoint.paths[i];
    reader(files.empty() ? std::make_shared<MappedFile>(path.string()) : files[i], path, store);
    if (checkpoint.index.empty()) continue;
    for (const std::string& name : checkpoint.listed[i])
      AERIE_CHECK(store.contains(name), path.string(), ": tensor '", name, "' listed in ",
                  checkpoint.index.filename().string(), " is not in this shard");
  }
}

}  // namespace

WeightStore::WeightStore() = default;
WeightStore::~WeightStore() = default;
WeightStore::WeightStore(WeightStore&&) noexcept = default;
WeightStore& WeightStore::operator=(WeightStore&&) noexcept = default;

WeightStore WeightStore::open_dir(const fs::path& dir, const ProgressFn& progress) {
  WeightLoadOptions options;
  options.progress = progress;
  return open_dir(dir, options);
}

WeightStore WeightStore::open_dir(const fs::path& dir, const WeightLoadOptions& options) {
  WeightStore store;
  store.source_ = dir.string();
  const fs::path candidates[] = {"model.safetensors.index.json", "model.safetensors", "pytorch_model.bin.index.json",
                                 "pytorch_model.bin"};
  for (const fs::path& name : candidates) {
    const fs::path path = dir / name;
    if (!fs::exists(path)) continue;
    const CheckpointFiles files = name.extension() == ".json" ? list_shards(path) : CheckpointFiles{{path}, {}, {}};
    read_files(files, options, read_file_into, store, store.memory_report_);
    if (options.progress)
      options.progress(LoadProgress{int64_t(store.size()), int64_t(store.size()), 0, store.total_bytes()});
    return store;
  }
  throw Error(str_cat(dir.string(), ": no weights found (expected model.safetensors[.index.json] or "
                                    "pytorch_model.bin[.index.json])"));
}

WeightStore WeightStore::open_files(const std::vector<fs::path>& paths, const WeightLoadOptions& options,
                                    const FileReader& reader, std::string source) {
  WeightStore store;
  store.source_ = std::move(source);
  read_files(CheckpointFiles{paths, {}, {}}, options, reader, store, store.memory_report_);
  if (options.progress)
    options.progress(LoadProgress{int64_t(store.size()), int64_t(store.size()), 0, store.total_bytes()});
  return store;
}

WeightStore WeightStore::open_file(const fs::path& file) {
  WeightStore store;
  store.source_ = file.string();
  read_file_into(std::make_shared<MappedFile>(file.string()), file, store);
  store.memory_report_.file_bytes = checked_file_size(file);
  return store;
}

bool WeightStore::contains(const std::string& name) const { return tensors_.count(name) != 0; }

const Tensor* WeightStore::find(const std::string& name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

const Tensor& WeightStore::get(const std::string& name) const {
  const Tensor* t = find(name);
  AERIE_CHECK(t != nullptr, source_, ": missing tensor '", name, "'");
  return *t;
}

const Tensor& WeightStore::get(const std::string& name, const Shape& expected) const {
  const Tensor& t = get(name);
  AERIE_CHECK(t.shape == expected, source_, ": tensor '", name, "' has shape ", t.shape.str(), ", expected ",
              expected.str());
  return t;
}

std::vector<std::string> WeightStore::names() const {
  std::vector<std::string> out;
  for (const auto& [name, t] : tensors_) out.push_back(name);
  return out;
}

uint64_t WeightStore::total_bytes() const {
  uint64_t total = 0;
  for (const auto& [name, t] : tensors_) total += t.nbytes();
  return total;
}

std::string WeightStore::matrix_dtypes() const {
  std::map<DType, std::pair<uint64_t, int64_t>> by_dtype;  // bytes, count
  for (const auto& [name, t] : tensors_) {
    if (t.shape.ndim() < 2) continue;
    by_dtype[t.dtype].first += t.nbytes();
    by_dtype[t.dtype].second += 1;
  }
  std::vector<std::pair<uint64_t, std::string>> parts;
  for (const auto& [dtype, v] : by_dtype) parts.emplace_back(v.first, str_cat(dtype_name(dtype), " x ", v.second));
  std::sort(parts.rbegin(), parts.rend());
  std::string out;
  for (const auto& [bytes, text] : parts) out += (out.empty() ? "" : ", ") + text;
  return out;
}

uint64_t WeightStore::prefault(const ProgressFn& progress) const {
  LoadProgress p;
  p.tensors_total = int64_t(tensors_.size());
  p.bytes_total = total_bytes();
  if (memory_report_.used == WeightMemory::kHugePages) {
    p.tensors_done = p.tensors_total;
    p.bytes_done = p.bytes_total;
    if (progress) progress(p);
    return resident_bytes();
  }
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  volatile uint8_t sink = 0;
  for (const auto& [name, t] : tensors_) {
    const auto* bytes = static_cast<const uint8_t*>(t.data);
    uint8_t acc = 0;
    for (size_t off = 0; off < t.nbytes(); off += page) acc ^= bytes[off];
    sink = sink ^ acc;
    p.tensors_done++;
    p.bytes_done += t.nbytes();
    if (progress && (p.tensors_done % 8 == 0 || p.tensors_done == p.tensors_total)) progress(p);
  }
  return resident_bytes();
}

uint64_t WeightStore::resident_bytes() const {
  uint64_t total = 0;
  for (const auto& f : files_) total += f->resident_bytes();
  for (const auto& o : owned_) total += o->size();
  return total;
}

void WeightStore::add(const std::string& name, const Tensor& tensor, std::shared_ptr<MappedFile> file) {
  AERIE_CHECK(!contains(name), file->path(), ": tensor '", name, "' appears twice in the checkpoint");
  tensors_[name] = tensor;
  if (std::find(files_.begin(), files_.end(), file) == files_.end()) files_.push_back(std::move(file));
}

void WeightStore::add_view(const std::string& name, const Tensor& tensor) {
  AERIE_CHECK(!contains(name), source_, ": tensor '", name, "' appears twice in the checkpoint");
  tensors_[name] = tensor;
}

void WeightStore::rename(const std::string& from, const std::string& to) {
  auto node = tensors_.extract(from);
  AERIE_CHECK(!node.empty(), source_, ": missing tensor '", from, "'");
  AERIE_CHECK(!contains(to), source_, ": tensors '", from, "' and '", to, "' would both be named '", to, "'");
  node.key() = to;
  tensors_.insert(std::move(node));
}

void WeightStore::add_owned(const std::string& name, DType dtype, const Shape& shape, std::vector<uint8_t> bytes) {
  AERIE_CHECK(!contains(name), source_, ": tensor '", name, "' appears twice in the checkpoint");
  owned_.push_back(std::make_unique<std::vector<uint8_t>>(std::move(bytes)));
  tensors_[name] = Tensor{dtype, shape, owned_.back()->data()};
}

void WeightStore::replace_owned(const std::string& name, DType dtype, const Shape& shape, std::vector<uint8_t> bytes) {
  AERIE_CHECK(uint64_t(bytes.size()) == uint64_t(shape.numel()) * dtype_size(dtype), source_, ": tensor '", name,
              "' replaced by ", bytes.size(), " bytes for shape ", shape.str());
  owned_.push_back(std::make_unique<std::vector<uint8_t>>(std::move(bytes)));
  tensors_[name] = Tensor{dtype, shape, owned_.back()->data()};
}

}  // namespace aerie
