// Test helpers for hand-made torch.save files: a pickle program builder (the opcodes of io/pickle.cpp) and
// a stored (uncompressed) zip archive builder, so that tests can write lying and hostile files byte by byte.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace aerie::testing {

// Appends pickle opcodes; `bytes` is the program.
struct PickleWriter {
  std::string bytes = std::string("\x80\x02", 2);  // PROTO 2

  PickleWriter& op(char c) {
    bytes += c;
    return *this;
  }
  PickleWriter& str(const std::string& s) {  // BINUNICODE
    bytes += 'X';
    append_le(uint32_t(s.size()), 4);
    bytes += s;
    return *this;
  }
  PickleWriter& integer(uint32_t v) {  // BININT
    bytes += 'J';
    append_le(v, 4);
    return *this;
  }
  PickleWriter& global(const std::string& module, const std::string& name) {  // GLOBAL
    bytes.append("c").append(module).append("\n").append(name).append("\n");
    return *this;
  }
  PickleWriter& put(uint8_t key) {  // BINPUT
    bytes += 'q';
    bytes += char(key);
    return *this;
  }
  PickleWriter& get(uint8_t key) {  // BINGET
    bytes += 'h';
    bytes += char(key);
    return *this;
  }
  PickleWriter& int_tuple(const std::vector<uint32_t>& values) {
    op('(');
    for (uint32_t v : values) integer(v);
    return op('t');
  }
  // key -> torch._utils._rebuild_tensor_v2(storage `key` of `storage_type` with n elements, offset, size,
  // stride); the caller is inside the state dict's MARK ... SETITEMS.
  PickleWriter& tensor(const std::string& name, const std::string& storage_type, const std::string& key,
                       uint32_t n_storage, uint32_t offset, const std::vector<uint32_t>& size,
                       const std::vector<uint32_t>& stride) {
    str(name).global("torch._utils", "_rebuild_tensor_v2").op('(');
    op('(').str("storage").global("torch", storage_type).str(key).str("cpu").integer(n_storage).op('t').op('Q');
    integer(offset).int_tuple(size).int_tuple(stride).op(char(0x89));  // requires_grad False
    global("collections", "OrderedDict").op(')').op('R');                // backward hooks
    return op('t').op('R');
  }
  // OrderedDict() then MARK: the start of a state dict; end_state_dict() closes it.
  PickleWriter& begin_state_dict() { return global("collections", "OrderedDict").op(')').op('R').op('('); }
  PickleWriter& end_state_dict() { return op('u').op('.'); }

  void append_le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) bytes += char((v >> (8 * i)) & 0xff);
  }
};

inline void put_le(std::string& out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out += char((v >> (8 * i)) & 0xff);
}

// A zip archive of stored entries, as torch.save writes it: local headers and data, the central
// directory, the end-of-central-directory record (CRCs are left 0: the reader does not check them).
inline std::string zip_archive(const std::vector<std::pair<std::string, std::string>>& entries) {
  std::string out, central;
  for (const auto& [name, data] : entries) {
    const uint64_t local = out.size();
    put_le(out, 0x04034b50, 4);
    put_le(out, 20, 2);
    put_le(out, 0, 2 + 2 + 2 + 2 + 4);  // flags, method (stored), time, date, crc
    put_le(out, data.size(), 4);
    put_le(out, data.size(), 4);
    put_le(out, name.size(), 2);
    put_le(out, 0, 2);
    out.append(name).append(data);
    put_le(central, 0x02014b50, 4);
    put_le(central, 20, 2);
    put_le(central, 20, 2);
    put_le(central, 0, 2 + 2 + 2 + 2 + 4);
    put_le(central, data.size(), 4);
    put_le(central, data.size(), 4);
    put_le(central, name.size(), 2);
    put_le(central, 0, 2 + 2 + 2 + 2 + 4);  // extra, comment, disk, internal and external attributes
    put_le(central, local, 4);
    central += name;
  }
  const uint64_t cd_offset = out.size();
  out += central;
  put_le(out, 0x06054b50, 4);
  put_le(out, 0, 2 + 2);
  put_le(out, entries.size(), 2);
  put_le(out, entries.size(), 2);
  put_le(out, central.size(), 4);
  put_le(out, cd_offset, 4);
  put_le(out, 0, 2);
  return out;
}

}  // namespace aerie::testing
