// Damaging datastore files on purpose (tests of TokenDatastore and DenseDatastore): the error an
// open throws, a value written into a header, and a header checksum made right again.
#pragma once

#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <optional>
#include <string>

#include <specdec/error.hpp>
#include <specdec/index/token_datastore.hpp>

namespace specdec::testing {

/// The message of the error opening `path` as a Datastore throws ("" when it opens), checked to
/// be one line. Without `verify`, opened with the constructor's default (what a user gets).
template <class Datastore>
std::string open_error(const std::filesystem::path& path, std::optional<DatastoreVerify> verify = std::nullopt) {
  try {
    if (verify) Datastore ds(path, *verify);
    else Datastore ds(path);
  } catch (const error& e) {
    const std::string what = e.what();
    CHECK(what.find('\n') == std::string::npos);
    return what;
  }
  return "";
}

template <class T>
void poke(std::string& bytes, std::size_t offset, T value) {
  std::memcpy(bytes.data() + offset, &value, sizeof value);
}

/// Rewrites the header checksum so that a header edit reaches the check after it.
template <class Header>
void reseal(std::string& bytes) {
  Header h;
  std::memcpy(&h, bytes.data(), sizeof h);
  h.header_checksum = header_checksum(h);
  std::memcpy(bytes.data(), &h, sizeof h);
}

/// Rewrites the payload checksum (of everything after the header) and then the header checksum,
/// as an attacker crafting a file would: an edit then reaches every check but the checksums'.
template <class Header>
void seal(std::string& bytes) {
  Header h;
  std::memcpy(&h, bytes.data(), sizeof h);
  h.payload_checksum = datastore_checksum(bytes.data() + sizeof h, bytes.size() - sizeof h);
  std::memcpy(bytes.data(), &h, sizeof h);
  reseal<Header>(bytes);
}

}  // namespace specdec::testing
