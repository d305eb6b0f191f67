// The GGUF reader: parses the header through a bounds-checked cursor, so
// every count and length is compared with the bytes left in the file before
// anything is allocated.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <set>
#include <vector>

#include "loom/align.h"
#include "loom/error.h"
#include "loom/fault_injection.h"
#include "loom/gguf.h"

namespace loom::gguf {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr int kMaxNesting = 16;          // arrays of arrays; deeper is corrupt, not big

// Reads from the mapped file or through pread, always within the file size.
class Cursor {
 public:
  Cursor(const std::string& path, int fd, const uint8_t* map, uint64_t size)
      : path_(path), fd_(fd), map_(map), size_(size) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  void read(void* dst, uint64_t n, std::string_view what) {
    if (n > remaining())
      fail("{}: truncated file: {} needs {} bytes at offset {}, but the file has {} bytes", path_, what, n, pos_,
           size_);
    if (n == 0) return;  // dst may be null (an empty array's block): memcpy must not see it
    if (map_) {
      std::memcpy(dst, map_ + pos_, n);
    } else {
      if (pos_ < window_start_ || pos_ + n > window_start_ + window_.size()) {
        // Refill the read-ahead window: the header is parsed in small pieces.
        window_start_ = pos_;
        window_.resize(std::min<uint64_t>(std::max<uint64_t>(n, kWindow), size_ - pos_));
        read_at(window_.data(), window_.size(), pos_);
      }
      std::memcpy(dst, window_.data() + (pos_ - window_start_), n);
    }
    pos_ += n;
  }

  void read_at(void* dst, uint64_t n, uint64_t offset) const {
    auto* out = static_cast<uint8_t*>(dst);
    while (n > 0) {
      if (fault::should_fail(fault::Site::FileRead))
        fail("{}: read of {} bytes at offset {} failed: injected failure", path_, n, offset);
      const ssize_t got = ::pread(fd_, out, n, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) fail("{}: read of {} bytes at offset {} failed: {}", path_, n, offset, std::strerror(errno));
      if (got == 0)
        fail("{}: the file ends before offset {}, but it had {} bytes when it was opened: it changed while in use",
             path_, offset, size_);
      out += got;
      offset += got;
      n -= got;
    }
  }

  template <class T>
  T get(std::string_view what) {
    T v;
    read(&v, sizeof v, what);
    return v;
  }

  std::string string(std::string_view what) {
    const uint64_t len = get<uint64_t>(what);
    if (len > remaining())
      fail("{}: {} claims a string of {} bytes at offset {}, but only {} bytes remain", path_, what, len, pos_,
           remaining());
    std::string s(len, '\0');
    read(s.data(), len, what);
    return s;
  }

 private:
  const std::string& path_;
  int fd_;
  const uint8_t* map_;
  uint64_t size_;
  uint64_t pos_ = 0;
  static constexpr uint64_t kWindow = 1 << 20;
  std::vector<uint8_t> window_;
  uint64_t window_start_ = 0;
};

// Bytes one value of type t takes in the file at least: a string or an
// array is at least its 8-byte length.
size_t scalar_size(ValueType t) {
  const size_t n = element_bytes(t);
  return n ? n : 8;
}

bool valid_type(uint32_t t) { return t <= static_cast<uint32_t>(ValueType::F64); }

Value read_value(Cursor& c, ValueType type, const std::string& key, const std::string& path, int depth) {
  Value v;
  v.type = type;
  switch (type) {
    case ValueType::U8: v.data = uint64_t{c.get<uint8_t>(key)}; break;
    case ValueType::I8: v.data = int64_t{c.get<int8_t>(key)}; break;
    case ValueType::U16: v.data = uint64_t{c.get<uint16_t>(key)}; break;
    case ValueType::I16: v.data = int64_t{c.get<int16_t>(key)}; break;
    case ValueType::U32: v.data = uint64_t{c.get<uint32_t>(key)}; break;
    case ValueType::I32: v.data = int64_t{c.get<int32_t>(key)}; break;
    case ValueType::U64: v.data = c.get<uint64_t>(key); break;
    case ValueType::I64: v.data = c.get<int64_t>(key); break;
    case ValueType::F32: v.data = double{c.get<float>(key)}; break;
    case ValueType::F64: v.data = c.get<double>(key); break;
    case ValueType::Bool: {
      const uint8_t b = c.get<uint8_t>(key);
      if (b > 1) fail("{}: key '{}': bool value {} is neither 0 nor 1", path, key, b);
      v.data = b == 1;
      break;
    }
    case ValueType::String: v.data = c.string("key '" + key + "'"); break;
    case ValueType::Array: {
      if (depth >= kMaxNesting) fail("{}: key '{}': arrays nested more than {} deep", path, key, kMaxNesting);
      const uint32_t et = c.get<uint32_t>(key);
      if (!valid_type(et)) fail("{}: key '{}': unknown array element type {}", path, key, et);
      v.array_type = static_cast<ValueType>(et);
      const uint64_t n = c.get<uint64_t>(key);
      if (n > c.remaining() / scalar_size(v.array_type))
        fail("{}: key '{}' claims {} elements of {} but only {} bytes remain", path, key, n,
             value_type_name(v.array_type), c.remaining());
      // Stored compactly (see gguf::Array): scalars are read as one block.
      Array items(v.array_type);
      if (const size_t size = element_bytes(v.array_type); size != 0) {
        std::vector<uint8_t> block(n * size);
        c.read(block.data(), block.size(), key);
        if (v.array_type == ValueType::Bool)
          for (uint64_t i = 0; i < n; ++i)
            if (block[i] > 1) fail("{}: key '{}': bool element {} is {}, neither 0 nor 1", path, key, i, block[i]);
        items.append_scalars(block.data(), n);
      } else if (v.array_type == ValueType::String) {
        items.reserve(n);
        for (uint64_t i = 0; i < n; ++i) items.push_string(c.string("key '" + key + "'"));
      } else {
        items.reserve(n);
        for (uint64_t i = 0; i < n; ++i) items.push_back(read_value(c, v.array_type, key, path, depth + 1));
      }
      v.data = std::move(items);
      break;
    }
  }
  return v;
}

// A file that shrinks while it is mapped turns reads of the lost pages into
// SIGBUS. File::data() checks the size first; for reads after that (weights
// used in place while decoding) a SIGBUS handler recognises addresses inside
// a tracked mapping and stops the process with a message and exit status 1
// instead of a crash. Up to kMaxTrackedMaps files at once are tracked.
constexpr int kMaxTrackedMaps = 64;
struct TrackedMap {
  std::atomic<uintptr_t> begin{0}, end{0};
  std::atomic<const char*> path{nullptr};
};
TrackedMap g_maps[kMaxTrackedMaps];
struct sigaction g_previous_sigbus {};

void write_stderr(const char* text) {
  for (size_t n = std::strlen(text); n > 0;) {
    const ssize_t w = ::write(2, text, n);
    if (w <= 0) return;
    text += w;
    n -= static_cast<size_t>(w);
  }
}

void on_sigbus(int sig, siginfo_t* info, void* context) {
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  for (const TrackedMap& m : g_maps) {
    if (addr < m.begin.load() || addr >= m.end.load()) continue;
    write_stderr("loom: error: ");
    write_stderr(m.path.load());
    write_stderr(" changed while it was mapped (a read past its new end); stopping. Keep model files unchanged "
                 "while they are in use, or load with --no-mmap\n");
    _exit(1);
  }
  // Not a model file: whatever handled SIGBUS before.
  if (g_previous_sigbus.sa_flags & SA_SIGINFO) {
    g_previous_sigbus.sa_sigaction(sig, info, context);
  } else if (g_previous_sigbus.sa_handler != SIG_IGN && g_previous_sigbus.sa_handler != SIG_DFL) {
    g_previous_sigbus.sa_handler(sig);
  } else {
    signal(SIGBUS, SIG_DFL);
    raise(SIGBUS);
  }
}

void track_map(const void* base, uint64_t size, const char* path) {
  static const bool installed = [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    return sigaction(SIGBUS, &sa, &g_previous_sigbus) == 0;
  }();
  if (!installed) return;
  for (TrackedMap& m : g_maps) {
    uintptr_t free_slot = 0;
    if (!m.begin.compare_exchange_strong(free_slot, reinterpret_cast<uintptr_t>(base))) continue;
    m.path.store(path);
    m.end.store(reinterpret_cast<uintptr_t>(base) + size);
    return;
  }
}

void untrack_map(const void* base) {
  for (TrackedMap& m : g_maps)
    if (m.begin.load() == reinterpret_cast<uintptr_t>(base)) {
      m.end.store(0);
      m.path.store(nullptr);
      m.begin.store(0);
      return;
    }
}

}  // namespace

std::unique_ptr<File> File::open(const std::string& path, bool use_mmap) {
  std::unique_ptr<File> f(new File());
  f->path_ = path;
  f->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f->fd_ < 0) fail("cannot open {}: {}", path, std::strerror(errno));
  struct stat st {};
  if (fstat(f->fd_, &st) != 0) fail("cannot stat {}: {}", path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail("{} is not a regular file", path);
  f->file_size_ = static_cast<uint64_t>(st.st_size);
  if (use_mmap && f->file_size_ > 0) {
    void* m = mmap(nullptr, f->file_size_, PROT_READ, MAP_SHARED, f->fd_, 0);
    if (m == MAP_FAILED) fail("cannot mmap {} ({} bytes): {}", path, f->file_size_, std::strerror(errno));
    f->map_ = m;
    track_map(m, f->file_size_, f->path_.c_str());
  }
  f->parse();
  return f;
}

void File::populate(uint64_t offset, uint64_t size) const {
  if (!map_ || offset >= file_size_) return;
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t begin = offset / page * page, end = std::min(file_size_, offset + size);
  void* at = static_cast<uint8_t*>(map_) + begin;
  // Advice only: a failure changes nothing but the first touches' speed.
  // Kernels before 5.14 have no MADV_POPULATE_READ: read ahead instead.
  if (madvise(at, end - begin, MADV_POPULATE_READ) != 0) (void)posix_madvise(at, end - begin, POSIX_MADV_WILLNEED);
}

File::~File() {
  if (map_) {
    untrack_map(map_);
    munmap(map_, file_size_);
  }
  if (fd_ >= 0) ::close(fd_);
}

void File::parse() {
  Cursor c(path_, fd_, static_cast<const uint8_t*>(map_), file_size_);
  const std::string& p = path_;
  if (file_size_ < 24) fail("{}: {} bytes is too small for a GGUF header (24 bytes)", p, file_size_);
  const uint32_t magic = c.get<uint32_t>("magic");
  if (magic != kMagic) fail("{}: not a GGUF file (magic 0x{:08x}, expected 0x{:08x} \"GGUF\")", p, magic, kMagic);
  version_ = c.get<uint32_t>("version");
  if (version_ == 0x03000000 || version_ == 0x02000000) fail("{}: big-endian GGUF files are not supported", p);
  if (version_ != 2 && version_ != 3) fail("{}: GGUF version {} is not supported (2 and 3 are)", p, version_);
  const uint64_t n_tensors = c.get<uint64_t>("tensor count");
  const uint64_t n_kv = c.get<uint64_t>("metadata count");
  // Each key/value takes at least 8 + 1 + 4 + 1 bytes, each tensor info 8 + 1 + 4 + 8 + 4 + 8.
  if (n_kv > c.remaining() / 14) fail("{}: header claims {} metadata entries, more than the file can hold", p, n_kv);
  if (n_tensors > c.remaining() / 33) fail("{}: header claims {} tensors, more than the file can hold", p, n_tensors);

  std::set<std::string, std::less<>> keys;
  metadata_.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.string(fmt::format("metadata key #{}", i));
    if (!keys.insert(key).second) fail("{}: metadata key '{}' appears twice", p, key);
    const uint32_t t = c.get<uint32_t>(key);
    if (!valid_type(t)) fail("{}: key '{}' has unknown value type {}", p, key, t);
    Value v = read_value(c, static_cast<ValueType>(t), key, p, 0);
    metadata_.push_back({std::move(key), std::move(v)});
  }
  if (const Value* a = find("general.alignment")) {
    if (a->type != ValueType::U32) fail("{}: general.alignment must be u32, is {}", p, value_type_name(a->type));
    const uint64_t align = a->as_uint();
    if (align == 0 || (align & (align - 1)) != 0) fail("{}: general.alignment {} is not a power of two", p, align);
    alignment_ = align;
  }

  std::set<std::string, std::less<>> names;
  tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo t;
    t.name = c.string(fmt::format("tensor name #{}", i));
    if (!names.insert(t.name).second) fail("{}: tensor '{}' appears twice", p, t.name);
    t.n_dims = c.get<uint32_t>(t.name);
    if (t.n_dims < 1 || t.n_dims > 4) fail("{}: tensor '{}' has {} dims (1 to 4 allowed)", p, t.name, t.n_dims);
    int64_t count = 1;
    for (uint32_t d = 0; d < t.n_dims; ++d) {
      const uint64_t ne = c.get<uint64_t>(t.name);
      if (ne == 0 || ne > static_cast<uint64_t>(INT64_MAX) ||
          __builtin_mul_overflow(count, static_cast<int64_t>(ne), &count))
        fail("{}: tensor '{}' dim {} = {} is invalid (zero or overflowing)", p, t.name, d, ne);
      t.ne[d] = static_cast<int64_t>(ne);
    }
    t.type = c.get<uint32_t>(t.name);
    const TypeInfo* ti = type_info(t.type);
    if (!ti) fail("{}: tensor '{}' has unknown type id {}", p, t.name, t.type);
    if (t.ne[0] % ti->block_size != 0)
      fail("{}: tensor '{}' ({}) has ne0 = {}, not a multiple of the block size {}", p, t.name, ti->name, t.ne[0],
           ti->block_size);
    // Every product checked: an unchecked (ne0 / block) * type_size wrapped
    // to 0 bytes for ne0 = 2^62 and passed the bounds check below.
    uint64_t size = 0;
    bool overflow =
        __builtin_mul_overflow(static_cast<uint64_t>(t.ne[0] / ti->block_size), uint64_t{ti->type_size}, &size);
    for (int d = 1; d < 4 && !overflow; ++d)
      overflow = __builtin_mul_overflow(size, static_cast<uint64_t>(t.ne[d]), &size);
    if (overflow) fail("{}: tensor '{}' size overflows (ne = [{}, {}, {}, {}], {})", p, t.name, t.ne[0], t.ne[1],
                       t.ne[2], t.ne[3], ti->name);
    t.size = size;
    t.offset = c.get<uint64_t>(t.name);
    if (t.offset % alignment_ != 0)
      fail("{}: tensor '{}' offset {} is not a multiple of the alignment {}", p, t.name, t.offset, alignment_);
    tensors_.push_back(std::move(t));
  }
  data_offset_ = align_up(c.pos(), alignment_);
  const uint64_t data_size = file_size_ >= data_offset_ ? file_size_ - data_offset_ : 0;
  if (!tensors_.empty() && file_size_ < data_offset_)
    fail("{}: truncated file: the data section starts at {}, past the end ({} bytes)", p, data_offset_, file_size_);
  for (TensorInfo& t : tensors_) {
    if (t.offset > data_size || t.size > data_size - t.offset)
      fail("{}: tensor '{}' ({} bytes at data offset {}) extends past the end of the file: the data section has {} "
           "bytes (file truncated or offset corrupt)",
           p, t.name, t.size, t.offset, data_size);
    t.file_offset = data_offset_ + t.offset;
  }
  std::vector<const TensorInfo*> by_offset;
  for (const TensorInfo& t : tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo* prev = by_offset[i - 1];
    if (prev->offset + prev->size > by_offset[i]->offset)
      fail("{}: tensors '{}' and '{}' overlap in the data section", p, prev->name, by_offset[i]->name);
  }
}

const Value* File::find(std::string_view key) const {
  for (const auto& kv : metadata_)
    if (kv.key == key) return &kv.value;
  return nullptr;
}

const Value& File::get(std::string_view key) const {
  const Value* v = find(key);
  if (!v) fail("{}: metadata key '{}' is missing", path_, key);
  return *v;
}

uint64_t File::get_uint(std::string_view key) const {
  try {
    return get(key).as_uint();
  } catch (const Error& e) {
    if (!find(key)) throw;
    fail("{}: key '{}': {}", path_, key, e.what());
  }
}

float File::get_f32(std::string_view key) const {
  try {
    return static_cast<float>(get(key).as_float());
  } catch (const Error& e) {
    if (!find(key)) throw;
    fail("{}: key '{}': {}", path_, key, e.what());
  }
}

const std::string& File::get_string(std::string_view key) const {
  try {
    return get(key).as_string();
  } catch (const Error& e) {
    if (!find(key)) throw;
    fail("{}: key '{}': {}", path_, key, e.what());
  }
}

std::optional<uint64_t> File::get_uint_or(std::string_view key) const {
  if (!find(key)) return std::nullopt;
  return get_uint(key);
}

std::optional<float> File::get_f32_or(std::string_view key) const {
  if (!find(key)) return std::nullopt;
  return get_f32(key);
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

const uint8_t* File::data(const TensorInfo& t) const {
  if (!map_) return nullptr;
  // Refuse a file that changed size since it was mapped, before anyone reads it.
  struct stat st {};
  if (fstat(fd_, &st) != 0) fail("cannot stat {}: {}", path_, std::strerror(errno));
  if (static_cast<uint64_t>(st.st_size) != file_size_)
    fail("{}: the file is now {} bytes, {} when it was mapped: it changed while in use", path_, st.st_size,
         file_size_);
  return static_cast<const uint8_t*>(map_) + t.file_offset;
}

void File::read_tensor(const TensorInfo& t, void* dst, uint64_t offset, uint64_t size) const {
  if (offset > t.size || size > t.size - offset)
    fail("{}: tensor '{}': bytes [{}, {}) are outside its {} bytes", path_, t.name, offset, offset + size, t.size);
  if (map_) {
    std::memcpy(dst, static_cast<const uint8_t*>(map_) + t.file_offset + offset, size);
    return;
  }
  Cursor c(path_, fd_, nullptr, file_size_);
  c.read_at(dst, size, t.file_offset + offset);
}

}  // namespace loom::gguf
