// Shared by the fuzz targets: the input as a file that Loom can open by path
// (a memfd, so no disk traffic), and the one exception type bad input may
// throw. Anything else escaping a target (std::bad_alloc, std::out_of_range,
// a crash, a sanitizer report) is a finding.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace loom::fuzz {

// One in-memory file per process, rewritten with each input.
class InputFile {
 public:
  InputFile() {
    fd_ = memfd_create("loom-fuzz-input", 0);
    if (fd_ < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  const std::string& write(const uint8_t* data, size_t size) {
    if (ftruncate(fd_, 0) != 0 || pwrite(fd_, data, size, 0) != static_cast<ssize_t>(size)) {
      std::perror("memfd write");
      std::abort();
    }
    return path_;
  }

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace loom::fuzz
