#include "core/checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "util/atomic_file.h"
#include "util/error.h"

namespace lseq {
namespace {

constexpr const char* kMetadataKey = "__metadata__";

std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Element count, or nullopt-like -1 on a negative dimension or overflow past 2^62.
std::int64_t element_count(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (const auto d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > (std::int64_t{1} << 62) / d) return -1;
    n *= d;
  }
  return n;
}

// A name from a file as an error message shows it: control characters escaped, so that the message stays one line.
std::string shown(const std::string& text) {
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  return out;
}

bool is_known_dtype(const std::string& dtype) {
  return dtype == "F32" || dtype == "F16" || dtype == "BF16" || dtype == "I32" || dtype == "I64";
}

void store_u64_le(std::uint64_t v, unsigned char* out) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<unsigned char>(v >> (8 * i));
}

std::uint64_t load_u64_le(const unsigned char* in) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= std::uint64_t{in[i]} << (8 * i);
  return v;
}

}  // namespace

std::size_t safetensors_dtype_size(const std::string& dtype) {
  if (dtype == "F32" || dtype == "I32") return 4;
  if (dtype == "F16" || dtype == "BF16") return 2;
  if (dtype == "I64") return 8;
  fail("unknown safetensors dtype '{}'; use F32, F16, BF16, I32 or I64", dtype);
}

void write_safetensors(const std::string& path, const std::vector<SafetensorsInput>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [key, value] : metadata) meta[key] = value;
    header[kMetadataKey] = std::move(meta);
  }
  std::vector<ConstBuffer> pieces;
  std::set<std::string> seen;
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    if (t.name.empty() || t.name == kMetadataKey)
      fail("cannot write checkpoint '{}': invalid tensor name '{}'", path, t.name);
    if (!seen.insert(t.name).second)
      fail("cannot write checkpoint '{}': tensor '{}' is given twice", path, t.name);
    if (!is_known_dtype(t.dtype))
      fail("cannot write checkpoint '{}': tensor '{}' has unknown dtype '{}'; use F32, F16, BF16, I32 or I64", path,
           t.name, t.dtype);
    const std::int64_t count = element_count(t.shape);
    if (count < 0)
      fail("cannot write checkpoint '{}': tensor '{}' has an invalid shape {}", path, t.name, shape_string(t.shape));
    const std::uint64_t bytes = static_cast<std::uint64_t>(count) * safetensors_dtype_size(t.dtype);
    if (bytes > 0 && t.data == nullptr)
      fail("cannot write checkpoint '{}': tensor '{}' has no data", path, t.name);
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    pieces.push_back({t.data, static_cast<std::size_t>(bytes)});
    offset += bytes;
  }
  std::string json;
  try {
    json = header.dump();
  } catch (const nlohmann::json::exception&) {  // only invalid UTF-8 can make dump() fail
    fail("cannot write checkpoint '{}': a tensor name or metadata entry is not valid UTF-8", path);
  }
  json.append((8 - json.size() % 8) % 8, ' ');  // data area starts 8-byte aligned
  unsigned char length[8];
  store_u64_le(json.size(), length);
  pieces.insert(pieces.begin(), {{length, 8}, {json.data(), json.size()}});
  write_file_atomic(path, pieces);
}

// The file's bytes, mapped read-only (an empty data area needs no mapping).
struct SafetensorsFile::Mapping {
  const unsigned char* bytes = nullptr;
  std::size_t size = 0;
  ~Mapping() {
    if (bytes != nullptr && size > 0) ::munmap(const_cast<unsigned char*>(bytes), size);
  }
};

SafetensorsFile SafetensorsFile::open(const std::string& path, bool read_all) {
  auto corrupt = [&path](const std::string& what) {
    fail("checkpoint '{}' is corrupt or truncated: {}; write it again or load another checkpoint", path, shown(what));
  };

  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot read checkpoint '{}': {}; check the path", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    fail("cannot read checkpoint '{}': {}", path, std::strerror(e));
  }
  auto mapping = std::make_shared<Mapping>();
  mapping->size = static_cast<std::size_t>(st.st_size);
  if (mapping->size > 0) {
    // MAP_POPULATE reads the whole file in at once rather than a page fault at a time as tensors are touched, so
    // that a loader can have it read on another thread (model_loader.cpp).
    void* p = ::mmap(nullptr, mapping->size, PROT_READ, MAP_PRIVATE | (read_all ? MAP_POPULATE : 0), fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      fail("cannot read checkpoint '{}': mmap failed: {}", path, std::strerror(e));
    }
    mapping->bytes = static_cast<const unsigned char*>(p);
  }
  ::close(fd);

  const std::size_t size = mapping->size;
  if (size < 8) corrupt(fmt::format("the file has {} bytes, fewer than the 8-byte header length", size));
  const std::uint64_t header_len = load_u64_le(mapping->bytes);
  if (header_len > size - 8)
    corrupt(fmt::format("the header length {} runs past the end of the file ({} bytes)", header_len, size));
  const char* header_begin = reinterpret_cast<const char*>(mapping->bytes + 8);
  const auto header = nlohmann::ordered_json::parse(header_begin, header_begin + header_len, nullptr, false);
  if (header.is_discarded()) corrupt("the header is not valid JSON");
  if (!header.is_object()) corrupt("the header is not a JSON object");

  SafetensorsFile file;
  file.path_ = path;
  const unsigned char* data = mapping->bytes + 8 + header_len;
  const std::uint64_t data_size = size - 8 - header_len;

  struct Extent {
    std::uint64_t begin, end;
    std::string name;
  };
  std::vector<Extent> extents;
  for (const auto& [name, entry] : header.items()) {
    if (name == kMetadataKey) {
      if (!entry.is_object()) corrupt("\"__metadata__\" is not an object");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) corrupt(fmt::format("metadata '{}' is not a string", key));
        file.metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    if (!entry.is_object()) corrupt(fmt::format("tensor '{}' is not an object", name));
    const auto dtype = entry.find("dtype");
    if (dtype == entry.end() || !dtype->is_string()) corrupt(fmt::format("tensor '{}' has no dtype string", name));
    const std::string dtype_name = dtype->get<std::string>();
    if (!is_known_dtype(dtype_name)) corrupt(fmt::format("tensor '{}' has unknown dtype '{}'", name, dtype_name));
    const auto shape = entry.find("shape");
    if (shape == entry.end() || !shape->is_array()) corrupt(fmt::format("tensor '{}' has no shape array", name));
    std::vector<std::int64_t> dims;
    for (const auto& d : *shape) {
      if (!d.is_number_unsigned()) corrupt(fmt::format("tensor '{}' has a shape entry that is not a size", name));
      const auto v = d.get<std::uint64_t>();
      if (v > (std::uint64_t{1} << 62)) corrupt(fmt::format("tensor '{}' has an impossible dimension {}", name, v));
      dims.push_back(static_cast<std::int64_t>(v));
    }
    const auto offsets = entry.find("data_offsets");
    if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
        !(*offsets)[1].is_number_unsigned())
      corrupt(fmt::format("tensor '{}' has no data_offsets [begin, end]", name));
    const auto begin = (*offsets)[0].get<std::uint64_t>();
    const auto end = (*offsets)[1].get<std::uint64_t>();
    if (end < begin) corrupt(fmt::format("tensor '{}' has data_offsets [{}, {}] that end before they begin", name, begin, end));
    const std::int64_t count = element_count(dims);
    const std::uint64_t element_bytes = safetensors_dtype_size(dtype_name);
    // count <= 2^62, but 2^62 elements of 4 or 8 bytes overflow 64 bits (and would pass as 0 bytes).
    if (count < 0 || static_cast<std::uint64_t>(count) > std::numeric_limits<std::uint64_t>::max() / element_bytes)
      corrupt(fmt::format("tensor '{}' has an impossible shape {}", name, shape_string(dims)));
    const std::uint64_t expected = static_cast<std::uint64_t>(count) * element_bytes;
    if (end - begin != expected)
      corrupt(fmt::format("tensor '{}' ({} {}) needs {} bytes but its data_offsets [{}, {}] hold {}", name,
                          dtype_name, shape_string(dims), expected, begin, end, end - begin));
    if (end > data_size)
      corrupt(fmt::format("tensor '{}' ends at data byte {} but the data area has only {} bytes", name, end,
                          data_size));
    extents.push_back({begin, end, name});
    file.tensors_[name] = SafetensorsTensor{dtype_name, std::move(dims), data + begin, static_cast<std::size_t>(end - begin)};
  }

  // The tensors must tile the data area exactly: no overlaps, no holes, nothing after the last one.
  std::stable_sort(extents.begin(), extents.end(), [](const Extent& a, const Extent& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t position = 0;
  for (const auto& e : extents) {
    if (e.begin < position) corrupt(fmt::format("tensor '{}' overlaps the tensor before it", e.name));
    if (e.begin > position)
      corrupt(fmt::format("data bytes {} to {} before tensor '{}' belong to no tensor", position, e.begin, e.name));
    position = e.end;
    file.names_.push_back(e.name);
  }
  if (position != data_size)
    corrupt(fmt::format("the data area has {} bytes but the tensors use {}", data_size, position));
  file.mapping_ = std::move(mapping);
  return file;
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

const SafetensorsTensor& SafetensorsFile::require(const std::string& name, const std::string& dtype,
                                                  const std::vector<std::int64_t>& shape) const {
  const SafetensorsTensor* t = find(name);
  if (t == nullptr)
    fail("checkpoint '{}' has no tensor '{}' (expected {} {}); it was written for a different model", path_, name,
         dtype, shape_string(shape));
  if (t->dtype != dtype || t->shape != shape)
    fail("checkpoint '{}': tensor '{}' is {} {} but the model config expects {} {}; use a checkpoint written for "
         "this configuration",
         path_, name, t->dtype, shape_string(t->shape), dtype, shape_string(shape));
  return *t;
}

}  // namespace lseq
