// MappedFile: a whole file mapped read-only (PROT_READ, so a reader can never write it), the
// storage of the datastores (token_datastore.hpp, dense_datastore.hpp).
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>

#include <specdec/error.hpp>
#include <specdec/io/file_format.hpp>

namespace specdec {

class MappedFile {
 public:
  /// Maps `path`. Throws specdec::error starting with `who` when the file cannot be opened or
  /// mapped, is a directory or not a regular file, or has fewer than `header_bytes` bytes ("is
  /// truncated").
  MappedFile(const std::filesystem::path& path, const std::string& who, std::size_t header_bytes) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      const int why = errno;
      const std::string note = why == ENOENT || why == ENOTDIR ? missing_path_note(path) : std::string();
      throw error(who + " cannot be opened (" + std::strerror(why) + (note.empty() ? "" : "; " + note) + ")");
    }
    struct stat st {};
    if (::fstat(fd, &st) == 0 && !S_ISREG(st.st_mode)) {
      ::close(fd);
      throw error(who + (S_ISDIR(st.st_mode) ? " is a directory, not a file" : " is not a regular file"));
    }
    if (::fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(header_bytes)) {
      ::close(fd);
      throw error(who + " is truncated: " + std::to_string(st.st_size) + " bytes, the header alone has " +
                  std::to_string(header_bytes));
    }
    bytes_ = static_cast<std::size_t>(st.st_size);
    void* map = ::mmap(nullptr, bytes_, PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);  // the mapping keeps the file
    if (map == MAP_FAILED) throw error(who + " cannot be mapped (" + std::strerror(errno) + ")");
    map_ = map;
  }

  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& o) noexcept : map_(std::exchange(o.map_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  MappedFile& operator=(MappedFile&& o) noexcept {
    if (this != &o) {
      unmap();
      map_ = std::exchange(o.map_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  ~MappedFile() { unmap(); }

  const void* data() const { return map_; }
  std::size_t size() const { return bytes_; }

 private:
  void unmap() {
    if (map_) ::munmap(map_, bytes_);
    map_ = nullptr;
  }
  void* map_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace specdec
