// safetensors writer/reader: round trip, the exact byte layout other readers rely on, and one-line errors for
// every kind of corrupt or truncated file.
#include "core/checkpoint/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "util/error.h"

namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_raw(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string u64_le(std::uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

// A file made by hand: length prefix, header text as given, data bytes.
std::string handmade(const std::string& header, const std::string& data) { return u64_le(header.size()) + header + data; }

std::vector<unsigned char> random_bytes(std::size_t n, std::mt19937& rng) {
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(rng() & 0xff);
  return v;
}

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "lseq-st-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Opens path expecting the one-line corruption error; returns the part after the common prefix.
  std::string corruption_of(const fs::path& path) {
    try {
      lseq::SafetensorsFile::open(path.string());
    } catch (const lseq::Error& e) {
      const std::string msg = e.what();
      const std::string prefix = "checkpoint '" + path.string() + "' is corrupt or truncated: ";
      EXPECT_EQ(msg.rfind(prefix, 0), 0u) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
      return msg.substr(std::min(prefix.size(), msg.size()));
    }
    ADD_FAILURE() << "no error opening " << path;
    return "";
  }

  fs::path dir_;
};

struct Fixture {
  std::vector<float> f32;
  std::vector<unsigned char> f16, bf16, empty;
  std::vector<std::int32_t> i32;
  std::vector<std::int64_t> i64;
  std::vector<lseq::SafetensorsInput> inputs;
};

// Several dtypes, a scalar, an empty tensor and odd sizes (so later tensors start unaligned).
Fixture make_fixture(unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Fixture f;
  f.f32.resize(2 * 3);
  for (auto& x : f.f32) x = normal(rng);
  f.f16 = random_bytes(2 * 5, rng);
  f.bf16 = random_bytes(2 * 7 * 1, rng);
  f.i32 = {static_cast<std::int32_t>(rng())};
  f.i64.resize(4);
  for (auto& x : f.i64) x = static_cast<std::int64_t>((std::uint64_t{rng()} << 32) | rng());
  f.inputs = {
      {"encoder.layer0.weight", "F32", {2, 3}, f.f32.data()},
      {"half", "F16", {5}, f.f16.data()},
      {"empty", "F32", {0, 3}, nullptr},
      {"brain", "BF16", {7, 1}, f.bf16.data()},
      {"step", "I32", {}, f.i32.data()},
      {"ids", "I64", {2, 2}, f.i64.data()},
  };
  return f;
}

TEST_F(SafetensorsTest, RoundTripKeepsTensorsOrderAndMetadata) {
  const Fixture f = make_fixture(11);
  const std::map<std::string, std::string> meta{{"format", "pt"}, {"config", "{\"dim\": 512}\nline two ü"}};
  const fs::path path = dir_ / "model.safetensors";
  lseq::write_safetensors(path.string(), f.inputs, meta);

  const auto file = lseq::SafetensorsFile::open(path.string());
  EXPECT_EQ(file.metadata(), meta);
  std::vector<std::string> expected_names;
  for (const auto& in : f.inputs) expected_names.push_back(in.name);
  EXPECT_EQ(file.names(), expected_names);
  for (const auto& in : f.inputs) {
    const auto* t = file.find(in.name);
    ASSERT_NE(t, nullptr) << in.name;
    EXPECT_EQ(t->dtype, in.dtype);
    EXPECT_EQ(t->shape, in.shape);
    std::size_t count = 1;
    for (auto d : in.shape) count *= static_cast<std::size_t>(d);
    ASSERT_EQ(t->bytes, count * lseq::safetensors_dtype_size(in.dtype)) << in.name;
    if (t->bytes > 0) EXPECT_EQ(std::memcmp(t->data, in.data, t->bytes), 0) << in.name;
  }
  EXPECT_EQ(file.find("missing"), nullptr);
  std::vector<float> back(6);
  std::memcpy(back.data(), file.require("encoder.layer0.weight", "F32", {2, 3}).data, 24);
  EXPECT_EQ(back, f.f32);
}

// The layout numpy/PyTorch's safetensors readers expect, checked byte by byte.
TEST_F(SafetensorsTest, LayoutIsStandardSafetensors) {
  const Fixture f = make_fixture(12);
  const fs::path path = dir_ / "layout.safetensors";
  lseq::write_safetensors(path.string(), f.inputs, {{"k", "v"}});
  const std::string bytes = read_file(path);
  ASSERT_GE(bytes.size(), 8u);
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= std::uint64_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
  ASSERT_LE(8 + n, bytes.size());
  EXPECT_EQ(n % 8, 0u);
  const std::string header_text = bytes.substr(8, n);
  EXPECT_EQ(header_text.front(), '{');
  const auto close = header_text.find_last_of('}');
  EXPECT_EQ(header_text.find_first_not_of(' ', close + 1), std::string::npos) << "padding must be spaces";
  EXPECT_LT(header_text.size() - close - 1, 8u);
  const auto header = nlohmann::json::parse(header_text);
  EXPECT_EQ(header.at("__metadata__"), nlohmann::json({{"k", "v"}}));
  EXPECT_EQ(header.size(), f.inputs.size() + 1);

  std::uint64_t offset = 0;
  for (const auto& in : f.inputs) {
    const auto& entry = header.at(in.name);
    EXPECT_EQ(entry.at("dtype"), in.dtype);
    EXPECT_EQ(entry.at("shape").get<std::vector<std::int64_t>>(), in.shape);
    const auto offsets = entry.at("data_offsets").get<std::vector<std::uint64_t>>();
    ASSERT_EQ(offsets.size(), 2u);
    EXPECT_EQ(offsets[0], offset) << in.name << " must follow the previous tensor";
    std::uint64_t size = lseq::safetensors_dtype_size(in.dtype);
    for (auto d : in.shape) size *= static_cast<std::uint64_t>(d);
    EXPECT_EQ(offsets[1] - offsets[0], size);
    if (size > 0) EXPECT_EQ(std::memcmp(bytes.data() + 8 + n + offset, in.data, size), 0) << in.name;
    offset = offsets[1];
  }
  EXPECT_EQ(bytes.size(), 8 + n + offset);
}

TEST_F(SafetensorsTest, NoTensorsAndNoMetadataStillValid) {
  const fs::path path = dir_ / "empty.safetensors";
  lseq::write_safetensors(path.string(), {});
  const auto file = lseq::SafetensorsFile::open(path.string());
  EXPECT_TRUE(file.names().empty());
  EXPECT_TRUE(file.metadata().empty());
  EXPECT_EQ(read_file(path).size() % 8, 0u);
}

TEST_F(SafetensorsTest, WriterRejectsBadInput) {
  const float x[2] = {1.5f, -2.5f};
  const std::string path = (dir_ / "bad.safetensors").string();
  EXPECT_THROW(lseq::write_safetensors(path, {{"a", "F8", {2}, x}}), lseq::Error);
  EXPECT_THROW(lseq::write_safetensors(path, {{"a", "F32", {2}, x}, {"a", "F32", {2}, x}}), lseq::Error);
  EXPECT_THROW(lseq::write_safetensors(path, {{"__metadata__", "F32", {2}, x}}), lseq::Error);
  EXPECT_THROW(lseq::write_safetensors(path, {{"a", "F32", {-1}, x}}), lseq::Error);
  EXPECT_THROW(lseq::write_safetensors(path, {{"a", "F32", {2}, nullptr}}), lseq::Error);
  EXPECT_THROW(lseq::write_safetensors(path, {{"a\xff", "F32", {2}, x}}), lseq::Error);
  EXPECT_THROW(lseq::write_safetensors(path, {{"a", "F32", {2}, x}}, {{"k", "\xc3"}}), lseq::Error);
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(fs::is_empty(dir_)) << "no temporary file may remain";
}

TEST_F(SafetensorsTest, TruncationAnywhereIsReported) {
  const Fixture f = make_fixture(13);
  const fs::path good = dir_ / "good.safetensors";
  lseq::write_safetensors(good.string(), f.inputs, {{"a", "b"}});
  const std::string bytes = read_file(good);
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= std::uint64_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
  const std::size_t cuts[] = {0, 3, 7, 8, 9, 8 + n / 2, 8 + n - 1, 8 + n + 1, 8 + n + 25, bytes.size() - 1};
  for (const std::size_t cut : cuts) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    const fs::path path = dir_ / "cut.safetensors";
    write_raw(path, bytes.substr(0, cut));
    const std::string what = corruption_of(path);
    EXPECT_FALSE(what.empty());
  }
  EXPECT_NE(corruption_of((write_raw(dir_ / "c.st", bytes.substr(0, 5)), dir_ / "c.st")).find("fewer than"),
            std::string::npos);
  EXPECT_NE(corruption_of((write_raw(dir_ / "c.st", bytes.substr(0, 20)), dir_ / "c.st")).find("header length"),
            std::string::npos);
  EXPECT_NE(corruption_of((write_raw(dir_ / "c.st", bytes.substr(0, bytes.size() - 1)), dir_ / "c.st"))
                .find("data area has only"),
            std::string::npos);
  // Garbage appended after the last tensor is a defect too (the offsets no longer describe the file).
  write_raw(dir_ / "c.st", bytes + "xx");
  EXPECT_FALSE(corruption_of(dir_ / "c.st").empty());
}

TEST_F(SafetensorsTest, FlippedHeaderByteIsReported) {
  const Fixture f = make_fixture(14);
  const fs::path good = dir_ / "good.safetensors";
  lseq::write_safetensors(good.string(), f.inputs);
  const std::string bytes = read_file(good);
  std::string broken = bytes;
  broken[8] = 'x';  // the opening brace
  write_raw(dir_ / "b.st", broken);
  EXPECT_NE(corruption_of(dir_ / "b.st").find("not valid JSON"), std::string::npos);
  broken = bytes;
  const auto quote = broken.find("\"dtype\"");
  ASSERT_NE(quote, std::string::npos);
  broken[quote + 1] = 'D';  // "Dtype": the field is missing
  write_raw(dir_ / "b.st", broken);
  EXPECT_NE(corruption_of(dir_ / "b.st").find("no dtype"), std::string::npos);
  broken = bytes;
  const auto shape = broken.find("\"shape\":[2,3]");
  ASSERT_NE(shape, std::string::npos);
  broken[shape + 11] = '4';  // [2,4]: size no longer matches the offsets
  write_raw(dir_ / "b.st", broken);
  EXPECT_NE(corruption_of(dir_ / "b.st").find("needs 32 bytes"), std::string::npos);
}

TEST_F(SafetensorsTest, BadHeadersAreReportedOneLineEach) {
  const std::string data(16, '\x01');
  struct Case {
    std::string header, expected;
  };
  const Case cases[] = {
      {"[1,2]", "not a JSON object"},
      {R"({"a":{"dtype":"F32","shape":[2]}})", "no data_offsets"},
      {R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", "no shape"},
      {R"({"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", "unknown dtype 'Q4'"},
      {R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", "not a size"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", "end before they begin"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,12]}})", "needs 8 bytes"},
      {R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})", "data area has only 16"},
      {R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
       "overlaps"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", "belong to no tensor"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "the tensors use 8"},
      {R"({"__metadata__":{"k":1},"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", "metadata 'k'"},
      {R"({"a":"F32"})", "not an object"},
      // Found by fuzz/safetensors_fuzz.cpp: 2^62 elements of 8 bytes wrapped to 0 bytes and were accepted.
      {R"({"a":{"dtype":"I64","shape":[4611686018427387904],"data_offsets":[0,0]}})", "impossible shape"},
      {R"({"a":{"dtype":"F32","shape":[2147483648,2147483648],"data_offsets":[0,0]}})", "impossible shape"},
      // A name with a newline is shown escaped: the message stays one line.
      {R"({"a\nb":{"dtype":"F32","shape":[2],"data_offsets":[0,9]}})", "tensor 'a\\x0ab' (F32 [2]) needs 8 bytes"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.header);
    write_raw(dir_ / "h.st", handmade(c.header, data));
    const std::string what = corruption_of(dir_ / "h.st");
    EXPECT_NE(what.find(c.expected), std::string::npos) << what;
  }
  // The same tensors, well-formed, load.
  write_raw(dir_ / "h.st", handmade(R"({"b":{"dtype":"I64","shape":[1],"data_offsets":[8,16]},)"
                                    R"("a":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]}})",
                                    data));
  const auto file = lseq::SafetensorsFile::open((dir_ / "h.st").string());
  EXPECT_EQ(file.names(), (std::vector<std::string>{"a", "b"}));
}

TEST_F(SafetensorsTest, RequireNamesTensorFileAndBothShapes) {
  const Fixture f = make_fixture(15);
  const fs::path path = dir_ / "m.safetensors";
  lseq::write_safetensors(path.string(), f.inputs);
  const auto file = lseq::SafetensorsFile::open(path.string());
  EXPECT_NO_THROW(file.require("ids", "I64", {2, 2}));
  auto message_of = [&](const std::string& name, const std::string& dtype, const std::vector<std::int64_t>& shape) {
    try {
      file.require(name, dtype, shape);
    } catch (const lseq::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string wrong_shape = message_of("encoder.layer0.weight", "F32", {3, 2});
  for (const char* part : {"encoder.layer0.weight", "[2, 3]", "[3, 2]"})
    EXPECT_NE(wrong_shape.find(part), std::string::npos) << wrong_shape;
  EXPECT_NE(wrong_shape.find(path.string()), std::string::npos) << wrong_shape;
  const std::string wrong_dtype = message_of("step", "I64", {});
  EXPECT_NE(wrong_dtype.find("I32 []"), std::string::npos) << wrong_dtype;
  const std::string missing = message_of("decoder.out", "F32", {8});
  EXPECT_NE(missing.find("no tensor 'decoder.out'"), std::string::npos) << missing;
}

TEST_F(SafetensorsTest, MissingFileNamesThePath) {
  const std::string path = (dir_ / "absent.safetensors").string();
  try {
    lseq::SafetensorsFile::open(path);
    FAIL();
  } catch (const lseq::Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("No such file"), std::string::npos);
  }
}

}  // namespace
