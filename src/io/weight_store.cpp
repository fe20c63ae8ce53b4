#include "io/weight_store.h"

#include <algorithm>
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

void read_file_into(const fs::path& path, WeightStore& store) {
  auto file = std::make_shared<MappedFile>(path.string());
  const std::string ext = path.extension().string();
  if (ext == ".safetensors") {
    read_safetensors(std::move(file), store);
  } else {
    read_torch_zip(std::move(file), store);
  }
}

// Sharded checkpoints: every shard named in the index is read, and every tensor the index lists must be
// in the shard it names.
void read_sharded(const fs::path& index_path, WeightStore& store) {
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
  for (const auto& [shard, names] : by_shard) {
    const fs::path shard_path = index_path.parent_path() / shard;
    AERIE_CHECK(fs::exists(shard_path), index_path.string(), ": shard '", shard, "' is missing");
    read_file_into(shard_path, store);
    for (const std::string& name : names)
      AERIE_CHECK(store.contains(name), shard_path.string(), ": tensor '", name, "' listed in ",
                  index_path.filename().string(), " is not in this shard");
  }
}

}  // namespace

WeightStore::WeightStore() = default;
WeightStore::~WeightStore() = default;
WeightStore::WeightStore(WeightStore&&) noexcept = default;
WeightStore& WeightStore::operator=(WeightStore&&) noexcept = default;

WeightStore WeightStore::open_dir(const fs::path& dir, const ProgressFn& progress) {
  WeightStore store;
  store.source_ = dir.string();
  const fs::path candidates[] = {"model.safetensors.index.json", "model.safetensors", "pytorch_model.bin.index.json",
                                 "pytorch_model.bin"};
  for (const fs::path& name : candidates) {
    const fs::path path = dir / name;
    if (!fs::exists(path)) continue;
    if (name.extension() == ".json") {
      read_sharded(path, store);
    } else {
      read_file_into(path, store);
    }
    if (progress) progress(LoadProgress{int64_t(store.size()), int64_t(store.size()), 0, store.total_bytes()});
    return store;
  }
  throw Error(str_cat(dir.string(), ": no weights found (expected model.safetensors[.index.json] or "
                                    "pytorch_model.bin[.index.json])"));
}

WeightStore WeightStore::open_file(const fs::path& file) {
  WeightStore store;
  store.source_ = file.string();
  read_file_into(file, store);
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

uint64_t WeightStore::prefault(const ProgressFn& progress) const {
  LoadProgress p;
  p.tensors_total = int64_t(tensors_.size());
  p.bytes_total = total_bytes();
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

void WeightStore::add_owned(const std::string& name, DType dtype, const Shape& shape, std::vector<uint8_t> bytes) {
  AERIE_CHECK(!contains(name), source_, ": tensor '", name, "' appears twice in the checkpoint");
  owned_.push_back(std::make_unique<std::vector<uint8_t>>(std::move(bytes)));
  tensors_[name] = Tensor{dtype, shape, owned_.back()->data()};
}

}  // namespace aerie
