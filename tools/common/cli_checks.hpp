// The checks every specdec command line (specbench, specdec-datastore, specdec-dense-datastore,
// specdec-ngram) makes before it starts work: an input that is not a readable regular file is
// named for what it is, an output that cannot be written is refused before a long run, a closed
// standard output is refused at once, and a failed write of the results (a full disk) ends in
// one line and a non-zero exit instead of a silent loss. Each check throws `Error` (the
// command's one-line input error: specdec::error, or specbench::input_error) naming the value.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <string_view>

#include <specdec/error.hpp>
#include <specdec/io/file_format.hpp>

namespace specdec::tools {

/// Throws `Error` unless `text`, the start of the text file `file` (`start`) or a later line of
/// it, can be UTF-8: the readers do not decode UTF-16, which Windows Notepad saves as "Unicode"
/// (a byte-order mark FF FE or FE FF first) and whose ASCII characters hold NUL bytes.
template <class Error = specdec::error>
void check_utf8_text(std::string_view text, const std::string& file, bool start) {
  if (start && (text.starts_with("\xFF\xFE") || text.starts_with("\xFE\xFF")))
    throw Error(file + " is UTF-16 text (Windows Notepad's \"Unicode\"): save it as UTF-8");
  if (text.find('\0') != std::string_view::npos)
    throw Error(file + " holds NUL bytes, which UTF-8 text has not (is it UTF-16?): save it as UTF-8");
}

/// Line `number` (from 1) of the text file `file`, as editors and tools write them: without the
/// UTF-8 byte-order mark some put at the file's start and without the carriage return of Windows
/// line endings. Throws `Error` where the file is not UTF-8 (check_utf8_text).
template <class Error = specdec::error>
std::string text_line(std::string line, int number, const std::string& file) {
  check_utf8_text<Error>(line, file, number == 1);
  if (number == 1 && line.starts_with("\xEF\xBB\xBF")) line.erase(0, 3);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

/// The check level of an `info` command's --verify (full) and --no-verify (header) flags, values
/// without either, and how its output line names it.
inline DatastoreVerify verify_level(bool verify, bool no_verify) {
  return verify ? DatastoreVerify::full : no_verify ? DatastoreVerify::header : DatastoreVerify::values;
}
inline const char* verify_words(DatastoreVerify level) {
  switch (level) {
    case DatastoreVerify::header: return "header checked, values not (--no-verify)";
    case DatastoreVerify::values: return "header and every stored value checked";
    case DatastoreVerify::full: return "header, every stored value and the payload checksum verified";
  }
  return "";
}

/// Throws unless `path`, the value of `what` (e.g. "--model"), is a regular file this process can
/// read: "no such file", "is a directory, not a file", "is not a regular file" or "cannot be
/// read (Permission denied)".
template <class Error = specdec::error>
void check_input_file(const std::filesystem::path& path, const std::string& what) {
  if (const std::string problem = specdec::file_problem(path); !problem.empty())
    throw Error(what + " " + path.string() + ": " + problem);
  if (::access(path.c_str(), R_OK) != 0)
    throw Error(what + " " + path.string() + ": cannot be read (" + std::strerror(errno) + ")");
}

/// Throws unless a file can be written at `path`, the value of `what`: not a directory (nor a
/// name that ends in /), in a directory that exists, and writable (the file itself when it
/// exists, else its directory).
template <class Error = specdec::error>
void check_output_file(const std::filesystem::path& path, const std::string& what) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec) || !path.has_filename())
    throw Error(what + " " + path.string() + ": is a directory, not a file");
  const std::filesystem::path dir = path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path();
  if (std::filesystem::is_regular_file(dir, ec))
    throw Error(what + " " + path.string() + ": " + dir.string() + " is a file, not a directory");
  if (!std::filesystem::is_directory(dir, ec)) {
    const std::string note = specdec::missing_path_note(dir);
    throw Error(what + " " + path.string() + ": its directory " + dir.string() + " does not exist" +
                (note.empty() ? "" : " (" + note + ")"));
  }
  const bool exists = std::filesystem::exists(path, ec);
  if (::access(exists ? path.c_str() : dir.c_str(), W_OK) != 0)
    throw Error(what + " " + path.string() + ": cannot be written (" + std::strerror(errno) + ")");
}

/// Throws unless `dir`, the value of `what`, is a writable directory, or can be created as one.
template <class Error = specdec::error>
void check_output_directory(const std::filesystem::path& dir, const std::string& what) {
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec))  // its parent must be writable; "out/" is the directory out
    return check_output_file<Error>(dir.has_filename() ? dir : dir.parent_path(), what);
  if (!std::filesystem::is_directory(dir, ec)) throw Error(what + " " + dir.string() + ": exists and is not a directory");
  if (::access(dir.c_str(), W_OK) != 0)
    throw Error(what + " " + dir.string() + ": cannot be written (" + std::strerror(errno) + ")");
}

/// Throws when standard output is closed (`>&-`): checked first, since a file the command opens
/// next would get its descriptor and receive what is printed.
template <class Error = specdec::error>
void check_stdout_open() {
  if (::fcntl(STDOUT_FILENO, F_GETFD) == -1) throw Error("standard output is closed: nowhere to write the results");
}

/// Flushes standard output; throws when anything written to it was lost (a full disk, a broken
/// pipe). The last statement of a command that prints its results.
template <class Error = specdec::error>
void finish_stdout() {
  errno = 0;
  std::cout.flush();
  int why = errno;  // the first failed write's reason
  const bool flushed = std::fflush(stdout) == 0;
  if (why == 0) why = errno;
  if (!std::cout || !flushed || std::ferror(stdout))
    throw Error(std::string("cannot write the results to standard output") +
                (why != 0 ? std::string(" (") + std::strerror(why) + ")" : std::string()));
}

}  // namespace specdec::tools
