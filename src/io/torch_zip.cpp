#include "io/torch_zip.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "core/error.h"
#include "core/limits.h"
#include "io/mapped_file.h"
#include "io/pickle.h"
#include "io/tensor_checks.h"
#include "io/zip_reader.h"

namespace aerie {
namespace {

using pickle::Kind;
using pickle::Value;
using pickle::ValuePtr;

struct StorageRef {
  DType dtype;
  std::string key;
};

struct TensorRef {
  StorageRef storage;
  int64_t offset = 0;  // in elements
  std::vector<int64_t> shape, stride;
};

bool storage_dtype(const std::string& type, DType* out) {
  static const std::map<std::string, DType> kTypes = {
      {"torch.FloatStorage", DType::kF32},     {"torch.BFloat16Storage", DType::kBF16},
      {"torch.HalfStorage", DType::kF16},      {"torch.LongStorage", DType::kI64},
      {"torch.IntStorage", DType::kI32},       {"torch.ShortStorage", DType::kI16},
      {"torch.CharStorage", DType::kI8},       {"torch.ByteStorage", DType::kU8},
      {"torch.BoolStorage", DType::kBool},     {"torch.DoubleStorage", DType::kF64},
      {"torch.Float8_e4m3fnStorage", DType::kF8E4M3}};
  const auto it = kTypes.find(type);
  if (it == kTypes.end()) return false;
  *out = it->second;
  return true;
}

// Storage keys are the decimal numbers torch writes ("0", "17"); a longer one is copied into every tensor.
constexpr size_t kMaxStorageKeyBytes = 64;

int max_rank() { return std::min(kMaxDims, LoadLimits{}.max_tensor_rank); }

std::vector<int64_t> int_tuple(const Value& v, const std::string& what, const std::string& path) {
  AERIE_CHECK(v.kind == Kind::kTuple, path, ": ", what, " is not a tuple");
  // Before reading the items: a memoised tuple of a million items may be passed to every tensor.
  AERIE_CHECK(v.items.size() <= size_t(max_rank()), path, ": ", what, " has ", v.items.size(),
              " dimensions, more than ", max_rank(), " (LoadLimits::max_tensor_rank)");
  std::vector<int64_t> out;
  for (const ValuePtr& x : v.items) {
    AERIE_CHECK(x->kind == Kind::kInt && x->integer >= 0, path, ": ", what, " holds a non-integer");
    out.push_back(x->integer);
  }
  return out;
}

pickle::Hooks torch_hooks(const std::string& path) {
  pickle::Hooks hooks;
  hooks.persistent_load = [path](const Value& pid) -> ValuePtr {
    AERIE_CHECK(pid.kind == Kind::kTuple && pid.items.size() >= 3 && pid.items[0]->text == "storage" &&
                    pid.items[1]->kind == Kind::kGlobal && pid.items[2]->kind == Kind::kString,
                path, ": unexpected persistent id in data.pkl");
    auto ref = std::make_shared<StorageRef>();
    AERIE_CHECK(storage_dtype(pid.items[1]->text, &ref->dtype), path, ": unsupported storage type '",
                pid.items[1]->text, "'");
    AERIE_CHECK(pid.items[2]->text.size() <= kMaxStorageKeyBytes, path, ": storage key of ",
                pid.items[2]->text.size(), " bytes in data.pkl (torch writes a number)");
    ref->key = pid.items[2]->text;
    auto v = pickle::make(Kind::kObject);
    v->text = "storage";
    v->object = ref;
    return v;
  };
  hooks.reduce = [path](const Value& callable, const Value& args) -> ValuePtr {
    if (callable.text == "collections.OrderedDict") return pickle::make(Kind::kDict);
    if (callable.text == "torch._utils._rebuild_parameter") {
      AERIE_CHECK(!args.items.empty() && args.items[0]->text == "tensor", path, ": bad _rebuild_parameter");
      return args.items[0];
    }
    if (callable.text != "torch._utils._rebuild_tensor_v2") return nullptr;
    AERIE_CHECK(args.items.size() >= 4 && args.items[0]->kind == Kind::kObject && args.items[0]->text == "storage" &&
                    args.items[1]->kind == Kind::kInt,
                path, ": malformed _rebuild_tensor_v2 arguments");
    auto ref = std::make_shared<TensorRef>();
    ref->storage = *std::static_pointer_cast<StorageRef>(args.items[0]->object);
    ref->offset = args.items[1]->integer;
    ref->shape = int_tuple(*args.items[2], "tensor size", path);
    ref->stride = int_tuple(*args.items[3], "tensor stride", path);
    AERIE_CHECK(ref->shape.size() == ref->stride.size() && ref->offset >= 0, path,
                ": tensor size and stride disagree");
    auto v = pickle::make(Kind::kObject);
    v->text = "tensor";
    v->object = ref;
    return v;
  };
  return hooks;
}

// Adds one tensor: a view when it is contiguous, otherwise a contiguous copy. The copies of one file
// together may not exceed `copy_budget` bytes (what is left of the file's size): each is at most its
// storage, but many strided views of one storage would each copy it.
void add_tensor(const std::string& name, const TensorRef& t, const ZipEntry& storage, std::shared_ptr<MappedFile> file,
                uint64_t& copy_budget, WeightStore& store) {
  const std::string& path = file->path();
  const size_t elem = dtype_size(t.storage.dtype);
  const uint64_t n_storage = storage.size / elem;
  // Element count, bounded at each step so a crafted size tuple cannot overflow.
  uint64_t numel = 1;
  for (const int64_t dim : t.shape) {
    AERIE_CHECK(dim == 0 || numel <= (uint64_t(1) << 42) / uint64_t(dim), path, ": tensor '", name,
                "' has too many elements");
    numel *= uint64_t(dim);
  }
  const Shape shape = Shape::from(t.shape.data(), int(t.shape.size()));
  if (numel == 0) {
    store.add(name, Tensor{t.storage.dtype, shape, storage.data}, std::move(file));
    return;
  }
  // The furthest element any index reaches must lie inside the storage; each step is checked against what
  // is left of the storage, so the sum never overflows.
  AERIE_CHECK(uint64_t(t.offset) < n_storage, path, ": tensor '", name, "' starts at element ", t.offset,
              " of a storage with ", n_storage, " elements");
  uint64_t last = uint64_t(t.offset);
  bool contiguous = true;
  uint64_t expected_stride = 1;
  for (int i = int(t.shape.size()) - 1; i >= 0; --i) {
    const uint64_t extent = uint64_t(t.shape[size_t(i)]) - 1;
    const uint64_t stride = uint64_t(t.stride[size_t(i)]);
    AERIE_CHECK(extent == 0 || stride <= (n_storage - 1 - last) / extent, path, ": tensor '", name, "' of shape ",
                shape.str(), " reaches past the end of its storage of ", n_storage, " elements");
    last += extent * stride;
    if (extent != 0 && stride != expected_stride) contiguous = false;
    expected_stride *= extent + 1;
  }
  // A strided copy must not be larger than its storage (an expand()ed view would multiply it).
  AERIE_CHECK(contiguous || numel <= n_storage, path, ": tensor '", name,
              "' is a broadcast view larger than its storage; save it with .contiguous()");
  if (contiguous) {
    const Tensor view{t.storage.dtype, shape, storage.data + uint64_t(t.offset) * elem};
    check_small_tensor_finite(path, name, view);
    store.add(name, view, std::move(file));
    return;
  }
  AERIE_CHECK(numel * elem <= copy_budget, path, ": tensor '", name, "' is a strided view whose copy (", numel * elem,
              " bytes) would bring the copies of this file past its size; save the tensors with .contiguous()");
  copy_budget -= numel * elem;
  std::vector<uint8_t> bytes(size_t(shape.numel()) * elem);
  std::vector<int64_t> index(t.shape.size(), 0);
  for (int64_t i = 0; i < shape.numel(); ++i) {
    int64_t src = t.offset;
    for (size_t d = 0; d < index.size(); ++d) src += index[d] * t.stride[d];
    std::memcpy(bytes.data() + size_t(i) * elem, storage.data + size_t(src) * elem, elem);
    for (int d = int(index.size()) - 1; d >= 0; --d) {
      if (++index[size_t(d)] < t.shape[size_t(d)]) break;
      index[size_t(d)] = 0;
    }
  }
  check_small_tensor_finite(path, name, Tensor{t.storage.dtype, shape, bytes.data()});
  store.add_owned(name, t.storage.dtype, shape, std::move(bytes));
}

}  // namespace

void read_torch_zip(std::shared_ptr<MappedFile> file, WeightStore& store) {
  const std::string& path = file->path();
  const ZipReader zip(file);
  // The archive's folder is named after the file by torch (e.g. "pytorch_model/"), "archive/" by others.
  std::string prefix;
  const ZipEntry* pkl = nullptr;
  for (const auto& [name, entry] : zip.entries()) {
    if (name.size() >= 8 && name.compare(name.size() - 8, 8, "data.pkl") == 0 &&
        name.find('/') == name.size() - 9) {
      prefix = name.substr(0, name.size() - 8);
      pkl = &entry;
      break;
    }
  }
  AERIE_CHECK(pkl != nullptr, path, ": no data.pkl in the archive: not a torch.save state dict");
  const ValuePtr root = pickle::run(pkl->data, pkl->size, torch_hooks(path), path);
  AERIE_CHECK(root->kind == Kind::kDict, path, ": data.pkl does not hold a dict of tensors");
  uint64_t copy_budget = file->size();
  for (size_t i = 0; i + 1 < root->items.size(); i += 2) {
    const Value& key = *root->items[i];
    const Value& value = *root->items[i + 1];
    AERIE_CHECK(key.kind == Kind::kString, path, ": state dict key is not a string");
    AERIE_CHECK(value.kind == Kind::kObject && value.text == "tensor", path, ": entry '", key.text,
                "' is not a tensor");
    const TensorRef& t = *std::static_pointer_cast<TensorRef>(value.object);
    const ZipEntry* storage = zip.find(prefix + "data/" + t.storage.key);
    AERIE_CHECK(storage != nullptr, path, ": storage '", t.storage.key, "' of tensor '", key.text, "' is missing");
    add_tensor(key.text, t, *storage, file, copy_budget, store);
  }
}

}  // namespace aerie
